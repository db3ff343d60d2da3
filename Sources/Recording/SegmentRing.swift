import Foundation
import SystemIO
package import VideoProcessing

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

/// Which files `keep` counts and deletes.
public enum SegmentKeepScope: String, Sendable, CaseIterable {
    /// Only the files this run wrote: an earlier run's files are never touched (the default).
    case run
    /// Every file of the pattern's ring on disk, earlier runs' too (oldest first, by modification time): the
    /// ring stays at `keep` files across restarts.
    case pattern
}

/// The files of a recording cut into segments: their names, the creation of each file, the segments closed so
/// far, and the deletion of the oldest beyond `keep`. What `RecordingOutput` cuts files with; the writers are its own.
///
/// Names: strftime's `%Y %m %d %H %M %S …` in the pattern are replaced by the local time at which the segment
/// starts; a pattern without `%` gets `-NNN` (the segment's number) before its extension. Every segment file is
/// created exclusively (`O_CREAT | O_EXCL`): a name on disk is never opened, truncated or deleted by mistake. A
/// numbered ring continues after the highest number on disk (`cam-007.mp4` after an earlier run's `cam-006.mp4`);
/// a strftime name that is taken (two segments in one second, a restart within the minute of `%H%M`) gets
/// `_001`, `_002` … before its extension, after the highest such suffix on disk: `cam-T.mp4`, `cam-T_001.mp4`
/// sort in the order they were written (`_` sorts after `.`; up to `_999`). The directories of a name below the
/// pattern's first `%` (`%Y%m%d/%H/`) are made as needed with the mode of the directory they are made in (less the
/// umask), and removed again when the ring deleted their last file; the directory above (the pattern's fixed
/// part) must exist. A recording that is not segmented has one file, the pattern itself, opened as `OutputFile`
/// opens any output.
///
/// Memory and work per segment are constant over any length: the ring keeps the segments still on disk that it
/// may delete (at most `keep` and the open one), the last `remembered` segments for `segments`, and counters.
package struct SegmentRing {
    /// The output path, or with segments the pattern.
    package let pattern: String
    /// False: one file, named `pattern`.
    package let segmented: Bool
    /// Keep at most this many segment files, deleting the oldest; nil keeps all.
    package let keep: Int?
    /// Which files `keep` counts and deletes.
    package let scope: SegmentKeepScope
    /// How many closed segments `segments` holds at most: `keep`, or 100 if that is more.
    package let remembered: Int
    /// The last closed segments (at most `remembered`), oldest first; deleted ones are marked.
    package var segments: ArraySlice<RecordedSegment> { recent[recentHead...] }
    /// Frames in the segments closed so far: the index of the next segment's first frame.
    package private(set) var framesBefore = 0
    /// Segments closed so far (all of them, not only those `segments` holds).
    package private(set) var written = 0
    /// Segments of this run deleted again.
    package private(set) var deleted = 0
    /// Files of earlier runs deleted (`scope` `.pattern`).
    package private(set) var deletedEarlier = 0
    /// Earlier runs' files of this ring found at the start that hold no frame: 0 bytes, or an MP4 header without a
    /// complete fragment (what a SIGKILL or a power cut leaves of the segment being written). They are left as they
    /// are, reported, and not counted as the ring's files by `keep`. At most 10 are named (path and size).
    package private(set) var emptyLeftovers: (count: Int, named: [(path: String, bytes: Int)]) = (0, [])

    private var recent: [RecordedSegment] = []
    private var recentHead = 0
    /// Sequence number (0 = the run's first) of this run's oldest segment still on disk, and their paths.
    private var onDisk = Queue<(sequence: Int, path: String)>()
    /// Earlier runs' files of this pattern, oldest first (`scope` `.pattern`).
    private var earlier = Queue<String>()
    private var scanned = false
    /// Numbered names: the next number.
    private var nextNumber = 0
    /// strftime names: the last name expanded and the suffix it was last given (0: none).
    private var lastBase = ""
    private var lastSuffix = 0
    /// The directory of the last file created (made already).
    private var lastDirectory = ""
    /// The pattern's directory before any `%`, and its mode for the directories made below it.
    private let fixedDirectory: String
    private var directoryMode: mode_t?

    /// Longest run of taken names tried one after the other before the ring gives up (each a failed open).
    package static let attempts = 10_000

    /// The ring could not create or delete a file: the path and strerror's text (or what was wrong).
    package struct Failure: Error, CustomStringConvertible {
        /// The file or directory at fault.
        package var path: String
        /// What went wrong.
        package var reason: String
        /// "cannot … path: reason".
        package var description: String { reason }
    }

    /// A ring for `pattern`; nothing is touched on disk until `nextFile()`.
    package init(pattern: String, segmented: Bool, keep: Int?, scope: SegmentKeepScope = .run) {
        self.pattern = pattern
        self.segmented = segmented
        self.keep = keep
        self.scope = scope
        remembered = max(keep ?? 0, 100)
        fixedDirectory = Self.fixedDirectory(of: pattern)
    }

    /// The directory part of `pattern` before the first component with a `%` ("." for none).
    static func fixedDirectory(of pattern: String) -> String {
        let parts = pattern.split(separator: "/", omittingEmptySubsequences: false).dropLast()
        let fixed = parts.prefix { !$0.contains("%") }
        if fixed.isEmpty { return pattern.hasPrefix("/") ? "/" : "." }
        let joined = fixed.joined(separator: "/")
        return joined.isEmpty ? "/" : joined
    }

    /// Creates the next file (the first one, then one per closed segment) under a name never used before, making
    /// its directories as needed. Throws `ioFailed` naming the path (a missing fixed directory, no permission).
    package mutating func nextFile() throws(ProcessingError) -> OutputFile {
        guard segmented else { return try OutputFile(path: pattern) }
        if !scanned {
            scanned = true
            try scanEarlierFiles()
        }
        if !pattern.contains("%") {
            for _ in 0..<Self.attempts {
                let path = Self.inserting("-" + Self.number(nextNumber), into: pattern)
                nextNumber += 1
                if let file = try OutputFile.createNew(path: path) { return file }
            }
            throw ProcessingError(.ioFailed, "cannot write \(pattern): \(Self.attempts) numbers in a row are taken")
        }
        let base = Self.expand(pattern)
        try makeDirectory(of: base)
        var suffix = base == lastBase ? lastSuffix + 1 : 0
        if lastBase.isEmpty {
            // A restart: an earlier run may have left `base_NNN` and deleted `base` itself (`keep`); continue after them.
            let highest = Self.highestSuffix(of: base)
            if highest > 0 { suffix = highest + 1 }
        }
        for _ in 0..<Self.attempts {
            let path = suffix == 0 ? base : Self.inserting("_" + Self.number(suffix), into: base)
            if let file = try OutputFile.createNew(path: path) {
                (lastBase, lastSuffix) = (base, suffix)
                return file
            }
            // Taken: the first time for this name, continue after the highest suffix on disk (one listing).
            suffix = suffix == 0 ? Self.highestSuffix(of: base) + 1 : suffix + 1
        }
        throw ProcessingError(.ioFailed, "cannot write \(base): \(Self.attempts) suffixes in a row are taken")
    }

    /// `n` with at least 3 digits.
    private static func number(_ n: Int) -> String {
        let digits = String(n)
        return digits.count >= 3 ? digits : String(repeating: "0", count: 3 - digits.count) + digits
    }

    /// The pattern's strftime conversions filled with the local time now (the pattern itself if it expands to
    /// nothing or to more than 4 KiB).
    private static func expand(_ pattern: String) -> String {
        var parts = SystemClock.localTime()
        var buffer = [CChar](repeating: 0, count: 4096)
        let n = strftime(&buffer, buffer.count, pattern, &parts)
        return n > 0 ? String(decoding: buffer.prefix(n).map { UInt8(bitPattern: $0) }, as: UTF8.self) : pattern
    }

    /// Makes the directories of `path` below the fixed directory, once per directory (the mode is the fixed
    /// directory's).
    private mutating func makeDirectory(of path: String) throws(ProcessingError) {
        let directory = (path as NSString).deletingLastPathComponent
        guard directory != lastDirectory else { return }
        let fixed = fixedDirectory == "." ? "" : fixedDirectory
        if !directory.isEmpty && directory != fixed {
            if directoryMode == nil {
                do throws(SystemError) {
                    directoryMode = try FileSystem.status(fixedDirectory).st_mode & 0o7777
                } catch {
                    throw ProcessingError(.ioFailed, "cannot write \(path): \(fixedDirectory): \(error.reason)")
                }
            }
            do throws(SystemError) { try FileSystem.makeDirectories(directory, mode: directoryMode ?? 0o777) } catch {
                throw ProcessingError(.ioFailed, "cannot make the directory \(directory) for \(path): \(error.reason)")
            }
        }
        lastDirectory = directory
    }

    /// The highest `_NNN` suffix among the names of `base`'s directory that are `base` with a suffix (0: none).
    private static func highestSuffix(of base: String) -> Int {
        let ns = base as NSString
        let directory = ns.deletingLastPathComponent, name = ns.lastPathComponent
        let stem = (name as NSString).deletingPathExtension + "_", ext = (name as NSString).pathExtension
        let tail = ext.isEmpty ? "" : "." + ext
        let names = (try? FileSystem.entries(directory.isEmpty ? "." : directory)) ?? []
        return names.reduce(0) { highest, entry in
            guard entry.hasPrefix(stem), entry.hasSuffix(tail), entry.count > stem.count + tail.count else { return highest }
            let digits = entry.dropFirst(stem.count).dropLast(tail.count)
            guard digits.count <= 9, digits.allSatisfy(\.isASCIIDigitCharacter), let n = Int(digits) else { return highest }
            return max(highest, n)
        }
    }

    /// `path` with `suffix` before its extension.
    private static func inserting(_ suffix: String, into path: String) -> String {
        let ns = path as NSString
        let ext = ns.pathExtension
        return ns.deletingPathExtension + suffix + (ext.isEmpty ? "" : "." + ext)
    }

    /// A numbered ring: the number after the highest on disk. With `scope` `.pattern` and `keep`: the ring's
    /// files already on disk, oldest first, for `prune`.
    /// Every run: the ring's files on disk that hold no frame (`emptyLeftovers`).
    private mutating func scanEarlierFiles() throws(ProcessingError) {
        let numbered = !pattern.contains("%")
        let matcher = RingNames(pattern: pattern)
        var found: [(path: String, modified: Int64)] = []
        var highest = -1
        for path in matcher.files(below: fixedDirectory).sorted() {
            if numbered, let n = matcher.number(of: path) { highest = max(highest, n) }
            guard let st = try? FileSystem.status(path), st.st_mode & S_IFMT == S_IFREG else { continue }
            if Self.holdsNoFrame(path, size: Int(st.st_size)) {
                emptyLeftovers.count += 1
                if emptyLeftovers.named.count < 10 { emptyLeftovers.named.append((path, Int(st.st_size))) }
                continue
            }
            if keep != nil && scope == .pattern {
                found.append((path, Int64(st.st_mtim.tv_sec) &* 1_000_000_000 &+ Int64(st.st_mtim.tv_nsec)))
            }
        }
        nextNumber = highest + 1
        for f in found.sorted(by: { ($0.modified, $0.path) < ($1.modified, $1.path) }) { earlier.append(f.path) }
    }

    /// True for a file of `size` bytes that holds no frame: empty, or an MP4 (it starts with `ftyp`) whose top-level
    /// boxes include no `moof` (a fragment still being written is a `free` box until it is complete). Reads a few
    /// box headers; a file that cannot be read is not called empty.
    static func holdsNoFrame(_ path: String, size: Int) -> Bool {
        if size == 0 { return true }
        guard size >= 8, let fd = try? FileDescriptor.open(path, O_RDONLY | O_CLOEXEC) else { return false } // no box: not an MP4
        defer { try? fd.close() }
        var header = [UInt8](repeating: 0, count: 16)
        var offset: Int64 = 0
        for box in 0..<64 {
            guard offset + 8 <= Int64(size) else { return true } // the boxes end without a moof
            let got = header.withUnsafeMutableBytes { b in (try? fd.seek(to: offset)).flatMap { try? fd.read(into: b) } ?? 0 }
            guard got >= 8 else { return false }
            let type = String(decoding: header[4..<8], as: UTF8.self)
            if box == 0 && type != "ftyp" { return false } // not an MP4: only an empty file is known to hold no frame
            if type == "moof" { return false }
            var length = Int64(header[0]) << 24 | Int64(header[1]) << 16 | Int64(header[2]) << 8 | Int64(header[3])
            if length == 1 && got >= 16 { length = header[8..<16].reduce(0) { $0 << 8 | Int64($1) } }
            guard length >= 8 else { return true } // to the end of the file (or cut short): no moof after it
            offset += length
        }
        return false // 64 boxes without a moof: not one of ours, not called empty
    }

    /// Records a segment closed: `frames` frames from `startNs` (capture time from the recording's first frame). A
    /// segment without frames is not one (its file was removed when it closed).
    package mutating func closed(path: String, frames: Int, startNs: Int64) {
        guard frames > 0 else { return }
        if keep != nil { onDisk.append((written, path)) }
        recent.append(RecordedSegment(path: path, frames: frames, firstFrame: framesBefore, startNs: startNs, deleted: false))
        if recent.count - recentHead > remembered { recentHead += 1 }
        if recentHead > 64 && recentHead * 2 > recent.count {
            recent.removeFirst(recentHead)
            recentHead = 0
        }
        framesBefore += frames
        written += 1
    }

    /// Deletes the oldest files so that at most `keep` exist, `open` of them still being written: with `scope`
    /// `.pattern` earlier runs' files first. A file already gone counts as deleted. Throws naming the file.
    package mutating func prune(open: Int) throws(Failure) {
        guard let keep else { return }
        while earlier.count + onDisk.count + open > keep, let path = earlier.first {
            try delete(path)
            earlier.removeFirst()
            deletedEarlier += 1
        }
        while onDisk.count + open > keep, let (sequence, path) = onDisk.first {
            try delete(path)
            onDisk.removeFirst()
            deleted += 1
            let index = recentHead + sequence - (written - (recent.count - recentHead))
            if index >= recentHead && index < recent.count { recent[index].deleted = true }
        }
    }

    /// Unlinks `path` (gone already is fine), then the directories made for it that are empty now.
    private func delete(_ path: String) throws(Failure) {
        do throws(SystemError) { try FileSystem.unlink(path) } catch  where error.errno == ENOENT {} catch {
            throw Failure(path: path, reason: "cannot delete the old segment \(path): \(error.reason)")
        }
        guard pattern.contains("%") else { return }
        var directory = (path as NSString).deletingLastPathComponent
        let fixed = fixedDirectory == "." ? "" : fixedDirectory
        while !directory.isEmpty && directory != fixed && directory != lastDirectory && directory.hasPrefix(fixed) {
            guard (try? FileSystem.removeDirectory(directory)) != nil else { return } // not empty: stays
            directory = (directory as NSString).deletingLastPathComponent
        }
    }
}

/// A first-in first-out list whose storage is reused: constant work per element.
private struct Queue<Element> {
    private var items: [Element] = []
    private var head = 0
    var count: Int { items.count - head }
    var first: Element? { head < items.count ? items[head] : nil }
    mutating func append(_ item: Element) { items.append(item) }
    mutating func removeFirst() {
        head += 1
        if head > 64 && head * 2 > items.count {
            items.removeFirst(head)
            head = 0
        }
    }
}

/// The names a segment pattern gives: to find an earlier run's files (a numbered ring's highest number; with
/// `--keep-scope pattern`, the ring on disk). Each strftime conversion matches only what it can expand to (digits
/// for `%Y %m %d %H %M %S …`, letters for names), a taken name's `_NNN` suffix too: nothing else is counted or deleted.
private struct RingNames {
    /// Per path component below the fixed directory: its regular expression.
    private let components: [Regex<AnyRegexOutput>]
    private let numbered: Bool
    private let numberStem: String
    private let numberTail: String

    init(pattern: String) {
        numbered = !pattern.contains("%")
        let ns = pattern as NSString
        let name = ns.lastPathComponent, ext = (name as NSString).pathExtension
        let stem = (name as NSString).deletingPathExtension + "-", tail = ext.isEmpty ? "" : "." + ext
        (numberStem, numberTail) = (stem, tail)
        let fixedCount = pattern.split(separator: "/", omittingEmptySubsequences: false).dropLast().prefix { !$0.contains("%") }.count
        let below = Array(pattern.split(separator: "/", omittingEmptySubsequences: false).dropFirst(fixedCount).map(String.init))
        components = below.enumerated().compactMap { i, part in
            let last = i == below.count - 1
            var expression = ""
            if last && !pattern.contains("%") {
                expression = Self.literal(stem) + "[0-9]{3,}" + Self.literal(tail)
            } else {
                expression = Self.expression(last ? (part as NSString).deletingPathExtension : part)
                if last {
                    let ext = (part as NSString).pathExtension
                    expression += "(_[0-9]{3,})?" + (ext.isEmpty ? "" : Self.literal("." + ext))
                }
            }
            return try? Regex(expression)
        }
    }

    /// The number of a numbered ring's file (`cam-012.mp4`: 12).
    func number(of path: String) -> Int? {
        let name = (path as NSString).lastPathComponent
        guard numbered, name.hasPrefix(numberStem), name.hasSuffix(numberTail) else { return nil }
        let digits = name.dropFirst(numberStem.count).dropLast(numberTail.count)
        guard (3...18).contains(digits.count), digits.allSatisfy(\.isASCIIDigitCharacter) else { return nil }
        return Int(digits)
    }

    /// The paths below `directory` that the pattern gives (at most 100,000 names read per directory).
    func files(below directory: String) -> [String] {
        var level = [directory]
        for (i, component) in components.enumerated() {
            var next: [String] = []
            for dir in level {
                for name in (try? FileSystem.entries(dir)) ?? [] where (try? component.wholeMatch(in: name)) != nil {
                    let path = dir == "." ? name : (dir == "/" ? "/" + name : dir + "/" + name)
                    if i < components.count - 1 {
                        if let st = try? FileSystem.status(path), st.st_mode & S_IFMT == S_IFDIR { next.append(path) }
                    } else {
                        next.append(path)
                    }
                }
            }
            level = next
        }
        return level
    }

    /// `text` as a regular expression matching itself.
    private static func literal(_ text: String) -> String {
        text.map { "\\^$.|?*+()[]{}/-".contains($0) ? "\\\($0)" : String($0) }.joined()
    }

    /// A pattern component with each strftime conversion as what it expands to.
    private static func expression(_ component: String) -> String {
        var out = "", percent = false
        for c in component {
            if percent {
                percent = false
                switch c {
                case "Y", "G": out += "[0-9]{4}"
                case "m", "d", "H", "M", "S", "y", "C", "I", "U", "W", "V", "g": out += "[0-9]{2}"
                case "e", "k", "l": out += "[ 0-9][0-9]"
                case "j": out += "[0-9]{3}"
                case "u", "w": out += "[0-9]"
                case "s": out += "[0-9]+"
                case "F": out += "[0-9]{4}-[0-9]{2}-[0-9]{2}"
                case "T": out += "[0-9]{2}:[0-9]{2}:[0-9]{2}"
                case "R": out += "[0-9]{2}:[0-9]{2}"
                case "D": out += "[0-9]{2}/[0-9]{2}/[0-9]{2}"
                case "%": out += "%"
                case "z": out += "[-+][0-9]{4}"
                default: out += "[A-Za-z0-9+-]+"
                }
            } else if c == "%" {
                percent = true
            } else {
                out += literal(String(c))
            }
        }
        return out
    }
}

extension Character {
    /// 0-9 only (not other scripts' digits).
    fileprivate var isASCIIDigitCharacter: Bool { isASCII && isNumber }
}
