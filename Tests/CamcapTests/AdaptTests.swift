import Foundation
import Testing
import TestSupport

/// `record --adapt`: what congestion control asks of the source, replayed on timestamps, judged by ffprobe.
@Suite struct AdaptTests {
    struct Frame {
        var key: Bool
        var bytes: Int
        var width: Int
        var height: Int
    }

    func probe(_ path: String) throws -> [Frame] {
        let r = try sh(
            "ffprobe",
            ["-v", "error", "-f", "h264", "-select_streams", "v", "-show_entries", "frame=key_frame,pkt_size,width,height", "-of", "csv=p=0", path])
        #expect(r.code == 0, "\(r.err)")
        return r.out.split(separator: "\n").compactMap { line in
            let f = line.split(separator: ",").map { Int($0) ?? -1 }
            return f.count == 4 ? Frame(key: f[0] == 1, bytes: f[1], width: f[2], height: f[3]) : nil
        }
    }

    @Test func scheduleChangesSizeRateAndBitrateLiveAndTheEncoderFollows() throws {
        let out = work + "/adapt.h264"
        let r = try sh(
            camcap,
            [
                "record", "-d", "fixture:uvc-webcam", "-s", "1280x720", "--fast", "--noise", "8", "--duration", "9",
                "--adapt", "0s:1280x720@30/2000,3s:640x360@15/600,6s:1280x720@30/2000", "-o", out,
            ])
        #expect(r.code == 0, "\(r.err)")
        let frames = try probe(out)
        let encoded = try #require(summaryValue(r.out, "encoded"))
        #expect(frames.count == encoded, "ffprobe decoded \(frames.count) of \(encoded)")
        // Runs of one size, in order: 720p for 3 s at 30, 360p for 3 s at 15, 720p for 3 s at 30.
        var runs: [(w: Int, h: Int, frames: [Frame])] = []
        for f in frames {
            if let last = runs.last, last.w == f.width && last.h == f.height {
                runs[runs.count - 1].frames.append(f)
            } else {
                runs.append((f.width, f.height, [f]))
            }
        }
        #expect(runs.map { "\($0.w)x\($0.h)" } == ["1280x720", "640x360", "1280x720"])
        guard runs.count == 3 else { return }
        for (run, expected) in zip(runs, [90, 45, 90]) {
            #expect(
                abs(run.frames.count - expected) <= 3,
                "\(run.w)x\(run.h): \(run.frames.count) frames, expected \(expected) (30/15/30 fps ±1 per second)")
        }
        // Each size change starts with an IDR (new SPS/PPS), decodable by ffprobe.
        #expect(runs[1].frames.first?.key == true && runs[2].frames.first?.key == true)
        // The bitrate set live, per segment (bytes as ffprobe counts them over 3 s).
        for (run, target) in zip(runs, [2000.0, 600.0, 2000.0]) {
            let kbps = Double(run.frames.reduce(0) { $0 + $1.bytes }) * 8 / 3 / 1000
            #expect(abs(kbps - target) / target <= 0.15, "\(run.w)x\(run.h): \(Int(kbps)) kbps against \(Int(target))")
        }
        // Per second of timestamps, as the pipeline counted them.
        let line = try #require(r.out.split(separator: "\n").first { $0.hasPrefix("frames/second:") })
        let perSecond = line.split(separator: " ").dropFirst().compactMap { Int($0) }
        #expect(perSecond.count == 9)
        for (n, want) in zip(perSecond, [30, 30, 30, 15, 15, 15, 30, 30, 30]) { #expect(abs(n - want) <= 1, "\(perSecond)") }
        #expect(r.out.contains("reconfigured:") && r.out.contains("640x360 at frame"))
    }

    @Test func aBadScheduleNamesTheStepAndWhatIsWrong() throws {
        for (schedule, words) in [
            ("0s:1280x720", "missing ':' or '@'"), ("0s:1280x720@30,0s:640x360@15", "times must increase"),
            ("1s:640x360@500", "frame rate must be 1...240"), ("x:640x360@15", "time must be"),
            ("0s:99999999x2@30", "step 1"), ("0s:640x360@15/5", "bitrate must be 10...100000 kbps"),
        ] {
            let r = try sh(camcap, ["record", "-d", "fixture:uvc-webcam", "--adapt", schedule, "-o", work + "/never.h264"])
            #expect(r.code != 0 && r.err.contains(words), "\(schedule): \(r.err)")
            #expect(!FileManager.default.fileExists(atPath: work + "/never.h264"))
        }
    }
}
