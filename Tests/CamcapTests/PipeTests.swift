// Issue 50 (pipes): `-` is standard output for --y4m, --i420, -o and --preview. The pictures or the stream go to the
// pipe, the summary to standard error; a reader that goes away (EPIPE) ends the run with exit 0 and a line that says
// so. Judges: ffprobe reading the pipe, and the bytes themselves.
import Foundation
import Testing
import TestSupport

/// Runs camcap with standard output into a pipe: reads up to `limit` bytes (all when nil), then closes the read end
/// (a reader that goes away), and waits. Exit code, the bytes read, and standard error (kept in a file meanwhile).
private func piped(_ args: [String], limit: Int? = nil) throws -> (code: Int32, out: [UInt8], err: String) {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: camcap)
    p.arguments = args
    let errPath = work + "/pipe-\(UUID().uuidString).err"
    _ = FileManager.default.createFile(atPath: errPath, contents: nil)
    let errFile = try FileHandle(forWritingTo: URL(fileURLWithPath: errPath))
    let out = Pipe()
    (p.standardOutput, p.standardError) = (out, errFile)
    try p.run()
    var got: [UInt8] = []
    let reader = out.fileHandleForReading
    while limit.map({ got.count < $0 }) ?? true {
        let chunk = reader.availableData // blocks until some bytes or the end
        if chunk.isEmpty { break }
        got += chunk
    }
    if let limit, got.count > limit { got.removeLast(got.count - limit) }
    try reader.close()
    p.waitUntilExit()
    try errFile.close()
    return (p.terminationStatus, got, (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? "")
}

/// ffprobe on bytes (through a file: ffprobe reads what we give it whole).
private func probe(_ bytes: [UInt8], _ name: String, format: [String] = []) throws -> String {
    let path = work + "/" + name
    try Data(bytes).write(to: URL(fileURLWithPath: path))
    return try sh(
        "ffprobe", ["-v", "error"] + format + ["-count_frames", "-show_entries", "stream=width,height,nb_read_frames", "-of", "csv=p=0", path]
    )
    .out.trimmingCharacters(in: .whitespacesAndNewlines)
}

@Suite(.serialized, .timeLimit(.minutes(3))) struct PipeTests {
    @Test func y4mAndRawI420GoToStandardOutputAndTheSummaryToStandardError() throws {
        let y4m = try piped(["preview", "-d", "fixture:vivid", "-s", "320x180", "--frames", "30", "--y4m", "-"])
        #expect(y4m.code == 0, "\(y4m.err)")
        #expect(Array(y4m.out.prefix(9)) == Array("YUV4MPEG2".utf8), "standard output is the Y4M stream alone")
        #expect(try probe(y4m.out, "piped.y4m") == "320,180,30")
        #expect(y4m.err.contains("y4m:") && y4m.err.contains("standard output (30 frames)"), "the summary is on standard error: \(y4m.err)")
        // Raw I420: 30 pictures of 320x180, planes packed (86,400 bytes each), nothing else.
        let raw = try piped(["preview", "-d", "fixture:vivid", "-s", "320x180", "--frames", "30", "--i420", "-", "-q"])
        #expect(raw.code == 0 && raw.out.count == 30 * 86_400, "\(raw.out.count) bytes: \(raw.err)")
        #expect(raw.err.contains("i420:") && raw.err.contains("(30 frames of 320x180, planes packed)"), "\(raw.err)")
        let frames = try probe(raw.out, "piped.yuv", format: ["-f", "rawvideo", "-pixel_format", "yuv420p", "-video_size", "320x180"])
        #expect(frames == "320,180,30", "ffmpeg reads it as rawvideo: \(frames)")
    }

    @Test func aRecordingGoesToStandardOutputAsAnnexBOrFragmentedMP4() throws {
        let annexB = try piped(["record", "-d", "fixture:vivid", "-s", "320x180", "--frames", "60", "-o", "-", "-q"])
        #expect(annexB.code == 0 && Array(annexB.out.prefix(4)) == [0, 0, 0, 1], "Annex-B from the first byte: \(annexB.err)")
        #expect(try probe(annexB.out, "piped.h264", format: ["-f", "h264"]) == "320,180,60")
        #expect(annexB.err.contains("output:") && annexB.err.contains("standard output (Annex-B"), "\(annexB.err)")
        let mp4 = try piped(["record", "-d", "fixture:vivid", "-s", "320x180", "--frames", "60", "-o", "-", "--container", "mp4", "-q"])
        #expect(mp4.code == 0 && Array(mp4.out.dropFirst(4).prefix(4)) == Array("ftyp".utf8), "\(mp4.err)")
        #expect(try probe(mp4.out, "piped.mp4") == "320,180,60")
        // Segments need files; two outputs cannot share standard output.
        let segmented = try sh(camcap, ["record", "-d", "fixture:vivid", "-o", "-", "--segment-seconds", "2", "--frames", "10"])
        #expect(segmented.code != 0 && segmented.err.contains("segments need a file pattern: standard output (-) is one stream"), "\(segmented.err)")
        let both = try sh(camcap, ["record", "-d", "fixture:vivid", "-o", "-", "--preview", "-", "--frames", "10"])
        #expect(both.code != 0 && both.err.contains("-o and --preview cannot both be standard output (-)"), "\(both.err)")
    }

    /// `camcap preview --i420 - | head -c 200000`: the reader goes away after 2.3 pictures; camcap stops at once,
    /// says why and exits 0 (not killed by SIGPIPE, not an error).
    @Test func aReaderThatGoesAwayEndsTheRunCleanly() throws {
        let r = try piped(["preview", "-d", "fixture:vivid", "-s", "320x180", "--frames", "100000", "--i420", "-"], limit: 200_000)
        #expect(r.code == 0, "exit \(r.code): \(r.err.suffix(500))")
        #expect(r.err.contains("camcap: stopped after ") && r.err.contains("the reader of standard output went away (EPIPE)"), "\(r.err.suffix(500))")
        #expect(!r.err.contains("error:"), "\(r.err.suffix(500))")
    }
}
