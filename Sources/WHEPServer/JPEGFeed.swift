import Foundation
import Synchronization
import Metrics
public import CapturePipeline
public import VideoCapture
import VideoProcessing
import VideoCaptureCommons

/// Stills and MJPEG from a capture session's pictures: `GET /snapshot.jpg` and `GET /stream.mjpeg` of a
/// ``WHEPEndpoint``, behind its token, origin and connection limits.
///
/// The feed's ``stage`` runs in the session beside the encode and takes the one I420 picture the session converts
/// per frame; it wants pictures only while a snapshot waits or an MJPEG client is connected, so a server nobody
/// asks for stills converts nothing more for them. A snapshot is the next picture scaled to the size asked and
/// encoded as a baseline JPEG; within ``Configuration/cacheWindowNs`` of it, a request of the same size gets the
/// same bytes without waiting for (or waking) the camera. MJPEG clients that ask for the same size and rate share
/// one JPEG encode per frame; each has a mailbox of one part, so a slow client skips frames (counted) instead of
/// queueing them, and its host disconnects it when it reads nothing for ``Configuration/stallTimeoutNs``.
///
/// ```swift
/// let feed = JPEGFeed(session: session)
/// let endpoint = WHEPEndpoint(hub: broadcast.hub, policy: policy, stills: feed)
/// let report = try await session.run(stages: [broadcast.stage, feed.stage])
/// ```
public final class JPEGFeed: Sendable {
    /// The cache window, the MJPEG limits and rates, the JPEG quality and the sizes asked for.
    public struct Configuration: Sendable, Equatable {
        /// A snapshot made less than this long ago is served again for the same size, without a new frame
        /// (0: every request waits for the next frame).
        public var cacheWindowNs: Int64 = 1_000_000_000
        /// MJPEG clients at once; the next one gets 503.
        public var maxClients = 8
        /// MJPEG clients at once from one client address; the next one gets 429.
        public var maxClientsPerAddress = 4
        /// The MJPEG frame rate when a client names none (`?fps=`); a client's rate is at most the camera's.
        public var defaultFrameRate = 5.0
        /// JPEG quality (libjpeg's scale).
        public var quality = 80
        /// The largest width or height a request may ask for (the picture's own size bounds it too: no upscaling).
        public var maxSide = 4096
        /// An MJPEG client that takes no byte for this long is disconnected (its frames are skipped meanwhile).
        public var stallTimeoutNs: Int64 = 10_000_000_000
        /// A snapshot that gets no frame within this long is answered 503 (the camera is away or stalled).
        public var snapshotTimeoutNs: Int64 = 5_000_000_000
        /// Snapshot requests waiting for a frame at once; the next one gets 503.
        public var maxPendingSnapshots = 64

        /// The defaults: a 1 s cache window, 8 MJPEG clients (4 per address) at 5 fps, quality 80.
        public init() {}

        /// Checks every member's range: `cacheWindowNs` (0...60 s), `maxClients` (0...1024), `maxClientsPerAddress`
        /// (1...1024), `defaultFrameRate` (0.1...240), `quality` (1...100), `maxSide` (16...16384), `stallTimeoutNs`
        /// (0.5...600 s), `snapshotTimeoutNs` (0.1...60 s) and `maxPendingSnapshots` (1...4096). A refusal is a
        /// `ServerError` with code `invalidConfiguration` whose `setting` names the member.
        public func validate() throws(ServerError) {
            try ServerError.refuse([
                ("cacheWindowNs", SettingCheck.seconds("cacheWindowNs", cacheWindowNs, 0...60)),
                ("maxClients", SettingCheck.range("maxClients", maxClients, 0...1024)),
                ("maxClientsPerAddress", SettingCheck.range("maxClientsPerAddress", maxClientsPerAddress, 1...1024)),
                (
                    "defaultFrameRate",
                    defaultFrameRate.isFinite && (0.1...240).contains(defaultFrameRate)
                        ? nil : "defaultFrameRate must be 0.1...240, got \(defaultFrameRate)"
                ),
                ("quality", SettingCheck.range("quality", quality, 1...100)),
                ("maxSide", SettingCheck.range("maxSide", maxSide, 16...16384)),
                ("stallTimeoutNs", SettingCheck.seconds("stallTimeoutNs", stallTimeoutNs, 0.5...600)),
                ("snapshotTimeoutNs", SettingCheck.seconds("snapshotTimeoutNs", snapshotTimeoutNs, 0.1...60)),
                ("maxPendingSnapshots", SettingCheck.range("maxPendingSnapshots", maxPendingSnapshots, 1...4096)),
            ])
        }
    }

    /// What the feed has done so far (GET /stats shows it under `stills`).
    public struct Statistics: Sendable, Equatable {
        /// Snapshot requests answered with a JPEG, and of them those served from the cache window.
        public var snapshots = 0, snapshotsCached = 0
        /// Snapshot requests refused (too many waiting) or answered 503 because no frame came in time.
        public var snapshotsRefused = 0, snapshotTimeouts = 0
        /// JPEG encodes (one per frame and size, shared by every request and client that wanted it).
        public var encodes = 0
        /// MJPEG clients connected now, and since the start; refused over the limits.
        public var mjpegClients = 0, mjpegClientsTotal = 0, mjpegRefused = 0
        /// MJPEG parts handed to clients, and parts a client skipped because it had not taken the previous one.
        public var mjpegFrames = 0, mjpegSkipped = 0
        /// MJPEG clients disconnected because they took nothing for `stallTimeoutNs`.
        public var mjpegStalled = 0

        var json: [(String, Any)] {
            [
                ("snapshots", snapshots), ("snapshotsCached", snapshotsCached), ("snapshotsRefused", snapshotsRefused),
                ("snapshotTimeouts", snapshotTimeouts), ("encodes", encodes), ("mjpegClients", mjpegClients),
                ("mjpegClientsTotal", mjpegClientsTotal), ("mjpegRefused", mjpegRefused), ("mjpegFrames", mjpegFrames),
                ("mjpegSkipped", mjpegSkipped), ("mjpegStalled", mjpegStalled),
            ]
        }
    }

    /// The feed's settings.
    public let configuration: Configuration
    /// The stage to run in the session (it takes the session's pictures while stills are wanted).
    public var stage: any PictureStage { stageBox.stage }
    private let stageBox: StageBox
    private let state: Mutex<State>
    private let clock: @Sendable () -> Int64
    private let wake: @Sendable () -> Void
    private let metrics = FeedMetrics()

    struct CacheEntry {
        var bytes: [UInt8]
        var madeNs: Int64
    }
    struct Waiter {
        var id: UInt64
        var completion: @Sendable (Result<[UInt8], StillRefusal>) -> Void
    }
    struct State {
        /// The size of the last picture the stage got (requests are bounded by it); before one, the camera's.
        var pictureSize: FrameSize
        var frameRate: Double
        var cache: [FrameSize: CacheEntry] = [:]
        /// Snapshots waiting for the next picture, by size (nil: the picture's own).
        var waiting: [FrameSize?: [Waiter]] = [:]
        var waitingCount = 0
        var clients: [UInt64: MJPEGClient] = [:]
        var nextID: UInt64 = 1
        var stats = Statistics()
        var ended = false
    }

    /// A feed for `session`'s pictures: requests are bounded by the selected size (then by each picture's) and
    /// MJPEG rates by its frame rate; a snapshot or MJPEG client wakes a camera released for idleness
    /// (`CaptureSession.wakeAction`). Run ``stage`` in the session.
    public convenience init(session: CaptureSession, configuration: Configuration = Configuration()) {
        let fps = session.selection.fps.fps
        self.init(
            configuration: configuration, pictureSize: session.selection.size, frameRate: fps.isFinite && fps > 0 ? fps : 30,
            wake: session.wakeAction)
    }

    /// A feed whose pictures come from whoever runs ``stage`` (a session, or a test that calls `consume`):
    /// requests are bounded by `pictureSize` until the first picture (then by each picture's size), MJPEG rates by
    /// `frameRate`; `clock` gives monotonic nanoseconds for the cache window (nil: the monotonic clock; inject one in
    /// tests); `wake` is
    /// called when a request needs a picture.
    public init(
        configuration: Configuration = Configuration(), pictureSize: FrameSize, frameRate: Double,
        clock: (@Sendable () -> Int64)? = nil, wake: @escaping @Sendable () -> Void = {}
    ) {
        self.configuration = configuration
        self.clock = clock ?? { monotonicNanoseconds() }
        self.wake = wake
        state = Mutex(State(pictureSize: pictureSize, frameRate: frameRate.isFinite && frameRate > 0 ? min(frameRate, 240) : 30))
        stageBox = StageBox()
        stageBox.stage = JPEGFeedStage(feed: self, quality: configuration.quality)
    }

    /// The statistics so far (a snapshot; any thread).
    public var statistics: Statistics { state.withLock { $0.stats } }

    /// True while a snapshot waits for a picture or an MJPEG client is connected (the stage's `wantsPictures`).
    public var wantsPictures: Bool { state.withLock { $0.waitingCount > 0 || !$0.clients.isEmpty } }

    // MARK: - Requests

    /// Why a still or a stream is refused, as the status and sentence to answer with.
    public struct StillRefusal: Error, Sendable, Equatable {
        /// The HTTP status: 400 (a bad parameter, named), 429 or 503 (a limit), 500 (the encode failed).
        public var status: Int
        /// A sentence for people, naming the parameter and value at fault or the limit reached.
        public var message: String
        /// Seconds to wait before trying again (for 429 and 503), if any.
        public var retryAfter: Int?
        /// A refusal with `status` and `message`.
        public init(status: Int, message: String, retryAfter: Int? = nil) {
            self.status = status
            self.message = message
            self.retryAfter = retryAfter
        }
    }

    /// The size a request asks for from its query (`width=`, `height=`; neither: the picture's own size, one:
    /// the other from the picture's aspect, made even), checked: decimal digits, even, 16 up to the picture's
    /// side and ``Configuration/maxSide``. nil for the picture's own size.
    public func requestedSize(_ query: [(String, String)]) throws(StillRefusal) -> FrameSize? {
        let picture = state.withLock { $0.pictureSize }
        let bounds = (min(picture.width, configuration.maxSide), min(picture.height, configuration.maxSide))
        func side(_ name: String, _ bound: Int) throws(StillRefusal) -> Int? {
            guard let raw = query.last(where: { $0.0 == name })?.1 else { return nil }
            let shown = String(raw.prefix(20).filter { $0.isASCII && !$0.isNewline })
            guard !raw.isEmpty, raw.utf8.count <= 5, raw.utf8.allSatisfy({ (0x30...0x39).contains($0) }), let n = Int(raw) else {
                throw StillRefusal(status: 400, message: "\(name) must be a whole number of pixels, got \"\(shown)\"")
            }
            guard bound >= 16, (16...bound).contains(n) else {
                throw StillRefusal(status: 400, message: "\(name) must be 16...\(max(bound, 16)) (the picture's \(name)), got \(n)")
            }
            guard n % 2 == 0 else { throw StillRefusal(status: 400, message: "\(name) must be even (4:2:0), got \(n)") }
            return n
        }
        let w = try side("width", bounds.0), h = try side("height", bounds.1)
        switch (w, h) {
        case (nil, nil): return nil
        case (let w?, let h?): return FrameSize(width: w, height: h)
        case (let w?, nil):
            return FrameSize(width: w, height: max(2, min(bounds.1, (w * picture.height / max(1, picture.width) + 1) & ~1)))
        case (nil, let h?):
            return FrameSize(width: max(2, min(bounds.0, (h * picture.width / max(1, picture.height) + 1) & ~1)), height: h)
        }
    }

    /// The MJPEG rate a request asks for (`fps=`; none: ``Configuration/defaultFrameRate``), checked: a number in
    /// 0.1 up to the camera's frame rate.
    public func requestedFrameRate(_ query: [(String, String)]) throws(StillRefusal) -> Double {
        let camera = state.withLock { $0.frameRate }
        guard let raw = query.last(where: { $0.0 == "fps" })?.1 else { return min(configuration.defaultFrameRate, camera) }
        let shown = String(raw.prefix(20).filter { $0.isASCII && !$0.isNewline })
        guard raw.utf8.count <= 10, raw.utf8.allSatisfy({ (0x30...0x39).contains($0) || $0 == 0x2e }), let fps = Double(raw), fps.isFinite else {
            throw StillRefusal(status: 400, message: "fps must be a number of frames per second, got \"\(shown)\"")
        }
        let top = (camera * 1000).rounded(.down) / 1000
        guard fps >= 0.1, fps <= top + 0.001 else {
            throw StillRefusal(status: 400, message: "fps must be 0.1...\(top) (the camera's rate), got \(raw)")
        }
        return min(fps, camera)
    }

    /// The next picture at `size` (nil: its own) as a JPEG, to `completion` (from the session's thread, or at once
    /// from the cache window); returns an id for ``cancelSnapshot(_:timedOut:)``, or nil when `completion` was already
    /// called (served from the cache, or refused: too many waiting, the feed ended).
    @discardableResult
    public func snapshot(size: FrameSize?, completion: @escaping @Sendable (Result<[UInt8], StillRefusal>) -> Void) -> UInt64? {
        let now = clock()
        enum Outcome {
            case cached([UInt8])
            case refused(StillRefusal)
            case waiting(UInt64)
        }
        let outcome = state.withLock { s -> Outcome in
            if s.ended { return .refused(StillRefusal(status: 503, message: "the camera has stopped", retryAfter: 5)) }
            let key = size ?? s.pictureSize
            if let entry = s.cache[key], now - entry.madeNs < configuration.cacheWindowNs, now >= entry.madeNs {
                s.stats.snapshots += 1
                s.stats.snapshotsCached += 1
                return .cached(entry.bytes)
            }
            guard s.waitingCount < configuration.maxPendingSnapshots else {
                s.stats.snapshotsRefused += 1
                return .refused(
                    StillRefusal(
                        status: 503, message: "\(configuration.maxPendingSnapshots) snapshots are already waiting for a frame; try again in a second",
                        retryAfter: 1))
            }
            let id = s.nextID
            s.nextID += 1
            s.waiting[size, default: []].append(Waiter(id: id, completion: completion))
            s.waitingCount += 1
            return .waiting(id)
        }
        switch outcome {
        case .cached(let bytes):
            metrics.snapshots.increment()
            completion(.success(bytes))
            return nil
        case .refused(let r):
            completion(.failure(r))
            return nil
        case .waiting(let id):
            wake()
            return id
        }
    }

    /// Gives up a waiting snapshot (its client went away, or it timed out): its completion is not called. Returns
    /// true when it was still waiting; `timedOut` counts it in ``Statistics/snapshotTimeouts``.
    @discardableResult
    public func cancelSnapshot(_ id: UInt64, timedOut: Bool = false) -> Bool {
        state.withLock { s in
            for (key, list) in s.waiting {
                guard let i = list.firstIndex(where: { $0.id == id }) else { continue }
                s.waiting[key]!.remove(at: i)
                if s.waiting[key]!.isEmpty { s.waiting[key] = nil }
                s.waitingCount -= 1
                if timedOut { s.stats.snapshotTimeouts += 1 }
                return true
            }
            return false
        }
    }

    /// A new MJPEG client at `size` (nil: the picture's own) and `frameRate`, from `address`; refused over
    /// ``Configuration/maxClients`` (503) or ``Configuration/maxClientsPerAddress`` (429).
    public func subscribe(size: FrameSize?, frameRate: Double, address: String) throws(StillRefusal) -> MJPEGClient {
        let result = state.withLock { s -> Result<MJPEGClient, StillRefusal> in
            if s.ended { return .failure(StillRefusal(status: 503, message: "the camera has stopped", retryAfter: 5)) }
            guard configuration.maxClients > 0 else {
                s.stats.mjpegRefused += 1
                return .failure(StillRefusal(status: 503, message: "this server serves no MJPEG (its limit of MJPEG clients is 0)"))
            }
            guard s.clients.count < configuration.maxClients else {
                s.stats.mjpegRefused += 1
                return .failure(
                    StillRefusal(
                        status: 503, message: "already \(configuration.maxClients) MJPEG clients; try again when one leaves", retryAfter: 10))
            }
            let fromAddress = s.clients.values.lazy.filter { $0.address == address }.count
            guard fromAddress < configuration.maxClientsPerAddress else {
                s.stats.mjpegRefused += 1
                return .failure(
                    StillRefusal(
                        status: 429, message: "your address already has \(fromAddress) MJPEG clients; close one first", retryAfter: 5))
            }
            let id = s.nextID
            s.nextID += 1
            let client = MJPEGClient(id: id, feed: self, size: size, frameRate: frameRate, address: address)
            s.clients[id] = client
            s.stats.mjpegClients = s.clients.count
            s.stats.mjpegClientsTotal += 1
            return .success(client)
        }
        switch result {
        case .success(let client):
            metrics.clients.record(statistics.mjpegClients)
            wake()
            return client
        case .failure(let refusal):
            throw refusal
        }
    }

    func unsubscribe(_ client: MJPEGClient, stalled: Bool) {
        let count = state.withLock { s -> Int in
            if s.clients.removeValue(forKey: client.id) != nil, stalled { s.stats.mjpegStalled += 1 }
            s.stats.mjpegClients = s.clients.count
            return s.clients.count
        }
        metrics.clients.record(count)
    }

    func countSkipped() { state.withLock { $0.stats.mjpegSkipped += 1 } }

    // MARK: - The stage's side

    /// One picture: the waiting snapshots get it at their sizes, the MJPEG clients that are due get a part; one
    /// encode per size. Runs on the session's thread.
    /// `rotation`: the picture's own (carried as metadata, when every WHEP viewer turns it): stills are upright.
    func consume(_ picture: I420Buffer, timestampNs: Int64, rotation: VideoRotation = .rotation0, encoder: JPEGPictureEncoder) {
        let upright = rotation.swapsDimensions ? (picture.height, picture.width) : (picture.width, picture.height)
        let own = FrameSize(width: upright.0 & ~1, height: upright.1 & ~1)
        let (waiting, clients) = state.withLock { s -> ([FrameSize?: [Waiter]], [MJPEGClient]) in
            s.pictureSize = own
            let w = s.waiting
            s.waiting = [:]
            s.waitingCount = 0
            return (w, Array(s.clients.values))
        }
        guard !waiting.isEmpty || !clients.isEmpty else { return }
        var made: [FrameSize: Result<[UInt8], StillRefusal>] = [:]
        var encodes = 0
        func jpeg(_ size: FrameSize?) -> Result<[UInt8], StillRefusal> {
            let target = size.map { FrameSize(width: min($0.width, own.width), height: min($0.height, own.height)) } ?? own
            if let done = made[target] { return done }
            let result: Result<[UInt8], StillRefusal>
            do throws(ProcessingError) {
                result = .success(try encoder.encode(picture, size: target, rotation: rotation))
                encodes += 1
            } catch {
                result = .failure(StillRefusal(status: 500, message: "the JPEG could not be made: \(error.message)"))
            }
            made[target] = result
            return result
        }
        let now = clock()
        var served = 0
        var cached: [(FrameSize, [UInt8])] = []
        for (size, list) in waiting {
            let result = jpeg(size)
            if case .success(let bytes) = result {
                cached.append((size ?? own, bytes))
                served += list.count
            }
            for w in list { w.completion(result) }
        }
        var parts = 0
        var multipart: [FrameSize?: [UInt8]] = [:]
        for client in clients where client.isDue(timestampNs) {
            if multipart[client.size] == nil {
                guard case .success(let bytes) = jpeg(client.size) else { continue }
                multipart[client.size] = MJPEGClient.part(bytes)
            }
            client.deliver(multipart[client.size]!)
            parts += 1
        }
        state.withLock { s in
            for (size, bytes) in cached { s.cache[size] = CacheEntry(bytes: bytes, madeNs: now) }
            // Entries outside the window are of no use: the cache holds at most the sizes asked within it.
            s.cache = s.cache.filter { now - $0.value.madeNs < configuration.cacheWindowNs }
            s.stats.snapshots += served
            s.stats.encodes += encodes
            s.stats.mjpegFrames += parts
        }
        if served > 0 { metrics.snapshots.increment(by: served) }
        if encodes > 0 { metrics.encodes.increment(by: encodes) }
        if parts > 0 { metrics.frames.increment(by: parts) }
    }

    /// The run ended: waiting snapshots get 503, MJPEG clients are ended.
    func end() {
        let (waiting, clients) = state.withLock { s -> ([Waiter], [MJPEGClient]) in
            s.ended = true
            let w = s.waiting.values.flatMap { $0 }
            s.waiting = [:]
            s.waitingCount = 0
            return (w, Array(s.clients.values))
        }
        for w in waiting { w.completion(.failure(StillRefusal(status: 503, message: "the camera has stopped", retryAfter: 5))) }
        for c in clients { c.finish() }
    }

    /// The `stills` member of GET /stats.
    var statsJSON: String { jsonValue(statistics.json) }
}

/// The stage of a ``JPEGFeed`` (made with the feed; not `Sendable`: it belongs to the session that runs it).
final class JPEGFeedStage: PictureStage {
    /// Weak: the feed holds its stage; a stage whose feed is gone takes nothing.
    private weak var feed: JPEGFeed?
    private let encoder: JPEGPictureEncoder

    init(feed: JPEGFeed, quality: Int) {
        self.feed = feed
        encoder = JPEGPictureEncoder(quality: quality)
    }

    func consume(_ picture: I420Buffer, frame: VideoFrame) throws {
        feed?.consume(picture, timestampNs: frame.timestampNs, rotation: frame.rotation, encoder: encoder)
    }
    func end() throws { feed?.end() }
    var report: StageReport {
        guard let s = feed?.statistics, s.snapshots + s.mjpegClientsTotal > 0 else { return .empty }
        return .lines(
            frames: nil,
            [
                (
                    "stills",
                    "\(s.snapshots) snapshots (\(s.snapshotsCached) from the cache), \(s.mjpegClientsTotal) MJPEG clients, \(s.mjpegFrames) parts (\(s.mjpegSkipped) skipped), \(s.encodes) JPEG encodes"
                )
            ])
    }
    var wantsPictures: Bool { feed?.wantsPictures ?? false }
}

/// Holds the feed's stage, set once in the feed's init (the stage refers back to the feed).
private final class StageBox: @unchecked Sendable {
    // @unchecked: `stage` is written once, in JPEGFeed.init before the feed is shared, and only read after.
    var stage: JPEGFeedStage!
}

/// One MJPEG client of a ``JPEGFeed``: a mailbox of one part (a newer part replaces one not yet taken, counted as
/// skipped), taken by its host with ``take()`` when its connection can take more.
public final class MJPEGClient: Sendable {
    /// The multipart boundary of this stream (`multipart/x-mixed-replace; boundary=…`).
    public static let boundary = "camcapframe"
    let id: UInt64
    /// The size asked for (nil: the picture's own) and the rate.
    public let size: FrameSize?
    /// The parts per second asked for.
    public let frameRate: Double
    /// The client's address (the per-address limit).
    public let address: String
    /// The feed (it holds its clients until they close: the host closes each when its connection ends).
    private let feed: JPEGFeed
    private struct Box {
        var part: [UInt8]?
        var nextDueNs: Int64?
        var onReady: (@Sendable () -> Void)?
        var finished = false
    }
    private let box = Mutex(Box())

    init(id: UInt64, feed: JPEGFeed, size: FrameSize?, frameRate: Double, address: String) {
        self.id = id
        self.feed = feed
        self.size = size
        self.frameRate = frameRate
        self.address = address
    }

    /// The `Content-Type` of the response.
    public static var contentType: String { "multipart/x-mixed-replace; boundary=\(boundary)" }

    /// Called (from the session's thread) each time a part is ready to take, and once when the stream ends.
    public func whenReady(_ handler: @escaping @Sendable () -> Void) {
        let ready = box.withLock { b in
            b.onReady = handler
            return b.part != nil || b.finished
        }
        if ready { handler() }
    }

    /// The part waiting (its multipart header, the JPEG, CR LF), or nil when none is.
    public func take() -> [UInt8]? {
        box.withLock { b in
            defer { b.part = nil }
            return b.part
        }
    }

    /// True once the feed ended (the camera stopped): the host closes the stream after the last part.
    public var isFinished: Bool { box.withLock { $0.finished } }

    /// The client left (its connection closed): the feed forgets it. `stalled`: it was disconnected for taking
    /// nothing for the stall timeout.
    public func close(stalled: Bool = false) {
        box.withLock { b in
            b.finished = true
            b.onReady = nil
            b.part = nil
        }
        feed.unsubscribe(self, stalled: stalled)
    }

    /// A part is due at `timestampNs` (at most `frameRate` a second, on capture time; a jitter of a tenth of the
    /// interval is taken).
    func isDue(_ timestampNs: Int64) -> Bool {
        let interval = Int64(1e9 / frameRate)
        return box.withLock { b in
            guard !b.finished else { return false }
            if let next = b.nextDueNs, timestampNs < next - interval / 10 { return false }
            let next = (b.nextDueNs ?? timestampNs) &+ interval
            b.nextDueNs = next < timestampNs ? timestampNs &+ interval : next
            return true
        }
    }

    /// The multipart part of one JPEG: the boundary, its headers, the JPEG and CR LF (made once per frame and size,
    /// shared by the clients that take it).
    static func part(_ jpeg: [UInt8]) -> [UInt8] {
        var part: [UInt8] = []
        part.reserveCapacity(jpeg.count + 120)
        part += Array("--\(boundary)\r\nContent-Type: image/jpeg\r\nContent-Length: \(jpeg.count)\r\n\r\n".utf8)
        part += jpeg
        part += [0x0d, 0x0a]
        return part
    }

    func deliver(_ part: [UInt8]) {
        let (handler, skipped) = box.withLock { b -> ((@Sendable () -> Void)?, Bool) in
            guard !b.finished else { return (nil, false) }
            let skipped = b.part != nil
            b.part = part
            return (b.onReady, skipped)
        }
        if skipped { feed.countSkipped() }
        handler?()
    }

    func finish() {
        let handler = box.withLock { b in
            b.finished = true
            return b.onReady
        }
        handler?()
    }
}

/// The feed's metrics: snapshots served, JPEG encodes, MJPEG clients and parts.
private struct FeedMetrics {
    let snapshots = Counter(label: "whep_snapshots_total")
    let encodes = Counter(label: "whep_jpeg_encodes_total")
    let frames = Counter(label: "whep_mjpeg_frames_total")
    let clients = Gauge(label: "whep_mjpeg_clients")
}
