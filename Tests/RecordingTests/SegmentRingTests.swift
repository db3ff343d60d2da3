// Issue 47: the segment ring on its own, without a writer: names, closed segments, deletion beyond `keep`.
import Foundation
import Testing
import Recording

/// A pattern without `%` numbers its files before the extension; a strftime pattern that gives the same name twice
/// (two segments in one second) gets a further suffix; one file is the pattern itself.
@Test func theRingNamesEverySegmentApart() {
    var numbered = SegmentRing(pattern: "/rec/cam.mp4", segmented: true, keep: nil)
    var names = [numbered.nextPath()]
    numbered.closed(path: names[0], frames: 60, startNs: 0)
    names.append(numbered.nextPath())
    #expect(names == ["/rec/cam-000.mp4", "/rec/cam-001.mp4"])
    var dated = SegmentRing(pattern: "/rec/%Y.h264", segmented: true, keep: nil)
    let first = dated.nextPath(), second = dated.nextPath()
    #expect(!first.contains("%") && first.hasSuffix(".h264") && second == first.replacingOccurrences(of: ".h264", with: "-1.h264"))
    var single = SegmentRing(pattern: "/rec/one.mp4", segmented: false, keep: nil)
    #expect(single.nextPath() == "/rec/one.mp4" && single.nextPath() == "/rec/one.mp4")
}

/// Closed segments count their frames on from the last; `keep` deletes the oldest files this recording wrote
/// (one already gone counts as deleted), counting the file still open.
@Test func theRingKeepsTheNewestFiles() throws {
    let dir = scratch + "/ring"
    try? FileManager.default.removeItem(atPath: dir)
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    var ring = SegmentRing(pattern: dir + "/seg.mp4", segmented: true, keep: 2)
    for i in 0..<4 {
        let path = ring.nextPath()
        if i != 1 { FileManager.default.createFile(atPath: path, contents: Data([1])) } // the second is gone already
        ring.closed(path: path, frames: 30 + i, startNs: Int64(i) * 1_000_000_000)
        try ring.prune(open: 0)
    }
    #expect(ring.segments.map(\.firstFrame) == [0, 30, 61, 93] && ring.segments.map(\.frames) == [30, 31, 32, 33])
    #expect(ring.segments.map(\.deleted) == [true, true, false, false])
    let left = try FileManager.default.contentsOfDirectory(atPath: dir).sorted()
    #expect(left == ["seg-002.mp4", "seg-003.mp4"])
    try ring.prune(open: 1)
    #expect(ring.segments.map(\.deleted) == [true, true, true, false])
}
