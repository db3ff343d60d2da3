import Foundation
import Testing
import TestSupport

/// `--encoder` (#51) on a machine without a V4L2 memory-to-memory encoder (this one: no /dev/video): auto and
/// openh264 behave as before, v4l2m2m is refused naming the value, and so is a value that is none of them.
@Suite(.serialized) struct EncoderCLITests {
    /// Every encoding command, with what it needs to start (its own options), the encoder option appended.
    static let commands: [(String, [String])] = [
        ("record", ["record", "-d", "fixture:uvc-webcam", "--frames", "3", "--fast", "-q", "-o", work + "/enc.mp4"]),
        ("serve", ["serve", "-d", "fixture:uvc-webcam", "--frames", "3", "--no-auth", "--listen", "127.0.0.1:0", "-q"]),
        ("rtsp", ["rtsp", "-d", "fixture:uvc-webcam", "--frames", "3", "--listen", "127.0.0.1:0", "-q"]),
        ("stream", ["stream", "-d", "fixture:uvc-webcam", "--frames", "3", "--to", "127.0.0.1:5999", "-q"]),
        ("publish", ["publish", "-d", "fixture:uvc-webcam", "--frames", "3", "--whip", "http://127.0.0.1:9/whip", "-q"]),
    ]

    @Test("a value that is not an encoder is a usage error naming it, on every encoding command")
    func badValue() throws {
        for (name, args) in Self.commands {
            let r = try sh(camcap, args + ["--encoder", "x264"])
            #expect(r.code != 0, "\(name)")
            #expect(r.err.contains("--encoder must be auto, openh264 or v4l2m2m[:/dev/videoN], got \"x264\""), "\(name): \(r.err)")
        }
    }

    @Test("v4l2m2m without an encoder on the machine, or with a node that is none, is refused naming the value")
    func noEncoder() throws {
        for (name, args) in Self.commands {
            let r = try sh(camcap, args + ["--encoder", "v4l2m2m"])
            #expect(r.code == 1, "\(name): \(r.err)")
            #expect(r.err.contains("--encoder v4l2m2m: no V4L2 memory-to-memory encoder found"), "\(name): \(r.err)")
        }
        let r = try sh(camcap, Self.commands[0].1 + ["--encoder", "v4l2m2m:/dev/video77"])
        #expect(r.code == 1)
        #expect(r.err.contains("--encoder v4l2m2m:/dev/video77: /dev/video77"), "\(r.err)")
        #expect(!FileManager.default.fileExists(atPath: work + "/enc.mp4") || r.code == 1)
    }

    @Test("auto and openh264 record exactly as before: OpenH264, no encoder line in the summary")
    func autoIsOpenH264Here() throws {
        var summaries: [String] = []
        for choice in [nil, "auto", "openh264"] {
            let out = work + "/auto-\(choice ?? "default").mp4"
            let r = try sh(
                camcap,
                ["record", "-d", "fixture:uvc-webcam", "-s", "640x480", "--frames", "5", "--fast", "-q", "-o", out]
                    + (choice.map { ["--encoder", $0] } ?? []))
            #expect(r.code == 0, "\(r.err)")
            #expect(summaryValue(r.out, "encoded") == 5)
            #expect(!r.out.contains("encoder:"), "\(r.out)")
            summaries.append(r.out.split(separator: "\n").filter { $0.hasPrefix("frames:") || $0.hasPrefix("key frames:") }.joined(separator: "\n"))
        }
        #expect(Set(summaries).count == 1, "\(summaries)")
        let devices = try sh(camcap, ["devices"])
        #expect(devices.code == 0 && !devices.out.contains("Encoders"), "no encoder section without encoders")
    }
}
