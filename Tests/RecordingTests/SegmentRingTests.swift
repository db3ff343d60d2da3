// Issues 47 and 53: the segment ring on its own, without a writer: names (never one on disk), directories made as
// needed, closed segments, deletion beyond `keep` (this run's files, or the pattern's), and bounded memory.
import Foundation
import Testing
import VideoProcessing
@testable import Recording

/// A fresh directory under the scratch folder.
private func freshDirectory(_ name: String) throws -> String {
    let dir = scratch + "/" + name
    try? FileManager.default.removeItem(atPath: dir)
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    return dir
}

/// Creates the ring's next file and leaves it on disk with `bytes` (an empty created file would be removed).
private func writeNext(_ ring: inout SegmentRing, _ bytes: [UInt8] = [1]) throws -> String {
    let file = try ring.nextFile()
    try file.write(bytes)
    try file.close()
    return file.path
}

/// A file at `path` holding `contents`.
private func touch(_ path: String, contents: Data) {
    #expect(FileManager.default.createFile(atPath: path, contents: contents), "cannot create \(path)")
}

private func names(_ dir: String) throws -> [String] { try FileManager.default.contentsOfDirectory(atPath: dir).sorted() }

/// A pattern without `%` numbers its files before the extension, after the highest number on disk; a strftime
/// name that is taken gets `_001`, `_002` … (after the highest suffix on disk), which sort after the name itself;
/// one file is the pattern itself.
@Test func theRingNamesEverySegmentApart() throws {
    let dir = try freshDirectory("ring-names")
    var numbered = SegmentRing(pattern: dir + "/cam.mp4", segmented: true, keep: nil)
    let first = try writeNext(&numbered)
    numbered.closed(path: first, frames: 60, startNs: 0)
    #expect([first, try writeNext(&numbered)] == [dir + "/cam-000.mp4", dir + "/cam-001.mp4"])

    // A restart: an earlier run's cam-000…001 and a stray cam-007.mp4 (a 0-byte file a SIGKILL left) are kept.
    touch(dir + "/cam-007.mp4", contents: Data())
    touch(dir + "/cam-x.mp4", contents: Data([9]))
    var restarted = SegmentRing(pattern: dir + "/cam.mp4", segmented: true, keep: nil)
    #expect(try writeNext(&restarted) == dir + "/cam-008.mp4")

    var dated = SegmentRing(pattern: dir + "/%Y.h264", segmented: true, keep: nil)
    let a = try writeNext(&dated), b = try writeNext(&dated)
    #expect(!a.contains("%") && a.hasSuffix(".h264") && b == a.replacingOccurrences(of: ".h264", with: "_001.h264"))
    touch(a.replacingOccurrences(of: ".h264", with: "_004.h264"), contents: Data([1]))
    var again = SegmentRing(pattern: dir + "/%Y.h264", segmented: true, keep: nil)
    #expect(try writeNext(&again) == a.replacingOccurrences(of: ".h264", with: "_005.h264"))
    // The name itself deleted (an earlier run's `keep`): a restart still continues after the highest suffix.
    try FileManager.default.removeItem(atPath: a)
    var third = SegmentRing(pattern: dir + "/%Y.h264", segmented: true, keep: nil)
    #expect(try writeNext(&third) == a.replacingOccurrences(of: ".h264", with: "_006.h264"))
    let year = (a as NSString).lastPathComponent
    #expect([year, "x" + year].sorted().first == year && [(b as NSString).lastPathComponent, year].sorted().first == year)

    var single = SegmentRing(pattern: dir + "/one.mp4", segmented: false, keep: nil)
    let once = try single.nextFile().path, twice = try single.nextFile().path
    #expect(once == dir + "/one.mp4" && twice == dir + "/one.mp4")
}

/// Nothing on disk is opened by the ring: a file, a directory and a dangling symbolic link at the next name are
/// stepped over, their contents untouched.
@Test func theRingNeverOpensANameOnDisk() throws {
    let dir = try freshDirectory("ring-exclusive")
    try Data([7, 7]).write(to: URL(fileURLWithPath: dir + "/cam-000.mp4"))
    try FileManager.default.createSymbolicLink(atPath: dir + "/cam-001.mp4", withDestinationPath: dir + "/nowhere.mp4")
    var ring = SegmentRing(pattern: dir + "/cam.mp4", segmented: true, keep: nil)
    #expect(try writeNext(&ring) == dir + "/cam-002.mp4")
    #expect(FileManager.default.contents(atPath: dir + "/cam-000.mp4") == Data([7, 7]))
    #expect(!FileManager.default.fileExists(atPath: dir + "/nowhere.mp4"))
    // A taken strftime name whose suffixed names are taken too (a directory among them).
    let base = dir + "/t-" + String(Calendar.current.component(.year, from: Date())) + ".mp4"
    touch(base, contents: Data([1]))
    try FileManager.default.createDirectory(atPath: base.replacingOccurrences(of: ".mp4", with: "_001.mp4"), withIntermediateDirectories: false)
    var dated = SegmentRing(pattern: dir + "/t-%Y.mp4", segmented: true, keep: nil)
    #expect(try writeNext(&dated) == base.replacingOccurrences(of: ".mp4", with: "_002.mp4"))
}

/// Closed segments count their frames on from the last; `keep` deletes the oldest files this recording wrote
/// (one already gone counts as deleted), counting the file still open; a segment without frames is not one.
@Test func theRingKeepsTheNewestFiles() throws {
    let dir = try freshDirectory("ring")
    var ring = SegmentRing(pattern: dir + "/seg.mp4", segmented: true, keep: 2)
    for i in 0..<4 {
        let path = try writeNext(&ring)
        if i == 1 { try FileManager.default.removeItem(atPath: path) } // the second is gone already
        ring.closed(path: path, frames: 30 + i, startNs: Int64(i) * 1_000_000_000)
        try ring.prune(open: 0)
    }
    ring.closed(path: dir + "/seg-004.mp4", frames: 0, startNs: 4_000_000_000)
    #expect(ring.segments.map(\.firstFrame) == [0, 30, 61, 93] && ring.segments.map(\.frames) == [30, 31, 32, 33])
    #expect(ring.segments.map(\.deleted) == [true, true, false, false] && ring.written == 4 && ring.deleted == 2)
    #expect(try names(dir) == ["seg-002.mp4", "seg-003.mp4"])
    try ring.prune(open: 1)
    #expect(ring.segments.map(\.deleted) == [true, true, true, false])
}

/// `keep` counts this run's files only by default: an earlier run's files stay whatever their number. With the
/// scope `.pattern` the ring on disk is counted, earlier runs' files deleted first (oldest first); names that only
/// look alike (`cam-backup.mp4`, another extension) are not the ring's and stay.
@Test func keepDeletesThisRunsFilesUnlessTheScopeIsThePattern() throws {
    let dir = try freshDirectory("ring-scope")
    for n in 0..<3 { touch(dir + "/cam-00\(n).mp4", contents: Data([UInt8(n)])) }
    for other in ["cam-backup.mp4", "cam-003.h264", "cam-03.mp4"] { touch(dir + "/" + other, contents: Data([5])) }
    var run = SegmentRing(pattern: dir + "/cam.mp4", segmented: true, keep: 1)
    for _ in 0..<3 {
        let path = try writeNext(&run)
        run.closed(path: path, frames: 1, startNs: 0)
        try run.prune(open: 0)
    }
    #expect(try names(dir) == ["cam-000.mp4", "cam-001.mp4", "cam-002.mp4", "cam-003.h264", "cam-005.mp4", "cam-03.mp4", "cam-backup.mp4"])

    var ring = SegmentRing(pattern: dir + "/cam.mp4", segmented: true, keep: 2, scope: .pattern)
    let path = try writeNext(&ring)
    try ring.prune(open: 1)
    #expect(path == dir + "/cam-006.mp4" && ring.deletedEarlier == 3)
    #expect(try names(dir) == ["cam-003.h264", "cam-005.mp4", "cam-006.mp4", "cam-03.mp4", "cam-backup.mp4"])

    // A dated ring in dated directories: the earlier files are found below the fixed directory.
    let dated = try freshDirectory("ring-scope-dated")
    try FileManager.default.createDirectory(atPath: dated + "/20200101/07", withIntermediateDirectories: true)
    touch(dated + "/20200101/07/cam-0000.mp4", contents: Data([1]))
    touch(dated + "/20200101/07/cam-0000_001.mp4", contents: Data([1]))
    touch(dated + "/20200101/07/notes.txt", contents: Data([1]))
    var d = SegmentRing(pattern: dated + "/%Y%m%d/%H/cam-%M%S.mp4", segmented: true, keep: 2, scope: .pattern)
    _ = try writeNext(&d)
    try d.prune(open: 1)
    #expect(d.deletedEarlier == 1 && !FileManager.default.fileExists(atPath: dated + "/20200101/07/cam-0000.mp4"))
    #expect(FileManager.default.fileExists(atPath: dated + "/20200101/07/notes.txt"))
}

/// The directories of a name below the pattern's first `%` are made as needed, with the mode of the directory
/// they are made in, and removed once the ring deleted their last file; the fixed directory must exist.
@Test func theRingMakesAndRemovesItsDirectories() throws {
    let dir = try freshDirectory("ring-dirs")
    try FileManager.default.setAttributes([.posixPermissions: 0o750], ofItemAtPath: dir)
    var ring = SegmentRing(pattern: dir + "/%Y/%m/cam-%H%M%S.mp4", segmented: true, keep: 1)
    let path = try writeNext(&ring)
    let month = (path as NSString).deletingLastPathComponent, year = (month as NSString).deletingLastPathComponent
    for d in [month, year] {
        let mode = try FileManager.default.attributesOfItem(atPath: d)[.posixPermissions] as? Int
        #expect(mode == 0o750 & ~Int(umaskNow()), "\(d): \(String(mode ?? 0, radix: 8))")
    }
    // The directories of an old segment go with its last file (a year directory of an earlier run, made by hand).
    try FileManager.default.createDirectory(atPath: dir + "/1999/12", withIntermediateDirectories: true)
    touch(dir + "/1999/12/cam-235959.mp4", contents: Data([1]))
    ring.closed(path: dir + "/1999/12/cam-235959.mp4", frames: 1, startNs: 0)
    ring.closed(path: path, frames: 1, startNs: 0)
    try ring.prune(open: 0)
    #expect(!FileManager.default.fileExists(atPath: dir + "/1999") && FileManager.default.fileExists(atPath: path))

    var missing = SegmentRing(pattern: dir + "/nowhere/%Y/cam.mp4", segmented: true, keep: nil)
    #expect(throws: ProcessingError.self) { try missing.nextFile() }
}

/// The umask in force (read by setting it and back).
private func umaskNow() -> mode_t {
    let m = umask(0o022)
    umask(m)
    return m
}

/// Over 5,000 segments the ring holds what it may delete and the last `remembered` segments, not every segment.
@Test func theRingsMemoryIsBounded() throws {
    var ring = SegmentRing(pattern: scratch + "/ring-bounded/%Y.mp4", segmented: true, keep: 3)
    for i in 0..<5_000 {
        ring.closed(path: scratch + "/ring-bounded/gone-\(i).mp4", frames: 2, startNs: Int64(i))
        try ring.prune(open: 1)
    }
    #expect(ring.segments.count == ring.remembered && ring.remembered == 100)
    #expect(ring.written == 5_000 && ring.deleted == 4_998 && ring.framesBefore == 10_000)
    #expect(ring.segments.last?.firstFrame == 9_998 && ring.segments.suffix(2).allSatisfy { !$0.deleted })
    #expect(ring.segments.dropLast(2).allSatisfy { $0.deleted })
}
