import Foundation
import Synchronization
import Metrics
public import Logging
import VideoCaptureCommons
public import H264
public import WebRTC
import RTP
public import CapturePipeline

/// The viewers: an encoded output that hands every access unit to each connected peer, and the WHEP actions
/// (add on POST, remove on DELETE or when a peer ends by itself). Key-frame requests from all viewers are
/// merged and rate-limited; the bitrate follows the lowest REMB among the viewers.
public final class ViewerHub: EncodedOutput, Sendable {
    struct Viewer {
        var peer: WebRTCPeer
        var remb: UInt64?
        var address: String
        var number: Int
        var metrics: ViewerMetrics
        /// Its estimate and tier, for `TierPolicy`.
        var seat = TierSeat()
        /// The encode tier the viewer gets (0: full size), and the one it moves to at that tier's next key frame.
        var tier: Int {
            get { seat.tier }
            set { seat.tier = newValue }
        }
        var pendingTier: Int? {
            get { seat.pendingTier }
            set { seat.pendingTier = newValue }
        }
        /// When the viewer last changed tier.
        var tierSinceNs: Int64 {
            get { seat.tierSinceNs }
            set { seat.tierSinceNs = newValue }
        }
        var tierMoves = 0
    }
    /// One tier's viewers: those it sends to and those that move to it at its next key frame (rebuilt when a
    /// viewer comes, goes or moves: the encoder's thread only retains them).
    private struct Route {
        var peers: [WebRTCPeer] = []
        var arriving: [WebRTCPeer] = []
        var lastKeyFrameNs: Int64 = .min / 2
        var keyFramePending = false
    }
    /// A tier's encoder: where its key-frame requests and bitrates go.
    private struct TierEncoder {
        var control: EncoderControl
        var follower: BandwidthFollower
        var tier: EncodeTier?
    }
    /// How many viewers, and how many of them may still be connecting (ICE and DTLS not done), overall and per
    /// client address: a slot held by an offer that never connects is freed at the peer's connect timeout.
    public struct Limits: Sendable {
        /// Viewers connected at once; an offer beyond it gets 503.
        public var maxViewers = 16
        /// Viewers still connecting at once, over all addresses; an offer beyond it gets 503.
        public var maxPending = 8
        /// Viewers, connected or connecting, from one client address; beyond it 429.
        public var maxPerAddress = 8
        /// Viewers still connecting from one client address; beyond it 429.
        public var maxPendingPerAddress = 2
        /// Limits with the defaults: 16 viewers, 8 connecting, 8 per address of which 2 connecting.
        public init(maxViewers: Int = 16, maxPending: Int = 8, maxPerAddress: Int = 8, maxPendingPerAddress: Int = 2) {
            self.maxViewers = maxViewers
            self.maxPending = maxPending
            self.maxPerAddress = maxPerAddress
            self.maxPendingPerAddress = maxPendingPerAddress
        }
    }
    private struct State {
        var viewers: [String: Viewer] = [:]
        var order: [String] = []
        var total = 0, left = 0
        var closed = false
        var routes = [Route()]
        var tiers: [EncodeTier] = []
        var lastEnded: [(String, String)] = []
        /// The connected-or-connecting peers in arrival order, rebuilt on add/remove (the encoder's thread only
        /// retains it: nothing allocated per frame).
        var peers: [WebRTCPeer] = []
    }
    private let state = Mutex(State())
    /// The camera's health, shown as `/stats`' `camera` (set by `showCamera(_:)`).
    private let camera = Mutex<CameraHealth?>(nil)

    /// Shows `health` (the session's: `CaptureSession.health`) in `/stats` as its `camera` object.
    public func showCamera(_ health: CameraHealth) { camera.withLock { $0 = health } }
    private let identity: DTLSIdentity
    private let configuration: WebRTCPeer.Configuration
    /// The encoders the viewers' feedback goes to, one per tier (set by `connect`, before the camera starts).
    private let encoders = Mutex<[TierEncoder]>([])
    /// With a camera's own H.264 passed through: the stream's profile-level-id (nil until its first SPS).
    private let streamProfile = Mutex<(@Sendable () -> String?)?>(nil)
    /// Called when a viewer is admitted (a released camera starts again: `CaptureSession.wakeAction`).
    private let arrival = Mutex<(@Sendable () -> Void)?>(nil)
    /// Where the rotation decision goes (`steerRotation(_:)`), and the last one made.
    private let rotation = Mutex<(requests: OutputRequests, applied: Bool?)?>(nil)
    /// The shortest time between two key frames requested for viewers (300 ms, in nanoseconds): requests from
    /// several viewers within it are merged.
    public static let keyFrameIntervalNs: Int64 = 300_000_000
    /// A viewer moves up a tier onto nobody's tier when its estimate has been at least this much over the larger
    /// tier's minimum bitrate (1.3: 30 % headroom) for `tierUpHoldNs`, and at least `tierDwellNs` after its last
    /// move; onto a tier others watch, only when it covers the rate they carry (`TierPolicy`).
    public static let tierUpHeadroom = TierPolicy.upHeadroom
    /// A viewer stays on a tier while its estimate is at least this much over the tier's minimum (1.15): an
    /// estimate just over the minimum is usually still falling, and a link that carries only the minimum has no room
    /// for a key frame.
    public static let tierStayHeadroom = TierPolicy.stayHeadroom
    /// How long the estimate must allow the larger tier before a viewer moves up (0.5 s, in nanoseconds).
    public static let tierUpHoldNs: Int64 = TierPolicy.upHoldNs
    /// The shortest stay on a tier before a move up (2 s, in nanoseconds); moves down are not held back.
    public static let tierDwellNs: Int64 = TierPolicy.dwellNs
    /// The limits the hub admits viewers under.
    public let limits: Limits

    private let logger: Logger
    /// whep_viewers (connected or connecting), whep_viewers_joined_total, whep_viewers_left_total; per viewer
    /// (label `viewer`, its number) at each `refreshMetrics()`.
    private let viewersGauge = Gauge(label: "whep_viewers")
    private let joined = Counter(label: "whep_viewers_joined_total")
    private let leftCounter = Counter(label: "whep_viewers_left_total")

    /// `logger` gets a viewer's arrival and departure (debug) and nothing per frame.
    public init(
        identity: DTLSIdentity, configuration: WebRTCPeer.Configuration, limits: Limits = Limits(),
        logger: Logger = Logger(label: "swift-video-capture.whep", factory: { _ in SwiftLogNoOpLogHandler() })
    ) {
        self.identity = identity
        self.configuration = configuration
        self.limits = limits
        self.logger = logger
    }
    /// Key-frame requests and bandwidth estimates go to `encode`; with `adapting`, estimates also set the size
    /// and frame rate.
    public func connect(_ encode: EncodeStage, adapting requests: OutputRequests?) {
        let follower = BandwidthFollower(encode, adapting: requests)
        encoders.withLock { $0 = [TierEncoder(control: encode.control, follower: follower, tier: nil)] }
        state.withLock {
            $0.tiers = []
            $0.routes = [Route()]
        }
        streamProfile.withLock { $0 = nil }
    }

    /// A camera's own H.264 passed through to every viewer (`PassthroughStage` with this hub as its output): key-frame
    /// requests go to the camera (`V4L2_CID_MPEG_VIDEO_FORCE_KEY_FRAME`), the lowest estimate among the viewers to
    /// its bitrate control (`V4L2_CID_MPEG_VIDEO_BITRATE`, within `maxBitrate` bits/s) where it has them. An offer is
    /// answered with a payload type whose profile decodes the camera's (`WebRTCOffer.init(_:stream:)`), refused
    /// (406) when it has none, and asked to come back (503, `Retry-After: 1`) before the camera's first SPS. One
    /// tier (the camera's size); the camera's rotation goes only as metadata (pixels are not rotated).
    public func connect(_ passthrough: PassthroughStage, maxBitrate: Int) {
        let follower = BandwidthFollower(passthrough, maxBitrate: maxBitrate)
        encoders.withLock { $0 = [TierEncoder(control: passthrough.control, follower: follower, tier: nil)] }
        state.withLock {
            $0.tiers = []
            $0.routes = [Route()]
        }
        let source = passthrough.profileLevelIDSource
        streamProfile.withLock { $0 = source }
    }

    /// Encode tiers: each viewer gets the largest tier its own estimate carries (REMB or the send-side estimate),
    /// instead of all following the lowest. Make the stage with `tierOutputs(_:)` and `tierToEncodeFirst`, then
    /// connect it, before the camera starts.
    ///
    /// A viewer starts on the full tier. Tier moves never lower anyone else (`TierPolicy`): a viewer moves down
    /// as soon as its estimate is under `tierStayHeadroom` × its tier's minimum bitrate or under 90 % of what the
    /// tier's other viewers carry, and up one tier when the estimate has covered the larger tier's current rate (the
    /// rate its viewers carry; `tierUpHeadroom` × its minimum when nobody watches it) for `tierUpHoldNs`, at least
    /// `tierDwellNs` after its last move. A move takes effect at the new tier's next key frame (asked for at once),
    /// so the browser sees a resolution change, not a broken picture. Each tier's bitrate follows the lowest
    /// estimate among its viewers, within the tier's maximum; every estimate that comes in re-judges every viewer.
    public func connect(_ tiered: TieredEncodeStage) {
        encoders.withLock {
            $0 = zip(tiered.tiers, tiered.stages).map { tier, stage in
                TierEncoder(control: stage.control, follower: BandwidthFollower(stage, adapting: nil), tier: tier)
            }
        }
        state.withLock {
            $0.tiers = tiered.tiers
            $0.routes = tiered.tiers.map { _ in Route() }
        }
        streamProfile.withLock { $0 = nil }
    }

    /// The outputs of `count` encode tiers (`TieredEncodeStage`'s `outputs`): tier i's frames go to its viewers.
    /// The full tier's output ends the viewers at the end of the run and carries the progress and summary.
    public func tierOutputs(_ count: Int) -> [[any EncodedOutput]] {
        (0..<count).map { i in i == 0 ? [self] : [TierOutput(hub: self, tier: i)] }
    }

    /// A tier with viewers waiting for its key frame to move to it: encoded first (`TieredEncodeStage`'s
    /// `firstTier`), so that they get the new tier's frame of a picture and not also the old tier's.
    public var tierToEncodeFirst: Int? {
        state.withLock { s in s.routes.indices.first { !s.routes[$0].arriving.isEmpty } }
    }

    /// Tier i's viewers want frames: one of them is connected.
    func tierWantsFrames(_ tier: Int) -> Bool {
        let (peers, arriving) = state.withLock { s in
            s.routes.indices.contains(tier) ? (s.routes[tier].peers, s.routes[tier].arriving) : ([], [])
        }
        return peers.contains { $0.isConnected } || arriving.contains { $0.isConnected }
    }

    /// Rebuilds every tier's lists from the viewers (arrival order). A viewer moving down gets nothing more of its
    /// old tier: its link is already over-full, and frames it cannot use would only queue ahead of the new tier's key
    /// frame (measured: the step from 5 to 0.5 Mbit/s froze the picture for up to 1.4 s while the old tier kept
    /// coming). A viewer moving up keeps its tier until the larger one's key frame.
    private static func route(_ s: inout State) {
        for t in s.routes.indices {
            s.routes[t].peers.removeAll(keepingCapacity: true)
            s.routes[t].arriving.removeAll(keepingCapacity: true)
        }
        for id in s.order {
            guard let v = s.viewers[id] else { continue }
            let movingDown = (v.pendingTier ?? v.tier) > v.tier
            if s.routes.indices.contains(v.tier) && !movingDown { s.routes[v.tier].peers.append(v.peer) }
            if let p = v.pendingTier, s.routes.indices.contains(p) { s.routes[p].arriving.append(v.peer) }
        }
    }

    /// Lets the viewers decide whether the camera's rotation is applied to the pixels: not while every viewer
    /// (connected or connecting) negotiated the video-orientation extension (`WebRTCPeer.receivesRotation`: the
    /// browser turns the picture, and the rotation pass is saved), applied as soon as one did not. The encode is
    /// shared, so one viewer without the extension gets everyone upright pixels (with rotation 0 in the
    /// extension); when it leaves, the pictures go unrotated again. A 90° change of decision changes the
    /// encoded size, which starts with a key frame. Call before the camera starts.
    public func steerRotation(_ requests: OutputRequests) {
        rotation.withLock { $0 = (requests, nil) }
        decideRotation()
    }

    private func decideRotation() {
        let peers = state.withLock { $0.peers }
        guard !peers.isEmpty else { return } // nobody to send to: keep the last decision
        let applied = !peers.allSatisfy(\.receivesRotation)
        let requests = rotation.withLock { r -> OutputRequests? in
            guard let current = r, current.applied != applied else { return nil }
            r = (current.requests, applied)
            return current.requests
        }
        requests?.requestRotationApplied(applied)
    }

    /// Why an offer got no viewer; `WHEPEndpoint` turns each into an HTTP status.
    public enum AddError: Error {
        /// The offer cannot be answered (HTTP 400, or 406 for no usable H.264).
        case badOffer(WebRTCError)
        /// `Limits.maxViewers` viewers are connected (HTTP 503).
        case full
        /// `Limits.maxPending` viewers are still connecting (HTTP 503).
        case tooManyPending
        /// The client's address has this many viewers, past `maxPerAddress` or `maxPendingPerAddress` (HTTP 429).
        case tooManyFromAddress(Int)
        /// `closeAll(reason:)` was called: the hub admits nobody (HTTP 503).
        case stopped
        /// A camera's own H.264 is passed through and no SPS has come yet: its profile, which the answer must
        /// match, is unknown (HTTP 503 with `Retry-After: 1`).
        case waitingForStream
        /// The peer could not be made on our side (sockets, DTLS), with the reason (HTTP 500).
        case failed(String)
    }

    /// Whether one more viewer from `address` fits the limits.
    private func admission(_ s: State, from address: String) -> AddError? {
        if s.closed { return .stopped }
        let pending = s.viewers.values.filter { !$0.peer.isConnected }
        let mine = s.viewers.values.filter { $0.address == address }
        if mine.count >= limits.maxPerAddress { return .tooManyFromAddress(mine.count) }
        if mine.filter({ !$0.peer.isConnected }).count >= limits.maxPendingPerAddress { return .tooManyFromAddress(mine.count) }
        if pending.count >= limits.maxPending { return .tooManyPending }
        if s.viewers.count - pending.count >= limits.maxViewers { return .full }
        return nil
    }

    /// Answers a WHEP offer from `address`: a new peer with its own UDP port. Returns its resource id
    /// (unguessable: whoever holds it owns the viewer) and the SDP answer.
    public func add(offer text: String, from address: String) throws(AddError) -> (id: String, answer: String) {
        let offer: WebRTCOffer
        var stream: String?
        if let profile = streamProfile.withLock({ $0 }) {
            guard let p = profile() else { throw .waitingForStream }
            stream = p
        }
        do throws(WebRTCError) { offer = try WebRTCOffer(text, stream: stream) } catch { throw .badOffer(error) }
        if let refused = state.withLock({ admission($0, from: address) }) { throw refused }
        let peer: WebRTCPeer
        do throws(WebRTCError) { peer = try WebRTCPeer(offer: offer, identity: identity, configuration: configuration) } catch {
            throw .failed(error.message)
        }
        let id = peer.id
        let admitted = state.withLock { s -> Result<Int, AddError> in
            if let refused = admission(s, from: address) { return .failure(refused) } // another POST took the slot meanwhile
            s.total += 1
            s.viewers[id] = Viewer(peer: peer, address: address, number: s.total, metrics: ViewerMetrics(number: s.total))
            s.order.append(id)
            s.peers.append(peer)
            let admittedNs = monotonicNanoseconds()
            s.viewers[id]?.tierSinceNs = admittedNs
            s.viewers[id]?.seat.joinedNs = admittedNs
            ViewerHub.route(&s)
            return .success(s.total)
        }
        let number: Int
        switch admitted {
        case .success(let n): number = n
        case .failure(let refused):
            peer.close()
            throw refused
        }
        peer.start(
            WebRTCPeer.Handlers(
                connected: { [weak self] in self?.requestKeyFrame(id) },
                keyFrameRequest: { [weak self] in self?.requestKeyFrame(id) },
                bitrateEstimate: { [weak self] bps in self?.remb(id, bps) },
                closed: { [weak self] reason in self?.ended(id, reason) }))
        joined.increment()
        decideRotation() // before the peer connects: its first key frame already has the pixels it needs
        arrival.withLock { $0 }?()
        viewersGauge.record(viewerCount)
        logger.debug("viewer joined", metadata: ["viewer": "\(number)", "client": "\(address)"])
        return (id, peer.answer)
    }

    /// DELETE: ends the viewer (its socket and thread are gone when this returns). False for an unknown id.
    public func remove(_ id: String) -> Bool {
        guard let peer = state.withLock({ $0.viewers[id]?.peer }) else { return false }
        peer.close(reason: "the viewer sent DELETE")
        ended(id, "the viewer sent DELETE")
        return true
    }

    private func ended(_ id: String, _ reason: String) {
        let gone = state.withLock { s -> Viewer? in
            guard let v = s.viewers.removeValue(forKey: id) else { return nil }
            s.order.removeAll { $0 == id }
            s.left += 1
            s.peers.removeAll { $0.id == id }
            ViewerHub.route(&s)
            s.lastEnded.append((id, reason))
            if s.lastEnded.count > 8 { s.lastEnded.removeFirst() }
            return v
        }
        guard let gone else { return }
        gone.metrics.destroy()
        decideRotation()
        leftCounter.increment()
        viewersGauge.record(viewerCount)
        logger.debug("viewer left", metadata: ["viewer": "\(gone.number)", "reason": "\(reason)"])
        recomputeBitrate()
    }

    /// Ends every viewer with `reason` and admits no more (later offers get `AddError.stopped`). Waits for each
    /// peer's thread; call it when the app stops serving.
    public func closeAll(reason: String) {
        let peers = state.withLock { s -> [WebRTCPeer] in
            s.closed = true
            return s.order.compactMap { s.viewers[$0]?.peer }
        }
        for p in peers { p.close(reason: reason) }
    }

    /// A viewer wants a key frame: its tier's encoder makes one at its next frame, unless one was made within
    /// `keyFrameIntervalNs` (then after that).
    private func requestKeyFrame(_ id: String) {
        state.withLock { s in
            guard let v = s.viewers[id], s.routes.indices.contains(v.tier) else { return }
            s.routes[v.tier].keyFramePending = true
        }
    }

    /// The largest receiver estimate taken (10 Gbit/s): a REMB's 6-bit exponent can say up to 2^81 bit/s.
    static let maxEstimateBps: UInt64 = 10_000_000_000

    private func remb(_ id: String, _ reported: UInt64) {
        let bps = min(reported, ViewerHub.maxEstimateBps)
        let now = monotonicNanoseconds()
        let sender = state.withLock { $0.viewers[id]?.peer.sender }
        let media = sender?.statistics.congestion.sendSideMediaRate
        state.withLock { s in
            guard s.viewers[id] != nil else { return }
            s.viewers[id]?.remb = bps
            s.viewers[id]?.seat.estimate = Int(clamping: bps)
            s.viewers[id]?.seat.mediaRate = media.map { Int(clamping: $0) }
            // The viewer that reported first, then the others: a rise of one viewer's estimate can move another
            // off the tier they share.
            var changed = false
            for other in [id] + s.order.filter({ $0 != id }) {
                guard var v = s.viewers[other] else { continue }
                let others = s.order.compactMap { $0 == other ? nil : s.viewers[$0]?.seat }
                if TierPolicy.choose(&v.seat, others: others, tiers: s.tiers, now: now) {
                    if let p = v.pendingTier { s.routes[p].keyFramePending = true }
                    changed = true
                }
                s.viewers[other] = v
            }
            if changed { ViewerHub.route(&s) }
            // A viewer on (or moving to) a lower tier is on a limited link: no low-latency playout for it.
            for other in s.order { s.viewers[other].map { $0.peer.sender.setLinkLimited(($0.pendingTier ?? $0.tier) > 0) } }
        }
        recomputeBitrate()
    }

    /// Each tier's bitrate: the lowest estimate among the viewers on it or moving to it (the tier's encoder caps it).
    private func recomputeBitrate() {
        let lowest = state.withLock { s -> [Int?] in
            TierPolicy.rates(count: s.routes.count, seats: s.order.compactMap { s.viewers[$0]?.seat })
        }
        let encoders = self.encoders.withLock { $0 }
        for (t, e) in lowest.enumerated() {
            if let e, encoders.indices.contains(t) { encoders[t].follower.update(bitsPerSecond: UInt64(e)) }
        }
    }

    /// Viewers connected or still connecting.
    public var viewerCount: Int { state.withLock { $0.viewers.count } }

    /// Sets each viewer's metrics from its statistics (a scrape calls this first): whep_viewer_rtt_seconds,
    /// whep_viewer_fraction_lost, whep_viewer_remb_bps, and the counters whep_viewer_bytes_sent_total,
    /// whep_viewer_nacks_total, whep_viewer_retransmitted_bytes_total, whep_viewer_key_frame_requests_total.
    public func refreshMetrics() {
        let viewers = state.withLock { s in s.order.compactMap { s.viewers[$0] } }
        for v in viewers { v.metrics.update(v.peer.statistics.rtp, remb: v.remb) }
    }

    /// Calls `action` whenever a viewer is admitted, after it counts as an audience (`hasAudience`): give it
    /// `CaptureSession.wakeAction` so that a camera released while nobody watched starts again. Replaces an
    /// earlier action.
    public func whenViewersArrive(_ action: @escaping @Sendable () -> Void) { arrival.withLock { $0 = action } }

    /// Viewers connected or still connecting: while there are none, a session may release the camera.
    public var hasAudience: Bool { state.withLock { !$0.peers.isEmpty } }

    // EncodedOutput (the encoder's thread)
    /// Nobody connected: the encoder rests (a viewer's connection asks for a key frame anyway).
    public var wantsFrames: Bool { tierWantsFrames(0) }
    /// True: viewers get the slate while the camera is away (their players would otherwise time out).
    public var takesPlaceholders: Bool { true }
    /// Sends one access unit to every connected viewer (from the encoder's thread), first asking the encoder for
    /// a key frame if a viewer wanted one and the last was long enough ago. Never throws.
    public func write(_ frame: EncodedFrame) throws { write(frame, tier: 0) }

    /// Tier `tier`'s access unit to the viewers on it; at a key frame, the viewers moving to the tier join it
    /// first. Asks the tier's encoder for a key frame if a viewer wanted one and the last was long enough ago.
    func write(_ frame: EncodedFrame, tier: Int) {
        let now = monotonicNanoseconds()
        let (peers, askKeyFrame) = state.withLock { s -> ([WebRTCPeer], Bool) in
            guard s.routes.indices.contains(tier) else { return ([], false) }
            var ask = false
            if s.routes[tier].keyFramePending && now - s.routes[tier].lastKeyFrameNs >= ViewerHub.keyFrameIntervalNs {
                s.routes[tier].keyFramePending = false
                s.routes[tier].lastKeyFrameNs = now
                ask = true
            }
            if frame.isKeyFrame {
                s.routes[tier].lastKeyFrameNs = max(s.routes[tier].lastKeyFrameNs, now)
                if !s.routes[tier].arriving.isEmpty {
                    for id in s.order where s.viewers[id]?.pendingTier == tier {
                        s.viewers[id]?.tier = tier
                        s.viewers[id]?.pendingTier = nil
                        s.viewers[id]?.tierSinceNs = now
                        s.viewers[id]?.tierMoves += 1
                    }
                    ViewerHub.route(&s)
                }
            }
            return (s.routes[tier].peers, ask)
        }
        if askKeyFrame {
            let control = encoders.withLock { $0.indices.contains(tier) ? $0[tier].control : nil }
            control?.requestKeyFrame()
        }
        for p in peers { p.send(frame) }
    }
    /// Ends every viewer (the run is over).
    public func end() throws { closeAll(reason: "the server stopped") }
    /// Ends every viewer (the run failed before it started).
    public func discard() { closeAll(reason: "the server stopped") }

    /// Viewers now and in all, for the progress line.
    public var progress: String? {
        let s = state.withLock { ($0.viewers.count, $0.total) }
        return "viewers \(s.0) (\(s.1) in all)"
    }
    /// The `viewers` line: how many came, how many left, and why the last one ended.
    public var report: OutputReport {
        let s = state.withLock { ($0.total, $0.left, $0.lastEnded) }
        return .lines([("viewers", "\(s.0) in all, \(s.1) left" + (s.2.last.map { "; last: \($0.1)" } ?? ""))])
    }

    /// GET /stats: one JSON object per viewer, the refusal counters and the open connections. `detailed` (the
    /// token's holder) adds each viewer's resource and remote address.
    public func statsJSON(detailed: Bool, refused: RefusalCounters, connections: Int) -> String {
        let (peers, tiers, rates) = state.withLock { s in
            let seats = s.order.compactMap { s.viewers[$0]?.seat }
            return (
                s.order.compactMap { id in s.viewers[id].map { (id, $0) } }, s.tiers,
                s.tiers.indices.map { TierPolicy.carriedRate($0, tiers: s.tiers, seats: seats) }
            )
        }
        let items: [Any] = peers.map { (id, v) -> [(String, Any)] in
            let p = v.peer, st = p.statistics
            var item: [(String, Any)] = [("viewer", v.number), ("state", st.state), ("srtp", st.srtpProfile ?? "")]
            item += [
                ("tier", v.tier), ("tierSize", tiers.indices.contains(v.tier) ? "\(tiers[v.tier].size)" : ""), ("pendingTier", v.pendingTier ?? -1),
                ("tierMoves", v.tierMoves),
            ]
            if detailed { item += [("resource", "/whep/\(id)"), ("remote", st.remote ?? ""), ("client", v.address)] }
            item += [
                ("payloadType", Int(p.offer.payloadType)), ("profileLevelId", p.offer.profileLevelID),
                ("videoOrientation", p.receivesRotation), ("captureTime", p.sendsCaptureTime),
                ("playoutDelay", p.playoutDelay?.description ?? ""), ("playoutDelaySent", st.rtp.playoutDelaySent?.description ?? ""),
                ("playoutDelayChanges", st.rtp.playoutDelayChanges), ("congestionSignals", st.rtp.congestion.congestionSignals),
                ("framesSent", st.rtp.framesSent), ("packetsSent", st.rtp.packetsSent), ("bytesSent", st.rtp.bytesSent),
                ("packetsDropped", st.rtp.packetsDroppedBySimulation), ("nacks", st.rtp.nacksReceived),
                ("retransmissions", st.rtp.retransmissions), ("retransmittedBytes", st.rtp.retransmittedBytes),
                ("nacksIgnored", st.rtp.nacksIgnored), ("retransmissionsOverBudget", st.rtp.retransmissionsOverBudget),
                ("nacksBeforeKeyFrame", st.rtp.nacksBeforeKeyFrame),
                ("keyFrameRequests", st.rtp.keyFrameRequests), ("keyFrameRequestsHonoured", st.rtp.keyFrameRequestsHonoured),
                ("receiverReports", st.rtp.receiverReports), ("rttMs", st.rtp.rttMs ?? -1), ("fractionLost", st.rtp.fractionLost ?? -1),
                ("rembBps", v.remb.map { Int(clamping: $0) } ?? -1), ("transportCC", p.usesTransportWideCC),
                ("transportFeedbacks", st.rtp.congestion.transportFeedbacks),
                ("sendSideEstimateBps", st.rtp.congestion.sendSideEstimate.map { Int(clamping: $0) } ?? -1),
                ("delayUsage", st.rtp.congestion.delayUsage ?? ""), ("probes", st.rtp.congestion.probes),
                ("probePackets", st.rtp.congestion.probePackets),
                ("probesRaised", st.rtp.congestion.probesRaised), ("probesLost", st.rtp.congestion.probesLost),
                ("probesCapped", st.rtp.congestion.probesCapped), ("probesOnClearedQueue", st.rtp.congestion.probesOnClearedQueue),
                ("deliveryCaps", st.rtp.congestion.deliveryCaps),
                ("probesRaisedShort", st.rtp.congestion.probesRaisedShort),
                ("trainsRaised", st.rtp.congestion.trainsRaised),
                ("trains", st.rtp.congestion.trainsMeasured), ("lastTrainBps", st.rtp.congestion.lastTrainRate.map { Int(clamping: $0) } ?? -1),
                ("lastProbeBps", st.rtp.congestion.lastProbeResult.map { Int(clamping: $0) } ?? -1),
                ("queueDelayMs", Double(st.rtp.congestion.queueDelayUs) / 1000),
                ("transportLoss", st.rtp.congestion.transportLoss ?? -1),
                ("stunRequests", st.stunRequests),
                ("srtcpErrors", st.srtcpErrors),
                ("dtlsRecordsDropped", st.dtlsRecordsDropped), ("rtcpErrors", st.rtp.rtcpErrors),
                ("keyFramesSkippedBeforeStart", st.framesSkippedBeforeKeyFrame),
                // RTP time ↔ capture time of this viewer's stream, and CLOCK_REALTIME − CLOCK_MONOTONIC now
                // (latency measurements map a frame's RTP timestamp back to its capture time).
                ("rtpTimestampOffset", Int(p.sender.rtpTimestampOffset)), ("firstCaptureNs", st.rtp.firstCaptureNs.map { Int($0) } ?? -1),
                ("realtimeMinusMonotonicNs", Int(realtimeMinusMonotonicNs())),
            ]
            return item
        }
        let s = state.withLock { ($0.total, $0.left) }
        let controls = encoders.withLock { $0.map(\.control) }
        let tierItems: [Any] = tiers.enumerated().map { (i, t) -> [(String, Any)] in
            // The tier's encoder as it last published: which one runs (a hardware encoder, OpenH264 after a fallback),
            // the path its pictures take, and what its watchdog did.
            let e = controls.indices.contains(i) ? controls[i].statistics : nil
            return [
                ("tier", i), ("size", "\(t.size)"), ("minBps", t.minBitrate), ("targetBps", t.targetBitrate), ("maxBps", t.maxBitrate),
                ("viewers", peers.filter { $0.1.tier == i }.count),
                // What the tier's encoder is asked for now (the lowest estimate among its viewers, within its
                // maximum); -1 while none of them has an estimate.
                ("rateBps", rates[i] ?? -1),
                ("encoder", e?.encoder ?? ""), ("encoderInput", e?.inputPath ?? ""), ("copiedFrames", e?.copiedFrames ?? 0),
                ("importedFrames", e?.importedFrames ?? 0), ("watchdog", e?.watchdog ?? ""),
            ]
        }
        return "{\"viewers\": [" + items.map(jsonValue).joined(separator: ", ") + "], \"tiers\": [" + tierItems.map(jsonValue).joined(separator: ", ")
            + "], \"total\": \(s.0), \"left\": \(s.1), "
            + "\"connections\": \(connections), \"refused\": \(jsonValue(refused.json))"
            + (camera.withLock { $0 }.map { ", \"camera\": " + jsonValue($0.jsonMembers) } ?? "") + "}"
    }
}

/// One viewer's metrics (label `viewer`: its number), removed when it leaves.
final class ViewerMetrics: Sendable {
    private let rtt, lost, remb: Gauge
    private let bytes, nacks, retransmitted, keyRequests: Counter
    private let last = Mutex((bytes: 0, nacks: 0, retransmitted: 0, keyRequests: 0))

    init(number: Int) {
        let d = [("viewer", String(number))]
        rtt = Gauge(label: "whep_viewer_rtt_seconds", dimensions: d)
        lost = Gauge(label: "whep_viewer_fraction_lost", dimensions: d)
        remb = Gauge(label: "whep_viewer_remb_bps", dimensions: d)
        bytes = Counter(label: "whep_viewer_bytes_sent_total", dimensions: d)
        nacks = Counter(label: "whep_viewer_nacks_total", dimensions: d)
        retransmitted = Counter(label: "whep_viewer_retransmitted_bytes_total", dimensions: d)
        keyRequests = Counter(label: "whep_viewer_key_frame_requests_total", dimensions: d)
    }

    func update(_ s: RTPSender.Statistics, remb estimate: UInt64?) {
        if let r = s.rttMs { rtt.record(r / 1000) }
        if let f = s.fractionLost { lost.record(f) }
        if let e = estimate { remb.record(Double(e)) }
        let now = (bytes: s.bytesSent, nacks: s.nacksReceived, retransmitted: s.retransmittedBytes, keyRequests: s.keyFrameRequests)
        let before = last.withLock { l in
            defer { l = now }
            return l
        }
        if now.bytes > before.bytes { bytes.increment(by: now.bytes - before.bytes) }
        if now.nacks > before.nacks { nacks.increment(by: now.nacks - before.nacks) }
        if now.retransmitted > before.retransmitted { retransmitted.increment(by: now.retransmitted - before.retransmitted) }
        if now.keyRequests > before.keyRequests { keyRequests.increment(by: now.keyRequests - before.keyRequests) }
    }

    func destroy() {
        for g in [rtt, lost, remb] { g.destroy() }
        for c in [bytes, nacks, retransmitted, keyRequests] { c.destroy() }
    }
}

/// Tier i's encoded frames to the hub's viewers on that tier (`ViewerHub.tierOutputs`). It ends nothing: the
/// full tier's output (the hub) ends the viewers.
final class TierOutput: EncodedOutput {
    let hub: ViewerHub
    let tier: Int
    init(hub: ViewerHub, tier: Int) {
        self.hub = hub
        self.tier = tier
    }
    var wantsFrames: Bool { hub.tierWantsFrames(tier) }
    var takesPlaceholders: Bool { true }
    var hasAudience: Bool { false } // the full tier's output speaks for the audience
    func write(_ frame: EncodedFrame) throws { hub.write(frame, tier: tier) }
    func end() throws {}
    func discard() {}
}
