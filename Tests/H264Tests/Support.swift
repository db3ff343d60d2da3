import Foundation
import Testing
import VideoCapture
import VideoProcessing
import FixtureCameras
import H264
@_exported import MediaTestSupport

let scratch = scratchDirectory("h264-tests")

/// ffprobe's per-frame key flags of an H.264 file, in decode order.
func keyFrameFlags(_ path: String) throws -> [Bool] {
    let (rc, out, err) = try run(
        "ffprobe", ["-v", "error", "-f", "h264", "-show_frames", "-show_entries", "frame=key_frame", "-of", "csv=p=0", path])
    #expect(rc == 0, "\(err)")
    return out.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) == "1" }
}

/// ffprobe's decoded frame count and size.
func probe(_ path: String) throws -> (frames: Int, width: Int, height: Int, profile: String) {
    let (rc, out, err) = try run(
        "ffprobe",
        ["-v", "error", "-f", "h264", "-count_frames", "-show_entries", "stream=nb_read_frames,width,height,profile", "-of", "csv=p=0", path])
    #expect(rc == 0, "\(err)")
    let f = out.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: ",").map(String.init)
    guard f.count >= 4 else {
        Issue.record("ffprobe said: \(out)")
        return (0, 0, 0, "")
    }
    return (Int(f[3]) ?? -1, Int(f[1]) ?? -1, Int(f[2]) ?? -1, f[0])
}
