public import VideoCapture
import SystemIO
import Synchronization

#if canImport(Glibc)
    import Glibc // mode_t, errno names
#endif

// The frame tap's shared-memory format, version 1 (Examples/FrameTap/frametap.h is the same in C; docs/processing.md
// "Frame tap"). All fields little-endian, naturally aligned.
//
//   offset 0, the ring header (128 bytes):
//     0 magic u32 "CTAP" (0x50415443)   4 version u32 (1)         8 header_size u32 (bytes before slot 0)
//    12 slot_count u32                 16 slot_size u64 (bytes per slot, its header included)
//    24 slot_header_size u32           28 generation u32 (1, then +1 for each new ring of the same tap)
//    32 latest_sequence u64 (the last frame completely written; 0: none yet)
//    40 flags u32 (bit 0: retired: the writer moved to a new ring or stopped)   44 writer_pid u32
//    48 total_size u64 (header_size + slot_count × slot_size)                   56 max_data_size u64
//   a slot at header_size + index × slot_size, index = sequence % slot_count (128 bytes of header, then the planes):
//     0 seqlock u64 (odd while the writer writes the slot)   8 sequence u64 (1, 2, 3…)   16 timestamp_ns i64 (capture
//     time, CLOCK_MONOTONIC)   24 camera_sequence u64   32 width u32   36 height u32   40 stride_y u32   44 stride_u u32
//    48 stride_v u32   52 rotation u32 (degrees)   56 offset_y u32   60 offset_u u32   64 offset_v u32 (from the slot's
//     start)   68 flags u32 (bit 0: full range)   72 data_size u64 (the three planes, packed, from offset_y)
enum TapLayout {
    static let magic: UInt32 = 0x5041_5443 // "CTAP" in memory
    static let version: UInt32 = 1
    static let headerSize = 4096
    static let slotHeaderSize = 128
    static let page = 4096
    static let retired: UInt32 = 1
    static let fullRange: UInt32 = 1
    /// Offsets in the ring header.
    static let latestSequence = 32, ringFlags = 40
    /// Offsets in a slot header.
    static let seqlock = 0, sequence = 8, timestamp = 16, cameraSequence = 24, width = 32, height = 36, strideY = 40, strideU = 44,
        strideV = 48, rotation = 52, offsetY = 56, offsetU = 60, offsetV = 64, slotFlags = 68, dataSize = 72

    /// The bytes of a packed I420 picture of `width`×`height` (Y, then U, then V).
    static func dataSize(width: Int, height: Int) -> Int { width * height + 2 * ((width + 1) / 2) * ((height + 1) / 2) }
    /// A slot's size for pictures of at most `dataBytes`: its header and the planes, rounded up to whole pages.
    static func slotSize(dataBytes: Int) -> Int { (slotHeaderSize + dataBytes + page - 1) / page * page }
}

/// One ring of shared memory: its memfd, the writer's mapping and its geometry. Released when neither the tap nor
/// the server thread holds it (readers keep their own descriptor and mapping).
final class TapRing: @unchecked Sendable {
    // @unchecked: the mapping is written by the tap's one writer at a time (`FrameTap.publish`, behind its writer
    // lock) and by `retire()` (one 32-bit store); the other fields are immutable.
    let memory: FileDescriptor
    /// What readers get: a read-only descriptor of the same memory (or the read-write one if /proc is missing).
    let shared: FileDescriptor
    let base: UnsafeMutableRawPointer
    let length: Int
    let slots: Int
    let slotSize: Int
    let capacity: Int
    let generation: UInt32

    init(slots: Int, dataBytes: Int, generation: UInt32) throws(SystemError) {
        self.slots = slots
        slotSize = TapLayout.slotSize(dataBytes: dataBytes)
        capacity = slotSize - TapLayout.slotHeaderSize
        length = TapLayout.headerSize + slots * slotSize
        self.generation = generation
        memory = try SharedMemory.create(name: "camcap-frame-tap", length: length)
        do throws(SystemError) {
            base = try SharedMemory.map(memory, length: length, writable: true)
        } catch {
            try? memory.close()
            throw error
        }
        shared = (try? SharedMemory.readOnly(memory)) ?? memory
        base.storeBytes(of: TapLayout.magic, toByteOffset: 0, as: UInt32.self)
        base.storeBytes(of: TapLayout.version, toByteOffset: 4, as: UInt32.self)
        base.storeBytes(of: UInt32(TapLayout.headerSize), toByteOffset: 8, as: UInt32.self)
        base.storeBytes(of: UInt32(slots), toByteOffset: 12, as: UInt32.self)
        base.storeBytes(of: UInt64(slotSize), toByteOffset: 16, as: UInt64.self)
        base.storeBytes(of: UInt32(TapLayout.slotHeaderSize), toByteOffset: 24, as: UInt32.self)
        base.storeBytes(of: generation, toByteOffset: 28, as: UInt32.self)
        base.storeBytes(of: UInt32(truncatingIfNeeded: CurrentProcess.id), toByteOffset: 44, as: UInt32.self)
        base.storeBytes(of: UInt64(length), toByteOffset: 48, as: UInt64.self)
        base.storeBytes(of: UInt64(capacity), toByteOffset: 56, as: UInt64.self)
    }

    /// Slot `index`'s header.
    func slot(_ index: Int) -> UnsafeMutableRawPointer { base + TapLayout.headerSize + index * slotSize }

    /// Slot `index`'s picture memory as storage the pipeline's pictures hold (it keeps the ring mapped). Borrowed:
    /// stages see it read-only, as they see driver memory.
    func pictureStorage(_ index: Int) -> FrameStorage {
        FrameStorage(borrowing: slot(index) + TapLayout.slotHeaderSize, capacity: capacity) { withExtendedLifetime(self) {} }
    }

    /// Marks the ring retired (readers then reconnect for the next ring, or end).
    func retire() {
        atomicMemoryFence(ordering: .releasing)
        base.storeBytes(of: TapLayout.retired, toByteOffset: TapLayout.ringFlags, as: UInt32.self)
    }

    deinit {
        SharedMemory.unmap(base, length: length)
        if shared != memory { try? shared.close() }
        try? memory.close()
    }
}

/// A shared-memory frame tap: every I420 picture given to ``publish(_:timestampNs:rotation:cameraSequence:fullRange:)``
/// goes into a ring of slots in a memfd that any number of local processes map and read at once, each without a copy
/// of its own beside the one into the ring.
///
/// Readers find the tap through a Unix socket (``socketPath``, its file's mode the access control, 0600 by
/// default): a reader connects, receives the memfd (read-only) over SCM_RIGHTS with a one-line JSON hello (format,
/// version, slots, sizes, the latest picture's size), maps it and keeps the connection open while it reads
/// (``readers`` counts the connections). ``FrameTapReader`` is a reader in Swift; `Examples/FrameTap/frametap.py` one
/// in Python (numpy) and `Examples/FrameTap/frametap.h` the format in C.
///
/// Each slot has a header (size, strides, rotation, capture time, the frame's sequence number) and a seqlock:
/// odd while the writer writes the slot, so a reader that copies a frame and then finds the seqlock changed knows
/// the frame was torn and drops it. The writer never waits for a reader: it overwrites the oldest slot, and a
/// reader that fell behind sees the sequence numbers it missed.
///
/// Sizes: slots are sized for ``Configuration/maxSize`` (1920x1080 by default; untouched pages of a slot use no
/// memory). A smaller picture (a source that changed size) fits as it is, each slot saying its own size. A larger
/// one starts a new ring (a new memfd, its `generation` one higher) and marks the old one retired: readers then
/// reconnect and get the new ring.
///
/// Threading: `publish` belongs to one thread at a time (the pipeline's); the socket is served by a thread of the
/// tap's own (a `WorkerThread`), never the cooperative pool. No allocation per picture.
public final class FrameTap: Sendable {
    /// The ring's shape and the socket's access.
    public struct Configuration: Sendable, Equatable {
        /// Slots in the ring, 2...64 (default 10: a reader may fall about 7 frames behind without missing one; the
        /// newest slots may be in use for the pictures being converted into them).
        public var slots = 10
        /// The largest picture a slot holds without a new ring (default 1920x1080).
        public var maxSize = FrameSize(width: 1920, height: 1080)
        /// The socket file's permission bits, 0o600 (the user only, the default) or 0o660 (the user's group too).
        public var socketMode: UInt32 = 0o600
        /// Readers connected at once at most, 1...1024 (default 64); more are turned away.
        public var maxReaders = 64
        /// The default shape: 10 slots of up to 1920x1080, socket 0600, 64 readers.
        public init() {}
    }

    /// The socket readers connect to.
    public let socketPath: String
    /// The shape the tap was made with.
    public let configuration: Configuration
    private let listener: LocalSocket
    private let wake: WakePipe
    private let thread: WorkerThread
    /// The socket file's inode: `close()` removes the file only while it is still ours.
    private let socketInode: UInt64
    private let writer: Mutex<Writer>
    private let counters: Counters
    private let closed = Atomic<Bool>(false)

    private struct Writer {
        var ring: TapRing
        /// The last sequence number given out (to a picture published, or to a slot handed out for converting).
        var sequence: UInt64 = 0
        /// The last sequence number published (readers' `latest_sequence`).
        var latest: UInt64 = 0
        /// Each slot's picture memory, as `destination` hands it out: a slot is written again only while the tap
        /// holds its storage's one reference (no stage still holds a picture in it).
        var storages: [FrameStorage]
        /// Per slot, the sequence number handed out with it for a picture being converted into it (0: none).
        var reserved: [UInt64]
        init(ring: TapRing) {
            self.ring = ring
            storages = (0..<ring.slots).map(ring.pictureStorage)
            reserved = Array(repeating: 0, count: ring.slots)
        }
        mutating func use(_ bigger: TapRing) { self = Writer(ring: bigger, continuing: self) }
        private init(ring: TapRing, continuing old: Writer) {
            self.init(ring: ring)
            sequence = old.sequence
            latest = old.latest
        }
    }

    private final class Counters: Sendable {
        let readers = Atomic<Int>(0)
        let connections = Atomic<Int>(0)
        let refused = Atomic<Int>(0)
        let published = Atomic<UInt64>(0)
        let skipped = Atomic<Int>(0)
        let inPlace = Atomic<UInt64>(0)
        let busy = Atomic<Int>(0)
        /// The latest picture's width << 32 | height (the hello's geometry).
        let size = Atomic<UInt64>(0)
        let onReader = Mutex<(@Sendable () -> Void)?>(nil)
        /// The ring handed to readers who connect now.
        let current: Mutex<TapRing>
        init(_ ring: TapRing) { current = Mutex(ring) }
    }

    /// The socket path for a tap `name`: `name` itself when it contains a `/`; else `camcap-tap-NAME.sock` in
    /// `runtimeDirectory` (pass `$XDG_RUNTIME_DIR`) when it is an absolute path, else in /tmp. A name without `/` is
    /// 1...64 letters, digits, `.`, `_` or `-` (not starting with `.`).
    public static func socketPath(name: String, runtimeDirectory: String?) throws(ProcessingError) -> String {
        if name.contains("/") {
            guard name.utf8.count <= LocalSocket.maximumPathLength, !name.utf8.contains(0) else {
                throw ProcessingError(.invalidArgument, "frame tap \(name): a socket path is at most \(LocalSocket.maximumPathLength) bytes")
            }
            return name
        }
        let allowed = name.utf8.allSatisfy { c in
            (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x2E || c == 0x5F || c == 0x2D
        }
        guard (1...64).contains(name.utf8.count), allowed, !name.hasPrefix(".") else {
            throw ProcessingError(
                .invalidArgument,
                "frame tap name \"\(name.prefix(80))\": 1...64 letters, digits, '.', '_' or '-' (not starting with '.'), or a socket path with a '/'")
        }
        let directory = runtimeDirectory.flatMap { $0.hasPrefix("/") ? $0 : nil } ?? "/tmp"
        let path = (directory.hasSuffix("/") ? directory : directory + "/") + "camcap-tap-\(name).sock"
        guard path.utf8.count <= LocalSocket.maximumPathLength else {
            throw ProcessingError(
                .invalidArgument, "frame tap \(name): \(path) is longer than a socket path may be (\(LocalSocket.maximumPathLength) bytes)")
        }
        return path
    }

    /// Makes the ring and listens at `socketPath` (see ``socketPath(name:runtimeDirectory:)``). A socket file left
    /// there by a process that is gone is replaced; a tap that is running there is refused (`tapInUse`), as is a
    /// path holding anything else than a socket. The configuration is checked (`invalidArgument`).
    public init(socketPath: String, configuration: Configuration = Configuration()) throws(ProcessingError) {
        let c = configuration
        guard (2...64).contains(c.slots) else { throw ProcessingError(.invalidArgument, "frame tap: slots must be 2...64, got \(c.slots)") }
        guard (1...1024).contains(c.maxReaders) else {
            throw ProcessingError(.invalidArgument, "frame tap: maxReaders must be 1...1024, got \(c.maxReaders)")
        }
        guard c.socketMode == 0o600 || c.socketMode == 0o660 else {
            throw ProcessingError(.invalidArgument, "frame tap: the socket mode must be 0600 or 0660, got 0\(String(c.socketMode, radix: 8))")
        }
        guard (2...16384).contains(c.maxSize.width), (2...16384).contains(c.maxSize.height) else {
            throw ProcessingError(.invalidArgument, "frame tap: maxSize must be 2...16384 a side, got \(c.maxSize)")
        }
        self.socketPath = socketPath
        self.configuration = c
        let ring: TapRing
        do {
            ring = try TapRing(slots: c.slots, dataBytes: TapLayout.dataSize(width: c.maxSize.width, height: c.maxSize.height), generation: 1)
        } catch { throw ProcessingError(.ioFailed, "frame tap: no shared memory for \(c.slots) slots of \(c.maxSize): \(error)") }
        do {
            listener = try LocalSocket.listen(path: socketPath, mode: mode_t(c.socketMode))
        } catch  where error.errno == EADDRINUSE {
            throw ProcessingError(.tapInUse, "frame tap \(socketPath): another tap is running there (its socket accepts connections)")
        } catch  where error.errno == EEXIST {
            throw ProcessingError(.tapInUse, "frame tap \(socketPath): something that is not a socket is there; it was left alone")
        } catch {
            throw ProcessingError(.ioFailed, "frame tap \(socketPath): cannot listen there: \(error)")
        }
        socketInode = (try? FileSystem.status(socketPath)).map { UInt64($0.st_ino) } ?? 0
        do { wake = try WakePipe() } catch {
            try? FileSystem.unlink(socketPath)
            throw ProcessingError(.ioFailed, "frame tap: \(error)")
        }
        writer = Mutex(Writer(ring: ring))
        let counters = Counters(ring)
        self.counters = counters
        let (listener, wake) = (listener, wake)
        let hello: @Sendable (TapRing) -> [UInt8] = { ring in
            let size = counters.size.load(ordering: .relaxed)
            let fields = [
                "\"format\": \"camcap-frametap\"", "\"version\": \(TapLayout.version)", "\"generation\": \(ring.generation)",
                "\"slots\": \(ring.slots)", "\"slot_size\": \(ring.slotSize)", "\"header_size\": \(TapLayout.headerSize)",
                "\"slot_header_size\": \(TapLayout.slotHeaderSize)", "\"size\": \(ring.length)", "\"pixel_format\": \"I420\"",
                "\"width\": \(size >> 32)", "\"height\": \(size & 0xFFFF_FFFF)", "\"pid\": \(CurrentProcess.id)",
            ]
            return Array(("{" + fields.joined(separator: ", ") + "}\n").utf8)
        }
        let maxReaders = c.maxReaders
        thread = WorkerThread(name: "frame-tap", wake: { wake.wake() }) { stop in
            FrameTap.serve(listener: listener, wake: wake, stop: stop, maxReaders: maxReaders, counters: counters) { client in
                let ring = counters.current.withLock { $0 }
                return client.send(hello(ring), passing: ring.shared.rawValue) == 0
            }
        }
    }

    /// The socket's thread: accepts readers, greets each with the ring, and counts them until they hang up.
    private static func serve(
        listener: LocalSocket, wake: WakePipe, stop: StopFlag, maxReaders: Int, counters: Counters, greet: (LocalSocket) -> Bool
    ) {
        var poll = DescriptorPoll()
        var clients: [LocalSocket] = []
        var scratch = [UInt8](repeating: 0, count: 512)
        defer {
            for c in clients { c.close() }
            counters.readers.store(0, ordering: .releasing)
        }
        while !stop.isSet {
            poll.removeAll()
            poll.add(wake.descriptor)
            poll.add(listener.descriptor)
            for c in clients { poll.add(c.descriptor) }
            poll.wait(timeoutMs: -1)
            if stop.isSet { return }
            if poll.isReady(0) { wake.drain() }
            // A reader's input is read and ignored (bounded); end of file or an error: it left.
            var kept: [LocalSocket] = []
            kept.reserveCapacity(clients.count)
            for (i, c) in clients.enumerated() {
                guard poll.isReady(i + 2) else {
                    kept.append(c)
                    continue
                }
                let n = scratch.withUnsafeMutableBytes { c.read(into: $0) }
                if n == 0 {
                    c.close()
                    counters.readers.subtract(1, ordering: .relaxed)
                } else {
                    kept.append(c)
                }
            }
            clients = kept
            guard poll.isReady(1) else { continue }
            while let c = listener.accept() {
                guard clients.count < maxReaders else {
                    counters.refused.add(1, ordering: .relaxed)
                    c.close()
                    continue
                }
                guard greet(c) else {
                    c.close()
                    continue
                }
                clients.append(c)
                counters.readers.add(1, ordering: .relaxed)
                counters.connections.add(1, ordering: .relaxed)
                counters.onReader.withLock { $0 }?()
            }
        }
    }

    /// Called on the tap's thread each time a reader connects (a session released for want of viewers starts its
    /// camera again: `CaptureSession.wakeAction`).
    public func whenReaderArrives(_ action: @escaping @Sendable () -> Void) { counters.onReader.withLock { $0 = action } }

    /// Readers connected now.
    public var readers: Int { counters.readers.load(ordering: .relaxed) }
    /// Readers that connected since the start.
    public var connections: Int { counters.connections.load(ordering: .relaxed) }
    /// Readers turned away (``Configuration/maxReaders`` connected already).
    public var refused: Int { counters.refused.load(ordering: .relaxed) }
    /// Pictures published.
    public var published: UInt64 { counters.published.load(ordering: .relaxed) }
    /// Pictures published without a copy: converted straight into their slot (``destination(width:height:)``).
    /// The others were copied into the ring once.
    public var publishedInPlace: UInt64 { counters.inPlace.load(ordering: .relaxed) }
    /// Pictures not published because their slot still held a picture a stage had not let go of (a stage that
    /// keeps a picture for longer than the ring lasts), or because a later one was already out.
    public var busy: Int { counters.busy.load(ordering: .relaxed) }
    /// Pictures not published: larger than the ring, and no new ring could be made.
    public var skipped: Int { counters.skipped.load(ordering: .relaxed) }
    /// The current ring's generation (1, then one more for each new ring made for a larger picture).
    public var generation: UInt32 { counters.current.withLock { $0.generation } }

    /// Memory for the next picture, `width`×`height`, in the slot it will be published in: convert the picture
    /// into it, then ``publish(_:timestampNs:rotation:cameraSequence:fullRange:)`` it, and the tap copies nothing
    /// (its planes are packed, as readers read them). The slot reads as being written until then. nil when the
    /// picture does not fit the ring, or the slot still holds a picture a stage keeps (the caller converts into
    /// memory of its own, and `publish` copies). `VideoSource.setPictureDestination(_:)` takes this.
    ///
    /// A picture handed out and never published leaves its slot to the next one (readers count the frame missed).
    public func destination(width: Int, height: Int) -> I420Buffer? {
        guard (1...16384).contains(width), (1...16384).contains(height), !closed.load(ordering: .relaxed) else { return nil }
        let data = TapLayout.dataSize(width: width, height: height)
        return writer.withLock { state -> I420Buffer? in
            guard data <= state.ring.capacity else { return nil }
            let index = Int((state.sequence + 1) % UInt64(state.ring.slots))
            guard isKnownUniquelyReferenced(&state.storages[index]) else { return nil }
            if state.reserved[index] != 0 { FrameTap.abandon(index, in: &state) }
            state.sequence += 1
            state.reserved[index] = state.sequence
            FrameTap.beginWrite(state.ring.slot(index))
            let cw = (width + 1) / 2, ch = (height + 1) / 2
            let planes = PlaneLayout(count: 3, offsets: (0, width * height, width * height + cw * ch), strides: (width, cw, cw))
            return I420Buffer(VideoFrameBuffer(i420Width: width, height: height, planes: planes, storage: state.storages[index]))
        }
    }

    /// Publishes `picture` as the latest frame and returns its sequence number (1, 2, 3…), or nil when it was
    /// skipped (see ``skipped`` and ``busy``). A picture converted into ``destination(width:height:)`` gets its
    /// header only; any other is copied into the next slot (its planes packed: strides equal to the widths), under
    /// the slot's seqlock. Never waits for a reader; allocates nothing unless the picture needs a new, larger ring.
    /// `rotation` is metadata for readers (the pixels are as given); `fullRange` tells them the samples' range.
    @discardableResult
    public func publish(
        _ picture: I420Buffer, timestampNs: Int64, rotation: VideoRotation = .rotation0, cameraSequence: UInt64 = 0, fullRange: Bool = false
    ) -> UInt64? {
        publish(picture, timestampNs: timestampNs, rotation: rotation, cameraSequence: cameraSequence, fullRange: fullRange, midWrite: nil)
    }

    /// As `publish`, calling `midWrite` while a copied picture's slot is half written (its seqlock odd, the planes
    /// copied, the header not yet): tests read the slot there.
    @discardableResult
    package func publish(
        _ picture: I420Buffer, timestampNs: Int64, rotation: VideoRotation, cameraSequence: UInt64, fullRange: Bool, midWrite: (() -> Void)?
    ) -> UInt64? {
        let w = picture.width, h = picture.height, cw = picture.chromaWidth, ch = picture.chromaHeight
        let data = TapLayout.dataSize(width: w, height: h)
        guard !closed.load(ordering: .relaxed) else { return nil }
        let frame = SlotHeader(
            timestampNs: timestampNs, cameraSequence: cameraSequence, width: w, height: h, rotation: rotation, fullRange: fullRange)
        return writer.withLock { state -> UInt64? in
            // Converted in place: the header only, if no later frame is out already (readers see numbers rise).
            if let index = state.storages.firstIndex(where: { $0 === picture.buffer.storage }), state.reserved[index] != 0 {
                let sequence = state.reserved[index]
                let slot = state.ring.slot(index)
                let packed =
                    picture.dataY == UnsafePointer(slot.assumingMemoryBound(to: UInt8.self)) + TapLayout.slotHeaderSize
                    && picture.strideY == w && picture.strideU == cw && picture.strideV == cw
                    && picture.dataU == picture.dataY + w * h && picture.dataV == picture.dataU + cw * ch
                guard sequence > state.latest, packed else {
                    FrameTap.abandon(index, in: &state)
                    counters.busy.add(1, ordering: .relaxed)
                    return nil
                }
                state.reserved[index] = 0
                finish(slot, sequence: sequence, frame, in: &state)
                counters.inPlace.add(1, ordering: .relaxed)
                return sequence
            }
            if data > state.ring.capacity {
                guard let bigger = try? TapRing(slots: state.ring.slots, dataBytes: data, generation: state.ring.generation &+ 1) else {
                    counters.skipped.add(1, ordering: .relaxed)
                    return nil
                }
                counters.current.withLock { $0 = bigger }
                state.ring.retire()
                state.use(bigger)
            }
            let index = Int((state.sequence + 1) % UInt64(state.ring.slots))
            if state.reserved[index] != 0 && isKnownUniquelyReferenced(&state.storages[index]) { FrameTap.abandon(index, in: &state) }
            // A stage still holds a picture converted into this slot (or one is being converted into it): not now.
            guard state.reserved[index] == 0, isKnownUniquelyReferenced(&state.storages[index]) else {
                counters.busy.add(1, ordering: .relaxed)
                return nil
            }
            state.sequence += 1
            let sequence = state.sequence
            let slot = state.ring.slot(index)
            FrameTap.beginWrite(slot)
            let offsetY = TapLayout.slotHeaderSize, offsetU = offsetY + w * h, offsetV = offsetU + cw * ch
            FrameTap.copy(picture.dataY, stride: picture.strideY, to: slot + offsetY, width: w, height: h)
            FrameTap.copy(picture.dataU, stride: picture.strideU, to: slot + offsetU, width: cw, height: ch)
            FrameTap.copy(picture.dataV, stride: picture.strideV, to: slot + offsetV, width: cw, height: ch)
            midWrite?()
            finish(slot, sequence: sequence, frame, in: &state)
            return sequence
        }
    }

    /// A picture's description for its slot header.
    private struct SlotHeader {
        var timestampNs: Int64, cameraSequence: UInt64, width: Int, height: Int, rotation: VideoRotation, fullRange: Bool
    }

    /// Makes a slot's seqlock odd (only the writer changes it, and it is even here): readers leave the slot alone.
    /// Plain aligned 64-bit stores with fences (compiler and CPU barriers), the seqlock pattern of the Linux kernel's
    /// write_seqcount_begin/end.
    private static func beginWrite(_ slot: UnsafeMutableRawPointer) {
        let lock = slot.load(fromByteOffset: TapLayout.seqlock, as: UInt64.self)
        slot.storeBytes(of: lock | 1, toByteOffset: TapLayout.seqlock, as: UInt64.self)
        atomicMemoryFence(ordering: .releasing)
    }

    /// Ends a write: the seqlock even again (one more than when it was odd).
    private static func endWrite(_ slot: UnsafeMutableRawPointer) {
        atomicMemoryFence(ordering: .releasing)
        let lock = slot.load(fromByteOffset: TapLayout.seqlock, as: UInt64.self)
        slot.storeBytes(of: lock &+ 1, toByteOffset: TapLayout.seqlock, as: UInt64.self)
        atomicMemoryFence(ordering: .releasing)
    }

    /// Gives up the picture handed out in slot `index`: its sequence number is never published (readers count it
    /// missed) and the slot holds no frame.
    private static func abandon(_ index: Int, in state: inout Writer) {
        let slot = state.ring.slot(index)
        slot.storeBytes(of: UInt64(0), toByteOffset: TapLayout.sequence, as: UInt64.self)
        endWrite(slot)
        state.reserved[index] = 0
    }

    /// Writes a slot's header (its planes are in place, its seqlock odd), ends the write and makes it the latest.
    private func finish(_ slot: UnsafeMutableRawPointer, sequence: UInt64, _ f: SlotHeader, in state: inout Writer) {
        let w = f.width, h = f.height, cw = (w + 1) / 2, ch = (h + 1) / 2
        let offsetY = TapLayout.slotHeaderSize, offsetU = offsetY + w * h, offsetV = offsetU + cw * ch
        slot.storeBytes(of: sequence, toByteOffset: TapLayout.sequence, as: UInt64.self)
        slot.storeBytes(of: f.timestampNs, toByteOffset: TapLayout.timestamp, as: Int64.self)
        slot.storeBytes(of: f.cameraSequence, toByteOffset: TapLayout.cameraSequence, as: UInt64.self)
        slot.storeBytes(of: UInt32(w), toByteOffset: TapLayout.width, as: UInt32.self)
        slot.storeBytes(of: UInt32(h), toByteOffset: TapLayout.height, as: UInt32.self)
        slot.storeBytes(of: UInt32(w), toByteOffset: TapLayout.strideY, as: UInt32.self)
        slot.storeBytes(of: UInt32(cw), toByteOffset: TapLayout.strideU, as: UInt32.self)
        slot.storeBytes(of: UInt32(cw), toByteOffset: TapLayout.strideV, as: UInt32.self)
        slot.storeBytes(of: UInt32(f.rotation.rawValue), toByteOffset: TapLayout.rotation, as: UInt32.self)
        slot.storeBytes(of: UInt32(offsetY), toByteOffset: TapLayout.offsetY, as: UInt32.self)
        slot.storeBytes(of: UInt32(offsetU), toByteOffset: TapLayout.offsetU, as: UInt32.self)
        slot.storeBytes(of: UInt32(offsetV), toByteOffset: TapLayout.offsetV, as: UInt32.self)
        slot.storeBytes(of: f.fullRange ? TapLayout.fullRange : 0, toByteOffset: TapLayout.slotFlags, as: UInt32.self)
        slot.storeBytes(of: UInt64(TapLayout.dataSize(width: w, height: h)), toByteOffset: TapLayout.dataSize, as: UInt64.self)
        FrameTap.endWrite(slot)
        state.ring.base.storeBytes(of: sequence, toByteOffset: TapLayout.latestSequence, as: UInt64.self)
        state.latest = sequence
        counters.published.add(1, ordering: .relaxed)
        counters.size.store(UInt64(w) << 32 | UInt64(h), ordering: .relaxed)
    }

    /// Copies a plane's rows, packed: one copy for a plane whose stride is its width.
    private static func copy(_ source: UnsafePointer<UInt8>, stride: Int, to destination: UnsafeMutableRawPointer, width: Int, height: Int) {
        if stride == width {
            destination.copyMemory(from: source, byteCount: width * height)
            return
        }
        for row in 0..<height { (destination + row * width).copyMemory(from: source + row * stride, byteCount: width) }
    }

    /// Stops serving: the ring is marked retired (readers see the end), the readers' connections are closed, the
    /// thread joined and the socket file removed (if it is still ours). Readers keep their mappings. Idempotent.
    public func close() {
        guard !closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        writer.withLock { $0.ring.retire() }
        thread.stop()
        listener.close()
        if let st = try? FileSystem.status(socketPath), UInt64(st.st_ino) == socketInode { try? FileSystem.unlink(socketPath) }
    }

    deinit { close() }
}

extension ErrorCode where Domain == ProcessingError {
    /// A frame tap's socket path is taken: another tap is running there, or something else is there.
    public static var tapInUse: Self { Self(rawValue: "tap in use") }
}
