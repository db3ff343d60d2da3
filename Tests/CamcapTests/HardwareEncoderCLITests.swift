import Foundation
import Testing
import TestSupport

/// #51's watchdog seen from outside: camcap with the simulated Raspberry Pi encoder
/// (`--encoder v4l2m2m:fixture:bcm2835?…`, `FixtureM2MDevice`), which stops giving coded frames after a given one,
/// as bcm2835-codec is reported to. The encoder is restarted after 1 s without output, and after three failures
/// OpenH264 takes over.
@Suite(.serialized, .timeLimit(.minutes(3))) struct HardwareEncoderCLITests {
    /// A browser watching `serve` while the encoder stalls after its 100th frame: one freeze, over within 2 s, and
    /// the pictures come back (the restarted encoder starts with a key frame). The summary says what happened.
    @Test(.enabled(if: chromiumAvailable)) func aViewerSeesOneFreezeWhenTheEncoderStalls() throws {
        let server = try ServeProcess(
            ["-d", "fixture:uvc-webcam", "-s", "640x480", "--encoder", "v4l2m2m:fixture:bcm2835?stall-after=100", "--listen", "127.0.0.1:0"],
            name: "serve-m2m-stall")
        #expect(!server.url.isEmpty, "\(server.err)")
        let b = try chromium(server.pageURL, frames: 240)
        #expect(b["ok"] as? Bool == true, "\(b)")
        let first = b["first"] as? [String: Any], last = b["last"] as? [String: Any]
        let sent = int(b, "framesSent"), decoded = int(last, "framesDecoded") - int(first, "framesDecoded")
        let freezeSeconds = (last?["totalFreezesDuration"] as? Double ?? -1) - (first?["totalFreezesDuration"] as? Double ?? 0)
        print("FIGURE m2m stall under serve: decoded \(decoded) of \(sent), freezes \(int(last, "freezeCount")), frozen \(freezeSeconds) s")
        #expect(sent >= 240 && decoded >= sent - 20, "decoded \(decoded) of \(sent)")
        #expect(int(last, "freezeCount") <= 1, "\(String(describing: last))")
        #expect(freezeSeconds >= 0 && freezeSeconds < 2.0, "frozen \(freezeSeconds) s in all: the restart takes 1 s")
        // /stats names the tier's encoder, the path its pictures take and what the watchdog did.
        let tier = (try server.stats()["tiers"] as? [[String: Any]])?.first ?? [:]
        #expect((tier["encoder"] as? String)?.hasPrefix("v4l2m2m ") == true, "\(tier)")
        #expect(tier["encoderInput"] as? String == "copied" && (tier["copiedFrames"] as? Int ?? 0) >= 100, "\(tier)")
        #expect((tier["watchdog"] as? String)?.contains("restarted once") == true, "\(tier)")
        #expect(server.stop() == 0, "\(server.err)")
        #expect(server.out.contains("failed once (no output for 1.0 s); restarted once"), "\(server.out)")
    }

    /// Three stalls: the third failure hands the stage to OpenH264, every frame asked for is in the file (ffprobe
    /// decodes them), and the summary says the encoder fell back.
    @Test func threeStallsFallBackToOpenH264AndLoseNoFrame() throws {
        let out = work + "/m2m-fallback.h264"
        let r = try sh(
            camcap,
            [
                "record", "-d", "fixture:uvc-webcam", "-s", "640x480", "--frames", "120", "--encoder",
                "v4l2m2m:fixture:bcm2835?stall-after=20&stalls=3", "-o", out,
            ])
        #expect(r.code == 0, "\(r.err)")
        let text = r.out + r.err
        #expect(text.contains("failed 3 times (no output for 1.0 s); fell back to OpenH264"), "\(text)")
        #expect(text.contains("OpenH264 (the fallback)"), "\(text)")
        let (frames, size) = try probeFrames(out)
        #expect(frames == 120 && size == "640x480", "\(frames) \(size)")
    }

    /// `--fast` runs the hardware encoder on the encoder thread: every frame in the file, and the summary counts the
    /// pictures copied in as the encoder ended (it said 0 when it read the description at the start).
    @Test func fastRunsTheHardwareEncoderOnItsThread() throws {
        let out = work + "/m2m-fast.h264"
        let r = try sh(
            camcap,
            ["record", "-d", "fixture:uvc-webcam", "-s", "640x480", "--fast", "--frames", "60", "--encoder", "v4l2m2m:fixture:bcm2835", "-o", out])
        #expect(r.code == 0, "\(r.err)")
        #expect(r.out.contains("copied: 1 copy per frame (60 copied)") && r.out.contains("on the encoder's own thread"), "\(r.out)")
        let (frames, size) = try probeFrames(out)
        #expect(frames == 60 && size == "640x480", "\(frames) \(size)")
    }

    /// The first SPS NAL unit (type 7) of an Annex-B stream, without its start code.
    static func firstSPS(_ bytes: [UInt8]) -> [UInt8]? {
        var i = 0
        var starts: [Int] = []
        while i + 3 <= bytes.count {
            if bytes[i] == 0, bytes[i + 1] == 0, bytes[i + 2] == 1 {
                starts.append(i + 3)
                i += 3
            } else {
                i += 1
            }
        }
        for (n, s) in starts.enumerated() where s < bytes.count && bytes[s] & 0x1F == 7 {
            var end = n + 1 < starts.count ? starts[n + 1] - 3 : bytes.count
            while end > s, bytes[end - 1] == 0 { end -= 1 } // a 4-byte start code's leading zero
            return Array(bytes[s..<end])
        }
        return nil
    }

    /// `stream --sdp-only` announces the SPS of the encoder the stream will run: with the simulated Raspberry Pi
    /// encoder it is that encoder's SPS (as `record` writes it with the same encoder), not OpenH264's.
    @Test func sdpOnlyAnnouncesTheHardwareEncodersSPS() throws {
        func announced(_ encoder: String) throws -> [UInt8] {
            let sdp = work + "/m2m-\(encoder.count).sdp"
            let r = try sh(
                camcap,
                ["stream", "-d", "fixture:uvc-webcam", "-s", "640x480", "--to", "127.0.0.1:5004", "--sdp", sdp, "--sdp-only", "--encoder", encoder])
            #expect(r.code == 0, "\(r.err)")
            let text = try String(contentsOfFile: sdp, encoding: .utf8)
            let sets = text.range(of: "sprop-parameter-sets=").map {
                text[$0.upperBound...].prefix { $0 != "," && $0 != ";" && $0 != "\r" && $0 != "\n" }
            }
            return try #require(sets.flatMap { Data(base64Encoded: String($0)) }.map { [UInt8]($0) }, "\(text)")
        }
        let hardware = try announced("v4l2m2m:fixture:bcm2835"), software = try announced("openh264")
        let out = work + "/m2m-sps.h264"
        let r = try sh(
            camcap, ["record", "-d", "fixture:uvc-webcam", "-s", "640x480", "--frames", "5", "--encoder", "v4l2m2m:fixture:bcm2835", "-o", out])
        #expect(r.code == 0, "\(r.err)")
        let recorded = try #require(Self.firstSPS([UInt8](try Data(contentsOf: URL(fileURLWithPath: out)))))
        // The file's SPS is the encoder's with VUI timing added by the Annex-B writer: the same up to the VUI (the
        // profile, level, sizes and frame numbering), where OpenH264's already differs.
        #expect(recorded.starts(with: hardware.prefix(10)), "announced \(hardware), recorded \(recorded)")
        #expect(hardware.prefix(10) != software.prefix(10), "the simulated encoder's SPS begins as OpenH264's: the test cannot tell them apart")
    }
}
