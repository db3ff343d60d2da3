import CV4L2
import Synchronization
import VideoCapture
#if canImport(Glibc)
    import Glibc
#endif

/// A capture queue's buffers, single- and multi-planar alike (a single-planar buffer is a group of one plane, as
/// GStreamer's allocator has it): REQBUFS, QUERYBUF, mmap of every plane, EXPBUF, QBUF, DQBUF, STREAMON/OFF and
/// the teardown. It knows nothing of frames, threads or timestamps; the stream does. The next memory type
/// (DMA-BUF import, USERPTR) goes here.
///
/// Not thread-safe: after the start it belongs to the capture thread.
final class V4L2BufferSet {
    /// A dequeued buffer: its index, the driver's flags, sequence number and timestamp, and where its payload is.
    struct Dequeued {
        let index: Int
        let flags: UInt32
        let sequence: UInt32
        let timestamp: timeval
        /// Nil when a plane's `bytesused`/`data_offset` do not fit its mapping or leave fewer bytes than the format
        /// needs (a short buffer: the stream drops and counts it).
        let payload: Payload?
    }

    /// Where a buffer's payload is: the first plane's start in its mapping and its bytes, and for a separate-plane
    /// format where every plane sits relative to the first (nil for one plane).
    struct Payload {
        let start: Int
        let used: Int
        let layout: PlaneLayout?
    }

    /// One mapped plane.
    struct PlaneMap {
        let address: UInt
        let length: Int
    }

    let node: V4L2Node
    let type: UInt32
    let planeFormats: [PlaneFormat]
    /// Each buffer's memory: a storage over its first plane whose release unmaps all its planes (and closes its
    /// DMA-BUF export) once the last frame that borrows it goes.
    private(set) var storages: [FrameStorage] = []
    /// True while the driver has the buffer.
    private(set) var queued: [Bool] = []
    /// Each buffer's DMA-BUF export, by index (empty when not asked).
    private(set) var exports: [DMABuf?] = []
    /// Every buffer's planes, `planeFormats.count` per buffer.
    private var maps: [PlaneMap] = []
    /// Live mappings (also those held by consumers after the teardown).
    let counter = MapCounter()
    /// The `v4l2_plane` array every multi-planar QUERYBUF/QBUF/DQBUF reuses (no allocation per frame); nil on a
    /// single-planar queue.
    private let planeArray: UnsafeMutablePointer<v4l2_plane>?
    private var released = false

    var count: Int { storages.count }
    private var isMultiPlanar: Bool { planeArray != nil }

    /// The plane array a multi-planar buffer type's QUERYBUF/QBUF/DQBUF point at (`maxPlanes` zeroed planes, made
    /// once: no allocation per frame), nil for a single-planar type. The owner deallocates it.
    static func planeArray(for type: UInt32) -> UnsafeMutablePointer<v4l2_plane>? {
        guard type == CV4L2_BUF_TYPE_VIDEO_CAPTURE_MPLANE || type == CV4L2_BUF_TYPE_VIDEO_OUTPUT_MPLANE else { return nil }
        let p = UnsafeMutablePointer<v4l2_plane>.allocate(capacity: V4L2StreamFormat.maxPlanes)
        p.initialize(repeating: v4l2_plane(), count: V4L2StreamFormat.maxPlanes)
        return p
    }

    /// REQBUFS `count` buffers, then QUERYBUF + mmap each plane of each (and EXPBUF each plane when `exportDMABuf`).
    /// On a failure, what was mapped or exported is released, REQBUFS(0) hands the buffers back, and the error names
    /// the buffer, the plane and the errno. The device stays open: it is the caller's.
    init(node: V4L2Node, type: UInt32, planeFormats: [PlaneFormat], count: Int, exportDMABuf: Bool) throws(CaptureError) {
        self.node = node
        self.type = type
        self.planeFormats = planeFormats
        planeArray = V4L2BufferSet.planeArray(for: type)
        var done = false
        defer { if !done { release() } }
        var rb = v4l2_requestbuffers()
        rb.count = UInt32(clamping: count)
        rb.type = type
        rb.memory = CV4L2_MEMORY_MMAP
        try node.io.ioctl(node.fd, .requestBuffers, &rb, "\(count)")
        guard rb.count >= 2 else {
            throw CaptureError(.streamFailed, "\(node.path) granted only \(rb.count) buffer(s); at least 2 are needed", device: node.path)
        }
        for i in 0..<Int(rb.count) { try map(i, export: exportDMABuf) }
        queued = Array(repeating: false, count: storages.count)
        done = true
    }

    /// A `v4l2_buffer` naming mmap buffer `index` of the queue (the one way a descriptor is built).
    private func descriptor(_ index: Int = 0) -> v4l2_buffer {
        var b = v4l2_buffer()
        b.index = UInt32(index)
        b.type = type
        b.memory = CV4L2_MEMORY_MMAP
        if let planeArray {
            planeArray.update(repeating: v4l2_plane(), count: V4L2StreamFormat.maxPlanes)
            b.m.planes = planeArray
            b.length = UInt32(planeFormats.count)
        }
        return b
    }

    /// Plane `p` of a descriptor QUERYBUF or DQBUF filled: its length, mmap offset, bytes used and data offset (a
    /// single-planar buffer is its own plane 0).
    private func plane(_ p: Int, of b: v4l2_buffer) -> (length: Int, offset: Int64, used: Int, dataOffset: Int) {
        guard let planeArray else { return (Int(b.length), Int64(b.m.offset), Int(b.bytesused), 0) }
        let x = planeArray[p]
        return (Int(x.length), Int64(x.m.mem_offset), Int(x.bytesused), Int(x.data_offset))
    }

    /// QUERYBUF, EXPBUF (when asked) and mmap of every plane of buffer `i`: one storage for the buffer.
    private func map(_ i: Int, export: Bool) throws(CaptureError) {
        let io = node.io, kernel = io.kernel
        var b = descriptor(i)
        try io.ioctl(node.fd, .queryBuffer, &b, "\(i)")
        var mapped: [PlaneMap] = []
        var dma: DMABuf?
        var done = false
        defer {
            if !done {
                for m in mapped { kernel.munmap(UnsafeMutableRawPointer(bitPattern: m.address)!, length: m.length) }
                for plane in dma?.planes ?? [] { kernel.close(plane.fd) }
            }
        }
        if export { dma = try exportBuffer(i, lengths: planeFormats.indices.map { plane($0, of: b).length }) }
        for p in planeFormats.indices {
            let plane = self.plane(p, of: b)
            guard plane.length >= planeFormats[p].needed else {
                throw CaptureError(
                    .streamFailed,
                    "\(node.path) buffer \(i) plane \(p) is \(plane.length) bytes (VIDIOC_QUERYBUF length), smaller than the \(planeFormats[p].needed) bytes the format claims",
                    device: node.path)
            }
            let (ptr, e) = kernel.mmap(node.fd, length: plane.length, offset: plane.offset)
            guard let ptr else { throw io.error(Errno(e), isMultiPlanar ? "mmap of buffer \(i) plane \(p)" : "mmap of buffer \(i)") }
            mapped.append(PlaneMap(address: UInt(bitPattern: ptr), length: plane.length))
        }
        done = true
        maps += mapped
        exports.append(dma)
        let (counter, all, export) = (counter, mapped, dma)
        counter.value.add(1, ordering: .relaxed)
        storages.append(
            FrameStorage(borrowing: UnsafeMutableRawPointer(bitPattern: all[0].address)!, capacity: all[0].length) {
                for m in all { kernel.munmap(UnsafeMutableRawPointer(bitPattern: m.address)!, length: m.length) }
                for plane in export?.planes ?? [] { kernel.close(plane.fd) } // the export lives as long as the mapping
                counter.value.subtract(1, ordering: .relaxed)
            })
    }

    /// Exports buffer `i`'s memory planes as DMA-BUF descriptors (`VIDIOC_EXPBUF`, read-only, close-on-exec).
    /// On a failure, those exported so far are closed and the error names the buffer, the plane and the errno.
    private func exportBuffer(_ i: Int, lengths: [Int]) throws(CaptureError) -> DMABuf {
        var planes: [DMABuf.Plane] = []
        for (p, length) in lengths.enumerated() {
            var x = v4l2_exportbuffer()
            x.type = type
            x.index = UInt32(i)
            x.plane = UInt32(p)
            x.flags = CV4L2_EXPBUF_FLAGS
            if let e = node.io.errnoOf(node.fd, .exportBuffer, &x) {
                for q in planes { node.io.kernel.close(q.fd) }
                throw CaptureError(
                    .streamFailed,
                    "\(node.path): VIDIOC_EXPBUF of buffer \(i) plane \(p) failed (\(e)): the driver cannot export its buffers as DMA-BUF; start without exportDMABuf",
                    device: node.path)
            }
            planes.append(DMABuf.Plane(fd: x.fd, length: length))
        }
        return DMABuf(planes: planes)
    }

    /// True when no consumer holds buffer `i` and the driver does not have it.
    func isFree(_ i: Int) -> Bool { !queued[i] && isKnownUniquelyReferenced(&storages[i]) }

    /// Queues every buffer no consumer holds (all of them at the start); an error names the buffer.
    func queueFree(phase: V4L2Phase = .streaming) -> CaptureError? {
        for i in storages.indices where isFree(i) {
            var b = descriptor(i)
            if let e = node.io.errnoOf(node.fd, .queueBuffer, &b) { return node.io.error(e, "VIDIOC_QBUF of buffer \(i)", phase: phase) }
            queued[i] = true
        }
        return nil
    }

    /// Where buffer `i`'s first plane is mapped (an encoder's OUTPUT buffer is written there, a CAPTURE buffer read).
    func address(_ i: Int) -> UnsafeMutableRawPointer { storages[i].mutableBaseAddress }
    /// The mapped length of buffer `i`'s first plane.
    func length(_ i: Int) -> Int { storages[i].capacity }

    /// QBUF of buffer `i` with `bytesUsed` in its first plane and `timestamp` (a memory-to-memory OUTPUT buffer:
    /// the driver copies the timestamp to the CAPTURE buffer made from it). Returns the errno.
    func queue(_ i: Int, bytesUsed: Int, timestamp: timeval) -> Errno? {
        var b = descriptor(i)
        b.timestamp = timestamp
        if let planeArray {
            planeArray[0].bytesused = UInt32(clamping: bytesUsed)
            planeArray[0].length = UInt32(clamping: length(i))
        } else {
            b.bytesused = UInt32(clamping: bytesUsed)
        }
        if let e = node.io.errnoOf(node.fd, .queueBuffer, &b) { return e }
        queued[i] = true
        return nil
    }

    /// STREAMON.
    func streamOn(phase: V4L2Phase = .setup, _ detail: String = "") -> CaptureError? {
        var t = Int32(type)
        return node.io.errnoOf(node.fd, .streamOn, &t).map {
            node.io.error($0, detail.isEmpty ? "VIDIOC_STREAMON" : "VIDIOC_STREAMON \(detail)", phase: phase)
        }
    }

    /// STREAMOFF: the driver gives every buffer back.
    func streamOff() {
        var t = Int32(type)
        _ = node.io.errnoOf(node.fd, .streamOff, &t)
        for i in queued.indices { queued[i] = false }
    }

    /// DQBUF: the buffer, or the errno (EAGAIN when none is ready, and for an index the set does not have: a driver
    /// bug that costs nothing but that answer).
    func dequeue() -> Result<Dequeued, Errno> {
        var b = descriptor()
        if let e = node.io.errnoOf(node.fd, .dequeueBuffer, &b) { return .failure(e) }
        let index = Int(b.index)
        guard index < storages.count else { return .failure(Errno(EAGAIN)) }
        queued[index] = false
        return .success(Dequeued(index: index, flags: b.flags, sequence: b.sequence, timestamp: b.timestamp, payload: payload(of: b, index)))
    }

    /// The payload of dequeued buffer `index`, checked plane by plane against its mapping and its format.
    private func payload(of b: v4l2_buffer, _ index: Int) -> Payload? {
        let n = planeFormats.count
        var offsets = (0, 0, 0), strides = (planeFormats[0].stride, 0, 0)
        var first = (start: 0, used: 0, address: 0)
        for p in 0..<n {
            let plane = self.plane(p, of: b), map = maps[index * n + p]
            guard plane.dataOffset <= plane.used, plane.used <= map.length, plane.used - plane.dataOffset >= planeFormats[p].needed else {
                return nil
            }
            let address = Int(bitPattern: map.address) &+ plane.dataOffset
            switch p {
            case 0: first = (plane.dataOffset, plane.used - plane.dataOffset, address)
            case 1: (offsets.1, strides.1) = (address &- first.address, planeFormats[p].stride)
            default: (offsets.2, strides.2) = (address &- first.address, planeFormats[p].stride)
            }
        }
        return Payload(start: first.start, used: first.used, layout: n > 1 ? PlaneLayout(count: n, offsets: offsets, strides: strides) : nil)
    }

    /// STREAMOFF, drop our references to the buffers (unmapping those no consumer holds), REQBUFS(0) once nothing
    /// is mapped any more. Mappings still held by frames stay valid until their last frame goes. Idempotent.
    func release() {
        guard !released else { return }
        released = true
        streamOff()
        storages.removeAll()
        exports.removeAll()
        maps.removeAll()
        if counter.value.load(ordering: .relaxed) == 0 {
            var rb = v4l2_requestbuffers()
            rb.count = 0
            rb.type = type
            rb.memory = CV4L2_MEMORY_MMAP
            _ = node.io.errnoOf(node.fd, .requestBuffers, &rb)
        }
        planeArray?.deallocate()
    }
}

/// Counts live mappings; shared with each buffer's release closure.
final class MapCounter: Sendable {
    let value = Atomic<Int>(0)
}
