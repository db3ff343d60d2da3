import Foundation
import SystemIO

#if canImport(Glibc)
    import Glibc
#endif

/// A segment of a recording, written and closed.
public struct RecordedSegment: Sendable, Equatable {
    /// Its path.
    public var path: String
    /// Frames in it.
    public var frames: Int
    /// Index of its first frame in the recording (0 for the first frame written).
    public var firstFrame: Int
    /// Capture time of its first frame, in nanoseconds from the recording's first frame.
    public var startNs: Int64
    /// True when the ring deleted it again (`keep`).
    public var deleted: Bool
}

/// The files of a recording cut into segments: their names, the segments closed so far, and the deletion of the
/// oldest beyond `keep`. What `RecordingOutput` cuts files with; the writers are its own.
///
/// Names: strftime's `%Y %m %d %H %M %S …` in the pattern are replaced by the local time at which the segment
/// starts; a pattern without `%` gets `-NNN` (the segment's number) before its extension. Two segments that would
/// get the same name (two in one second) are told apart by a further `-K`. A recording that is not segmented has
/// one file, the pattern itself.
package struct SegmentRing {
    /// The output path, or with segments the pattern.
    package let pattern: String
    /// False: one file, named `pattern`.
    package let segmented: Bool
    /// Keep at most this many segment files, deleting the oldest this recording wrote; nil keeps all.
    package let keep: Int?
    /// Segments closed so far, oldest first.
    package private(set) var segments: [RecordedSegment] = []
    /// Frames in the segments closed so far: the index of the next segment's first frame.
    package private(set) var framesBefore = 0
    private var namesUsed = Set<String>()

    /// The deletion of an old segment failed (not for a file that is gone already).
    package struct DeletionFailed: Error {
        /// The segment's path.
        package var path: String
        /// strerror's text.
        package var reason: String
    }

    package init(pattern: String, segmented: Bool, keep: Int?) {
        self.pattern = pattern
        self.segmented = segmented
        self.keep = keep
    }

    /// The name of the next file (the first one, then one per closed segment), never one used before.
    package mutating func nextPath() -> String {
        guard segmented else { return pattern }
        var base: String
        if pattern.contains("%") {
            var parts = SystemClock.localTime()
            var buffer = [CChar](repeating: 0, count: 4096)
            let n = strftime(&buffer, buffer.count, pattern, &parts)
            base = n > 0 ? String(decoding: buffer.prefix(n).map { UInt8(bitPattern: $0) }, as: UTF8.self) : pattern
        } else {
            base = Self.inserting("-" + String(format: "%03d", segments.count), into: pattern)
        }
        var candidate = base
        var k = 1
        while namesUsed.contains(candidate) {
            candidate = Self.inserting("-\(k)", into: base)
            k += 1
        }
        namesUsed.insert(candidate)
        return candidate
    }

    /// `path` with `suffix` before its extension.
    private static func inserting(_ suffix: String, into path: String) -> String {
        let ns = path as NSString
        let ext = ns.pathExtension
        return ns.deletingPathExtension + suffix + (ext.isEmpty ? "" : "." + ext)
    }

    /// Records a segment closed: `frames` frames from `startNs` (capture time from the recording's first frame).
    package mutating func closed(path: String, frames: Int, startNs: Int64) {
        segments.append(RecordedSegment(path: path, frames: frames, firstFrame: framesBefore, startNs: startNs, deleted: false))
        framesBefore += frames
    }

    /// Deletes the oldest segments so that at most `keep` files exist, `open` of them still being written. A file
    /// already gone counts as deleted.
    package mutating func prune(open: Int) throws(DeletionFailed) {
        guard let keep else { return }
        var onDisk = segments.filter { !$0.deleted }.count + open
        for i in segments.indices where onDisk > keep && !segments[i].deleted {
            do { try FileSystem.unlink(segments[i].path) } catch  where error.errno == ENOENT {} catch {
                throw DeletionFailed(path: segments[i].path, reason: error.reason)
            }
            segments[i].deleted = true
            onDisk -= 1
        }
    }
}
