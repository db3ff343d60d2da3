public import VideoCapture

/// A small pool of I420 buffers of one size. A buffer is reused once the pool holds the only reference to
/// its storage, so a steady pipeline that lets go of each frame allocates nothing.
public final class I420BufferPool {
    /// Width of every buffer the pool hands out, in pixels.
    public let width: Int
    /// Height of every buffer the pool hands out, in pixels.
    public let height: Int
    private var storages: [FrameStorage] = []
    private let maxBuffers: Int

    /// A pool of `width` x `height` I420 buffers that keeps at most `maxBuffers` (at least 1) for reuse.
    /// Nothing is allocated until the first `acquire()`.
    public init(width: Int, height: Int, maxBuffers: Int = 4) {
        self.width = width
        self.height = height
        self.maxBuffers = max(1, maxBuffers)
        storages.reserveCapacity(self.maxBuffers)
    }

    /// How many buffers were allocated so far (the pool's total footprint).
    public var allocatedCount: Int { storages.count }

    /// A free buffer; allocates only while fewer than `maxBuffers` exist. If every buffer is still held,
    /// a new, unpooled buffer is returned (correct, just not free).
    public func acquire() -> I420Buffer {
        for i in storages.indices where isKnownUniquelyReferenced(&storages[i]) {
            return I420Buffer(width: width, height: height, fitting: storages[i])
        }
        // Unpooled (every pooled buffer is held): from the allocator. Pooled: mapped, as long-lived buffers are.
        guard storages.count < maxBuffers else { return I420Buffer(width: width, height: height) }
        let s = FrameStorage(pooledCapacity: I420Buffer.byteCount(width: width, height: height))
        storages.append(s)
        return I420Buffer(width: width, height: height, fitting: s)
    }
}

/// Pools keyed by size, for converters whose output size may change (after a device switch).
final class PoolSet {
    private var pools: [I420BufferPool] = []
    func acquire(width: Int, height: Int) -> I420Buffer {
        if let p = pools.first(where: { $0.width == width && $0.height == height }) { return p.acquire() }
        let p = I420BufferPool(width: width, height: height)
        if pools.count >= 6 { pools.removeFirst() }
        pools.append(p)
        return p.acquire()
    }
    var allocatedCount: Int { pools.reduce(0) { $0 + $1.allocatedCount } }
}
