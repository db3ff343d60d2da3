// Issue 36: `camcap record` leaves recordings every player opens (fragmented MP4 with the capture clock), in
// segments, and keeps what was written when killed or when the disk fills. Judged by ffprobe and GStreamer.
import Foundation
import Testing
import TestSupport

/// ffprobe's per-packet presentation times and key flags (`pts_time,flags`), and the frames' sizes.
private func packets(_ path: String) throws -> [(pts: Double, key: Bool)] {
    let r = try sh("ffprobe", ["-v", "error", "-select_streams", "v:0", "-show_entries", "packet=pts_time,flags", "-of", "csv=p=0", path])
    #expect(r.code == 0, "\(r.err)")
    return r.out.split(separator: "\n").compactMap { line in
        let f = line.split(separator: ",")
        guard f.count >= 2, let t = Double(f[0]) else { return nil }
        return (t, f[1].hasPrefix("K"))
    }
}

private func frameSizes(_ path: String) throws -> [String] {
    let r = try sh("ffprobe", ["-v", "error", "-select_streams", "v:0", "-show_entries", "frame=width,height", "-of", "csv=p=0", path])
    #expect(r.code == 0 && r.err.isEmpty, "\(r.err)")
    return r.out.split(separator: "\n").map(String.init)
}

private func decodedCount(_ path: String) throws -> Int {
    let r = try sh(
        "ffprobe", ["-v", "error", "-count_frames", "-select_streams", "v:0", "-show_entries", "stream=nb_read_frames", "-of", "csv=p=0", path])
    return Int(r.out.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
}

/// Frames GStreamer's qtdemux + avdec_h264 decode (counted by a fakesink's handoffs printed with -v).
private func gstreamerFrames(_ path: String) throws -> Int {
    let r = try sh(
        "gst-launch-1.0", ["-v", "filesrc", "location=\(path)", "!", "qtdemux", "!", "h264parse", "!", "avdec_h264", "!", "fakesink", "silent=false"])
    #expect(r.code == 0, "\(r.err)")
    return r.out.components(separatedBy: "fakesink0: last-message = chain").count - 1
}

@Suite(.serialized) struct RecordingTests {
    /// The default output is MP4: 90 frames of the fixture webcam at 30 fps have presentation times k/30 s, play
    /// 3.0 s, and decode in ffmpeg and GStreamer.
    @Test func recordWritesAnMP4WithTheCaptureClock() throws {
        let out = "rec-default.mp4"
        let r = try sh(camcap, ["record", "-d", "fixture:uvc-webcam", "-s", "640x480", "--fast", "--frames", "90", "-o", out, "-q"])
        #expect(r.code == 0, "\(r.err)")
        #expect(r.out.contains("fragmented MP4") && r.out.contains("90 frames on disk"), "\(r.out)")
        let p = try packets(work + "/" + out)
        #expect(p.count == 90 && p.first?.key == true)
        let worst = p.enumerated().map { abs($0.element.pts - Double($0.offset) / 30) }.max() ?? 1
        #expect(worst < 0.001, "largest |pts - k/30| \(worst)")
        let duration = try sh("ffprobe", ["-v", "error", "-show_entries", "format=duration", "-of", "csv=p=0", work + "/" + out])
        #expect(abs((Double(duration.out.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0) - 3.0) < 0.002, "\(duration.out)")
        #expect(try gstreamerFrames(work + "/" + out) == 90)
    }

    /// vivid's 12.5 fps (a fractional rate): 25 frames 80 ms apart, 2.0 s.
    @Test func aFractionalRateIsExact() throws {
        let r = try sh(camcap, ["record", "-d", "fixture:vivid", "-s", "1280x720", "--fast", "--frames", "25", "-o", "vivid.mp4", "-q"])
        #expect(r.code == 0, "\(r.err)")
        let p = try packets(work + "/vivid.mp4")
        #expect(p.count == 25)
        #expect(p.enumerated().allSatisfy { abs($0.element.pts - Double($0.offset) * 0.08) < 0.001 }, "\(p.map(\.pts))")
    }

    /// An adaptation schedule that changes rate and size: the presentation times follow the frames kept (30, then
    /// 15, then 30 fps), and both sizes decode through the change in ffmpeg and GStreamer.
    @Test func anAdaptScheduleChangesRateAndSizeAndPlaysThrough() throws {
        let r = try sh(
            camcap,
            [
                "record", "-d", "fixture:uvc-webcam", "-s", "640x480", "--fast", "--duration", "3", "-o", "adapt.mp4", "-q",
                "--adapt", "0s:640x480@30,1s:320x240@15,2s:640x480@30",
            ])
        #expect(r.code == 0, "\(r.err)")
        let path = work + "/adapt.mp4"
        let p = try packets(path)
        let gaps = zip(p.dropFirst(), p).map { ($0.pts - $1.pts) * 1000 }
        // 30 fps for the first second, 15 in the second, 30 again: gaps of 33 and 67 ms.
        let fast = gaps.filter { abs($0 - 33.3) < 1 }.count, slow = gaps.filter { abs($0 - 66.7) < 1 }.count
        #expect(p.count >= 72 && p.count <= 77 && fast >= 55 && slow >= 13 && fast + slow == gaps.count, "\(p.count) packets, gaps \(gaps)")
        let sizes = try frameSizes(path)
        #expect(sizes.count == p.count && Set(sizes) == ["640,480", "320,240"], "\(Set(sizes))")
        #expect(try gstreamerFrames(path) == p.count)
    }

    /// A camera mounted at 90° (the fixture iPhone): the pixels stay as captured and the track header's matrix
    /// turns them (ffprobe's display matrix, mediainfo's rotation); --apply-rotation turns the pixels instead.
    @Test func aRotatedCameraIsRecordedWithItsDisplayMatrix() throws {
        let r = try sh(camcap, ["record", "-d", "fixture:iphone", "-s", "640x480", "--fast", "--frames", "10", "-o", "iphone.mp4", "-q"])
        #expect(r.code == 0, "\(r.err)")
        let s = try sh("ffprobe", ["-v", "error", "-select_streams", "v:0", "-show_streams", "-of", "json", work + "/iphone.mp4"])
        #expect(s.out.contains("\"rotation\": -90"), "\(s.out)")
        let sizes = try frameSizes(work + "/iphone.mp4")
        let landscape = sizes.first.map { $0.split(separator: ",").map { Int($0) ?? 0 } } ?? [0, 0]
        #expect(sizes.count == 10 && landscape[0] > landscape[1], "coded as captured (landscape): \(sizes)")
        let info = try sh("mediainfo", ["--Inform=Video;%Rotation%", work + "/iphone.mp4"])
        #expect(info.out.hasPrefix("90"), "\(info.out)")
        let upright = try sh(
            camcap, ["record", "-d", "fixture:iphone", "-s", "640x480", "--fast", "--frames", "10", "--apply-rotation", "-o", "upright.mp4", "-q"])
        #expect(upright.code == 0, "\(upright.err)")
        let turned = try frameSizes(work + "/upright.mp4")
        #expect(turned.first == "\(landscape[1]),\(landscape[0])", "\(turned)")
        let noMatrix = try sh("ffprobe", ["-v", "error", "-select_streams", "v:0", "-show_streams", "-of", "json", work + "/upright.mp4"])
        #expect(!noMatrix.out.contains("\"rotation\""), "\(noMatrix.out)")
    }

    /// `--segment-seconds 2 --keep 3` over 10 s: five segments written, the last three kept, each starting with a
    /// key frame at time 0, and together exactly the frames of the last 6 s (frame numbers contiguous, every
    /// frame's time its capture time).
    @Test func segmentsRingKeepsTheLastFilesAndLosesNoFrame() throws {
        let dir = work + "/ring"
        try? FileManager.default.removeItem(atPath: dir)
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let r = try sh(
            camcap,
            [
                "record", "-d", "fixture:uvc-webcam", "-s", "640x480", "--fast", "--duration", "10", "--keyint-seconds", "5",
                "--segment-seconds", "2", "--keep", "3", "-o", dir + "/seg.mp4", "-q",
            ])
        #expect(r.code == 0, "\(r.err)")
        let files = (try FileManager.default.contentsOfDirectory(atPath: dir)).sorted()
        #expect(files == ["seg-002.mp4", "seg-003.mp4", "seg-004.mp4"], "\(files)")
        #expect(r.out.contains("5 written (fragmented MP4), 3 kept, 2 deleted, 300 frames"), "\(r.out)")
        var next = 120 // the first kept segment starts at frame 120 (4 s at 30 fps)
        for f in files {
            let p = try packets(dir + "/" + f)
            #expect(p.first?.key == true && p.first?.pts == 0, "\(f) starts with \(String(describing: p.first))")
            #expect(p.enumerated().allSatisfy { abs($0.element.pts - Double($0.offset) / 30) < 0.001 }, "\(f): \(p.map(\.pts))")
            #expect(
                r.out.contains("\(dir)/\(f): frames \(next)...\(next + p.count - 1), from \(String(format: "%.3f", Double(next) / 30)) s"), "\(r.out)"
            )
            #expect(try decodedCount(dir + "/" + f) == p.count)
            next += p.count
        }
        #expect(next == 300, "the kept segments end at frame \(next)")
    }

    /// SIGKILL in the middle of a recording: the file plays up to its last complete fragment; every frame of
    /// every complete fragment decodes.
    @Test func aKilledRecordingPlaysToItsLastCompleteFragment() throws {
        let path = work + "/killed.mp4"
        try? FileManager.default.removeItem(atPath: path)
        let r = try sh(
            camcap, ["record", "-d", "fixture:uvc-webcam", "-s", "640x480", "--fast", "--duration", "600", "-o", path],
            interruptWhen: { err in
                // Killed once the progress line shows at least three fragments on disk.
                err.components(separatedBy: " fragments").dropLast().contains { before in
                    let number = before.split(separator: " ").last.map(String.init) ?? ""
                    return (Int(number) ?? 0) >= 3
                }
            }, signal: SIGKILL)
        #expect(r.code == SIGKILL || r.code == 9 || r.code == 137, "exit \(r.code)")
        let bytes = [UInt8](FileManager.default.contents(atPath: path) ?? Data())
        let layout = mp4Layout(bytes)
        let complete = layout.fragments.last { $0.end <= bytes.count }?.frames ?? 0
        #expect(complete >= 60, "complete fragments hold \(complete) frames")
        #expect(!layout.types.contains("mfra"), "a killed recording has no index")
        let decoded = try decodedCount(path)
        #expect(decoded == complete, "decoded \(decoded), complete fragments hold \(complete)")
        print("SIGKILL: \(bytes.count) bytes on disk, \(layout.fragments.count) fragments complete, \(decoded) frames decoded")
    }

    /// A disk that fills mid-recording (a 512 KiB tmpfs, a noisy picture): camcap stops with the error naming the file and the
    /// cause, and the file plays up to its last complete fragment.
    @Test(.enabled(if: getuid() == 0, "mounting a tmpfs needs root")) func aFullDiskLeavesAPlayableFile() throws {
        let dir = work + "/small-disk"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let mount = try sh("mount", ["-t", "tmpfs", "-o", "size=512k", "tmpfs", dir])
        guard mount.code == 0 else {
            Issue.record("cannot mount a tmpfs: \(mount.err)")
            return
        }
        defer { _ = try? sh("umount", [dir]) }
        let path = dir + "/full.mp4"
        let r = try sh(
            camcap, ["record", "-d", "fixture:uvc-webcam", "-s", "640x480", "--noise", "8", "--fast", "--duration", "60", "-o", path, "-q"])
        #expect(r.code != 0 && r.err.contains(path) && r.err.contains("No space left on device"), "exit \(r.code): \(r.err)")
        let bytes = [UInt8](FileManager.default.contents(atPath: path) ?? Data())
        let layout = mp4Layout(bytes)
        let complete = layout.fragments.last { $0.end <= bytes.count }?.frames ?? 0
        let decoded = try decodedCount(path)
        #expect(complete > 0 && decoded == complete, "decoded \(decoded), complete fragments hold \(complete)")
        print("full disk: \(bytes.count) bytes written, \(complete) frames in complete fragments, \(decoded) decoded")
    }

    /// Raw H.264 states the negotiated rate in its SPS: ffprobe's r_frame_rate is the camera's 30/1 (it assumed
    /// 25 before), and 12.5 fps is 25/2.
    @Test func annexBRecordingsStateTheirRate() throws {
        for (device, rate) in [("fixture:uvc-webcam", "30/1"), ("fixture:vivid", "25/2")] {
            let r = try sh(camcap, ["record", "-d", device, "-s", "1280x720", "--fast", "--frames", "20", "-o", "rate.h264", "-q"])
            #expect(r.code == 0, "\(r.err)")
            let p = try sh("ffprobe", ["-v", "error", "-show_entries", "stream=r_frame_rate", "-of", "csv=p=0", work + "/rate.h264"])
            #expect(p.out.trimmingCharacters(in: .whitespacesAndNewlines) == rate, "\(device): \(p.out)")
        }
    }

    /// Headless Chromium plays the recording in a `<video>`: its duration is the recording's, the frames'
    /// presentation times (requestVideoFrameCallback's mediaTime) are the capture times, and a seek to the middle
    /// shows the frame captured there (of ffmpeg's decodes of frames 40...50, the browser's picture is closest to 45).
    @Test func chromiumPlaysTheRecordingAndSeeksToTheRightFrame() throws {
        let path = work + "/browser.mp4"
        let r = try sh(camcap, ["record", "-d", "fixture:uvc-webcam", "-s", "640x480", "--fast", "--frames", "90", "-o", path, "-q"])
        #expect(r.code == 0, "\(r.err)")
        let shot = work + "/browser-seek.png"
        try? FileManager.default.removeItem(atPath: shot)
        let b = try sh("/usr/bin/python3", [repo + "/Scripts/mp4-browser.py", path, "--seek", "1.5", "--frames", "20", "--png", shot])
        #expect(b.code == 0, "\(b.err)")
        guard let json = try? JSONSerialization.jsonObject(with: Data(b.out.utf8)) as? [String: Any] else {
            Issue.record("no JSON from the browser: \(b.out) \(b.err)")
            return
        }
        #expect(json["error"] == nil, "\(json)")
        let duration = json["duration"] as? Double ?? 0
        #expect(abs(duration - 3.0) < 0.05, "duration \(duration)")
        #expect(json["width"] as? Int == 640 && json["height"] as? Int == 480, "\(json)")
        let times = json["mediaTimes"] as? [Double] ?? []
        // A browser on a busy machine may skip frames while playing: every time shown is a capture time (k/30).
        #expect(times.count >= 10 && times.allSatisfy { abs($0 * 30 - ($0 * 30).rounded()) < 0.03 }, "\(times)")
        #expect(zip(times.dropFirst(), times).allSatisfy { $0 > $1 }, "\(times)")
        #expect(abs((json["seekMediaTime"] as? Double ?? json["currentTime"] as? Double ?? 0) - 1.5) < 0.02, "\(json)")
        // Which decoded frame the browser's picture is.
        let refs = work + "/browser-ref"
        try? FileManager.default.removeItem(atPath: refs)
        try FileManager.default.createDirectory(atPath: refs, withIntermediateDirectories: true)
        let d = try sh(
            "ffmpeg", ["-v", "error", "-i", path, "-vf", "select='between(n,40,50)'", "-vsync", "0", "-start_number", "40", refs + "/f%02d.png"])
        #expect(d.code == 0, "\(d.err)")
        var psnr: [Int: Double] = [:]
        for n in 40...50 {
            let q = try sh("ffmpeg", ["-i", shot, "-i", refs + "/f\(n).png", "-lavfi", "psnr", "-f", "null", "-"])
            if let range = q.err.range(of: "average:") {
                let v = q.err[range.upperBound...].prefix { !$0.isWhitespace }
                psnr[n] = v == "inf" ? 100 : Double(v) ?? 0
            }
        }
        let best = psnr.max { $0.value < $1.value }
        #expect(best?.key == 45 && (best?.value ?? 0) > 30, "PSNR against frames 40...50: \(psnr.sorted { $0.key < $1.key })")
        print(
            "chromium: duration \(duration) s, \(times.count) frames timed, seek shows frame \(best?.key ?? -1) at \(String(format: "%.1f", best?.value ?? 0)) dB"
        )
    }

    /// Options that cannot work are refused before the camera starts, naming the value.
    @Test func badRecordingOptionsAreNamed() throws {
        for (args, message) in [
            (["--container", "avi"], "--container must be mp4 or h264, got \"avi\""),
            (["--segment-seconds", "0"], "segment length 0.0 s is out of range"),
            (["--keep", "3"], "keeping 3 files needs segments"),
            (["--segment-seconds", "2", "--keep", "0"], "keep 0 is out of range"),
            (["--fragment-seconds", "nan"], "fragment length nan s is out of range"),
            (["--segment-seconds", "1", "--keep-scope", "pattern"], "keep scope pattern needs a number of files to keep"),
            (["--segment-seconds", "1", "--keep", "2", "--keep-scope", "all"], "--keep-scope must be run or pattern"),
        ] {
            let r = try sh(camcap, ["record", "-d", "fixture:uvc-webcam", "--frames", "5", "-o", "never.mp4"] + args)
            #expect(r.code != 0 && r.err.contains(message), "\(args): \(r.err)")
            #expect(!FileManager.default.fileExists(atPath: work + "/never.mp4"))
        }
    }
}
