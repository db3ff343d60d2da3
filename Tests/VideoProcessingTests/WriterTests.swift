// Issue 11: output is never lost. OutputFile writes into the path given (links and devices are written
// through), locks it against a second writer, leaves an existing file alone until the first flush, reports
// every write error and counts only bytes the kernel took.
import Foundation
import Testing
import VideoCapture
@testable import VideoProcessing

private func file(_ name: String, _ contents: String? = nil) -> String {
    let p = scratchDir + "/w-" + name
    try? FileManager.default.removeItem(atPath: p)
    if let contents { _ = FileManager.default.createFile(atPath: p, contents: Data(contents.utf8)) }
    return p
}
private func contents(_ p: String) -> String? { FileManager.default.contents(atPath: p).map { String(decoding: $0, as: UTF8.self) } }

@Test func anExistingFileIsUntouchedUntilTheFirstFlush() throws {
    let p = file("keep.bin", "precious")
    do {
        let f = try OutputFile(path: p)
        try f.write(Array("new".utf8))
        #expect(contents(p) == "precious", "buffered bytes do not touch the file")
        f.discard()
    }
    #expect(contents(p) == "precious")
    do { _ = try OutputFile(path: p) } // opened and dropped: a start that failed
    #expect(contents(p) == "precious")
    let f = try OutputFile(path: p)
    try f.close() // closed without writing: still untouched
    #expect(contents(p) == "precious")
    let g = try OutputFile(path: p)
    try g.write(Array("new".utf8))
    try g.close()
    #expect(contents(p) == "new", "the first flush truncates, then writes")
}

@Test func aFileOpenedButNeverWrittenIsNotLeftBehind() throws {
    let p = file("unused.h264")
    do { _ = try OutputFile(path: p) }
    #expect(!FileManager.default.fileExists(atPath: p))
    let f = try OutputFile(path: p)
    #expect(FileManager.default.fileExists(atPath: p), "created at open, so the path is known to be writable")
    try f.close()
    #expect(!FileManager.default.fileExists(atPath: p))
    let g = try OutputFile(path: p)
    try g.commit()
    try g.close()
    #expect(contents(p) == "", "commit() keeps an empty output on purpose")
}

@Test func aSecondWriterIsRefusedWithTheFileName() throws {
    let p = file("locked.h264")
    let first = try OutputFile(path: p)
    let e = #expect(throws: ProcessingError.self) { _ = try OutputFile(path: p) }
    #expect(e?.message == "\(p) is being written by another writer (it holds the file's lock): refusing to write it at the same time")
    #expect(throws: ProcessingError.self) { _ = try Y4MWriter(path: p, width: 16, height: 16, fps: Fraction(30)) }
    try first.close()
    let second = try OutputFile(path: p) // free again once the first is closed
    second.discard()
}

@Test func symlinksAndDevicesAreWrittenThroughNotReplaced() throws {
    let target = file("target.y4m", "old")
    let link = file("link.y4m")
    try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: target)
    let w = try Y4MWriter(path: link, width: 16, height: 16, fps: Fraction(30))
    try w.write(pattern(16, 16))
    try w.close()
    let attrs = try FileManager.default.attributesOfItem(atPath: link)
    #expect(attrs[.type] as? FileAttributeType == .typeSymbolicLink, "the link is still a link")
    #expect(contents(target)?.hasPrefix("YUV4MPEG2 W16 H16") == true)
    let header = "YUV4MPEG2 W16 H16 F30:1 Ip A1:1 C420jpeg XCOLORRANGE=LIMITED\n".utf8.count
    let expected: Int64 = Int64(header + 6 + 16 * 16 * 3 / 2)
    #expect(w.bytesWritten == expected)
    // A device node: written through, still a device afterwards.
    let null = try OutputFile(path: "/dev/null")
    try null.write(Array(repeating: 1, count: 200_000))
    try null.close()
    #expect(null.bytesWritten == 200_000)
    #expect((try FileManager.default.attributesOfItem(atPath: "/dev/null"))[.type] as? FileAttributeType == .typeCharacterSpecial)
}

@Test func writeErrorsAreReportedAndOnlyAcceptedBytesCounted() throws {
    let full = try OutputFile(path: "/dev/full")
    try full.write(Array(repeating: 0, count: 1000))
    #expect(full.bytesWritten == 0 && full.bytesPending == 1000)
    let e = #expect(throws: ProcessingError.self) { try full.flush() }
    #expect(e?.message == "writing /dev/full failed after 0 bytes: No space left on device")
    #expect(full.bytesWritten == 0)
    full.discard()
    // Large writes bypass the buffer; counts follow what write(2) accepted.
    let p = file("count.bin")
    let f = try OutputFile(path: p, bufferSize: 4096)
    try f.write(Array(repeating: 7, count: 100))
    #expect(f.bytesWritten == 0)
    try f.write(Array(repeating: 8, count: 10_000))
    #expect(f.bytesWritten == 10_100 && f.bytesPending == 0)
    try f.close()
    #expect(FileManager.default.contents(atPath: p)?.count == 10_100)
    // A FIFO nobody reads: an error at once, never a blocked open.
    let fifo = file("out.fifo")
    #expect(mkfifo(fifo, 0o600) == 0)
    let ff = #expect(throws: ProcessingError.self) { _ = try OutputFile(path: fifo) }
    #expect(ff?.message == "cannot write \(fifo): it is a FIFO that no process is reading")
    let dir = #expect(throws: ProcessingError.self) { _ = try OutputFile(path: scratchDir) }
    #expect(dir?.message.contains("cannot write \(scratchDir)") == true)
}

@Test func aFailedSnapshotLeavesNoFile() throws {
    // An unwritable target: nothing created, the error names the path.
    let e = #expect(throws: ProcessingError.self) { try SnapshotWriter.write(pattern(16, 16), to: "/dev/full") }
    #expect(e?.message.contains("/dev/full") == true)
    let fifo = file("snap.png")
    #expect(mkfifo(fifo, 0o600) == 0)
    #expect(throws: ProcessingError.self) { try SnapshotWriter.write(pattern(16, 16), to: fifo) }
    let ok = file("ok.png")
    try SnapshotWriter.write(pattern(16, 16), to: ok)
    #expect((FileManager.default.contents(atPath: ok)?.count ?? 0) > 100)
}

@Test func aSnapshotOpenedEarlyIsWrittenOnlyAtTheEnd() throws {
    let p = file("early.png", "old picture")
    let f = try OutputFile(path: p) // before the camera starts: checked and locked
    #expect(throws: ProcessingError.self) { _ = try OutputFile(path: p) }
    #expect(contents(p) == "old picture")
    try SnapshotWriter.write(pattern(32, 16), to: f)
    let (rc, out, _) = try run("ffprobe", ["-v", "error", "-show_entries", "stream=codec_name,width,height", "-of", "csv=p=0", p])
    #expect(rc == 0 && out.trimmingCharacters(in: .whitespacesAndNewlines) == "png,32,16")
    // No picture came: the early-opened file is given up and a new one disappears again.
    let q = file("never.jpg")
    let g = try OutputFile(path: q)
    g.discard()
    #expect(!FileManager.default.fileExists(atPath: q))
}
