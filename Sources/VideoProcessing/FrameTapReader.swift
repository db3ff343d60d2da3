import SystemIO
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A reader of a ``FrameTap`` in Swift (another process's, or this one's): connects to its socket, receives and maps
/// the ring read-only, and reads frames by sequence number, each copied once into the caller's buffer and checked
/// against its slot's seqlock after the copy.
///
/// ```swift
/// let reader = try FrameTapReader(socketPath: try FrameTap.socketPath(name: "lab", runtimeDirectory: nil))
/// var bytes: [UInt8] = []
/// while !reader.isRetired {
///     guard let (header, missed) = reader.next(into: &bytes) else { continue } // nothing new yet: wait as you like
///     // bytes: Y (header.width × header.height), then U and V, packed; `missed` frames were overwritten unread
/// }
/// ```
///
/// Everything read from the ring is range-checked: a slot whose header does not fit the ring reads as torn. The
/// connection stays open while the reader lives (the tap counts its readers); ``close()`` ends it. One thread at a
/// time.
public final class FrameTapReader {
    /// One slot's header: the frame's number, capture time, geometry and where its planes are.
    public struct Header: Sendable, Equatable {
        /// The frame's sequence number (1, 2, 3…, one per published picture).
        public var sequence: UInt64
        /// Capture time, nanoseconds of CLOCK_MONOTONIC.
        public var timestampNs: Int64
        /// The camera's own frame number (it skips where the camera dropped frames).
        public var cameraSequence: UInt64
        /// The picture's size.
        public var width: Int, height: Int
        /// Row strides of the Y, U and V planes (the widths: planes are packed).
        public var strideY: Int, strideU: Int, strideV: Int
        /// Degrees (0, 90, 180, 270) to turn the picture clockwise to be upright (metadata: the pixels are as captured).
        public var rotation: Int
        /// True for full-range samples (0...255), false for limited (16...235).
        public var fullRange: Bool
        /// Bytes of the three planes, from the start of Y.
        public var dataSize: Int
        /// Where U and V start in the copied bytes (Y starts at 0).
        public var offsetU: Int, offsetV: Int
    }

    /// What reading one sequence number found.
    public enum ReadResult: Sendable, Equatable {
        /// The frame, copied and checked: its header.
        case frame(Header)
        /// Not written yet.
        case notWritten
        /// The slot holds a later frame: this one was overwritten (missed).
        case overwritten
        /// The writer is writing the slot now (its seqlock is odd).
        case beingWritten
        /// The slot changed while it was copied (or its header does not fit the ring): the copy is not used.
        case torn
    }

    /// The tap's JSON hello (format, version, generation, slots, sizes, the latest picture's size).
    public let hello: String
    /// The ring's generation (a larger picture makes the tap start a new ring: reconnect when ``isRetired``).
    public let generation: UInt32
    /// Slots in the ring.
    public let slots: Int
    private let socket: LocalSocket
    private let memory: FileDescriptor
    private let base: UnsafeMutableRawPointer
    private let length: Int
    private let headerSize: Int
    private let slotSize: Int
    /// The last sequence number `next` returned or passed over.
    public private(set) var lastSequence: UInt64

    /// Connects to the tap at `socketPath` and maps its ring. Throws `ioFailed` when nobody serves there (the
    /// message names the path and errno), `unsupportedFormat` for a ring that is not a version-1 frame tap.
    public init(socketPath: String) throws(ProcessingError) {
        do { socket = try LocalSocket.connect(path: socketPath) } catch {
            throw ProcessingError(.ioFailed, "frame tap \(socketPath): cannot connect: \(error)")
        }
        let message: (bytes: [UInt8], descriptor: Int32?)
        do { message = try socket.receive(maxBytes: 4096) } catch {
            throw ProcessingError(.ioFailed, "frame tap \(socketPath): no hello: \(error)")
        }
        guard let fd = message.descriptor else {
            throw ProcessingError(.unsupportedFormat, "frame tap \(socketPath): the hello came without the ring's descriptor")
        }
        memory = FileDescriptor(rawValue: fd)
        hello = String(decoding: message.bytes, as: UTF8.self)
        func fail(_ why: String) -> ProcessingError {
            try? FileDescriptor(rawValue: fd).close()
            return ProcessingError(.unsupportedFormat, "frame tap \(socketPath): \(why)")
        }
        guard let st = try? memory.status(), st.st_size >= TapLayout.headerSize, st.st_size <= 1 << 36 else {
            throw fail("the ring's size is out of range")
        }
        length = Int(st.st_size)
        do { base = try SharedMemory.map(memory, length: length, writable: false) } catch { throw fail("cannot map the ring: \(error)") }
        let magic = base.load(fromByteOffset: 0, as: UInt32.self), version = base.load(fromByteOffset: 4, as: UInt32.self)
        let header = Int(base.load(fromByteOffset: 8, as: UInt32.self)), count = Int(base.load(fromByteOffset: 12, as: UInt32.self))
        let slotBytes = base.load(fromByteOffset: 16, as: UInt64.self)
        guard magic == TapLayout.magic, version == TapLayout.version else {
            SharedMemory.unmap(base, length: length)
            throw fail("not a version-1 frame tap (magic 0x\(String(magic, radix: 16)), version \(version))")
        }
        let (total, overflow) = count.multipliedReportingOverflow(by: Int(clamping: slotBytes))
        guard header >= 128, (1...1024).contains(count), slotBytes > UInt64(TapLayout.slotHeaderSize), !overflow, header + total <= length else {
            SharedMemory.unmap(base, length: length)
            throw fail("a ring header that does not fit its \(length) bytes (header \(header), \(count) slots of \(slotBytes))")
        }
        headerSize = header
        slots = count
        slotSize = Int(slotBytes)
        generation = base.load(fromByteOffset: 28, as: UInt32.self)
        let latest = base.load(fromByteOffset: TapLayout.latestSequence, as: UInt64.self)
        lastSequence = latest > 0 ? latest - 1 : 0
    }

    deinit {
        SharedMemory.unmap(base, length: length)
        try? memory.close()
        socket.close()
    }

    /// Hangs up (the tap stops counting this reader); the mapping stays until the reader is released.
    public func close() { socket.close() }

    /// The sequence number of the last frame completely written (0: none yet).
    public var latestSequence: UInt64 {
        atomicMemoryFence(ordering: .acquiring)
        let v = base.load(fromByteOffset: TapLayout.latestSequence, as: UInt64.self)
        atomicMemoryFence(ordering: .acquiring)
        return v
    }

    /// True once the writer has stopped or moved to a new ring (after the frames still in this one).
    public var isRetired: Bool {
        atomicMemoryFence(ordering: .acquiring)
        return base.load(fromByteOffset: TapLayout.ringFlags, as: UInt32.self) & TapLayout.retired != 0
    }

    /// Reads frame `sequence` into `buffer` (resized to the frame's planes, packed: Y, U, V).
    public func read(_ sequence: UInt64, into buffer: inout [UInt8]) -> ReadResult { read(sequence, into: &buffer, afterCopy: nil) }

    /// As `read`, calling `afterCopy` between the copy and the seqlock's second look (tests write the slot there).
    package func read(_ sequence: UInt64, into buffer: inout [UInt8], afterCopy: (() -> Void)?) -> ReadResult {
        guard sequence > 0 else { return .notWritten }
        let slot = UnsafeRawPointer(base + headerSize + Int(sequence % UInt64(slots)) * slotSize)
        let before = slot.load(fromByteOffset: TapLayout.seqlock, as: UInt64.self)
        atomicMemoryFence(ordering: .acquiring)
        if before & 1 == 1 { return .beingWritten }
        let stored = slot.load(fromByteOffset: TapLayout.sequence, as: UInt64.self)
        if stored != sequence { return stored > sequence ? .overwritten : (sequence > latestSequence ? .notWritten : .overwritten) }
        func u32(_ offset: Int) -> Int { Int(slot.load(fromByteOffset: offset, as: UInt32.self)) }
        let width = u32(TapLayout.width), height = u32(TapLayout.height), offsetY = u32(TapLayout.offsetY)
        let offsetU = u32(TapLayout.offsetU), offsetV = u32(TapLayout.offsetV)
        let dataSize = Int(clamping: slot.load(fromByteOffset: TapLayout.dataSize, as: UInt64.self))
        // Every number from the ring is checked before it is used: a slot that does not fit reads as torn.
        let fits =
            width > 0 && height > 0 && width <= 16384 && height <= 16384 && offsetY >= TapLayout.slotHeaderSize
            && dataSize == TapLayout.dataSize(width: width, height: height) && dataSize <= slotSize - offsetY
            && offsetU == offsetY + width * height && offsetV == offsetU + ((width + 1) / 2) * ((height + 1) / 2)
        guard fits else { return .torn }
        if buffer.count != dataSize { buffer = [UInt8](repeating: 0, count: dataSize) }
        buffer.withUnsafeMutableBytes { $0.baseAddress!.copyMemory(from: slot + offsetY, byteCount: dataSize) }
        let header = Header(
            sequence: sequence, timestampNs: slot.load(fromByteOffset: TapLayout.timestamp, as: Int64.self),
            cameraSequence: slot.load(fromByteOffset: TapLayout.cameraSequence, as: UInt64.self), width: width, height: height,
            strideY: u32(TapLayout.strideY), strideU: u32(TapLayout.strideU), strideV: u32(TapLayout.strideV), rotation: u32(TapLayout.rotation),
            fullRange: u32(TapLayout.slotFlags) & Int(TapLayout.fullRange) != 0, dataSize: dataSize, offsetU: offsetU - offsetY,
            offsetV: offsetV - offsetY)
        afterCopy?()
        atomicMemoryFence(ordering: .acquiring)
        let after = slot.load(fromByteOffset: TapLayout.seqlock, as: UInt64.self)
        return after == before ? .frame(header) : .torn
    }

    /// The next frame after the last one returned, copied into `buffer`, and how many frames before it were missed
    /// (overwritten before they were read, or torn); nil when no new frame is there (nothing waits).
    public func next(into buffer: inout [UInt8]) -> (header: Header, missed: UInt64)? {
        var missed: UInt64 = 0
        while true {
            let latest = latestSequence
            guard latest > lastSequence else { return nil }
            let want = lastSequence + 1
            switch read(want, into: &buffer) {
            case .frame(let header):
                lastSequence = want
                return (header, missed)
            case .notWritten:
                return nil
            case .overwritten, .torn, .beingWritten:
                // Gone, or being replaced by a later frame (the slot of frame `want` is only written again for
                // want + slots): missed.
                missed += 1
                lastSequence = want
            }
        }
    }
}
