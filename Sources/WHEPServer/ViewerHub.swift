import Foundation
import Synchronization
import Metrics
public import Logging
import VideoCapture
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
        var lastKeyFrameNs: Int64 = .min / 2
        var lastEnded: [(String, String)] = []
        /// The connected-or-connecting peers in arrival order, rebuilt on add/remove (the encoder's thread only
        /// retains it: nothing allocated per frame).
        var peers: [WebRTCPeer] = []
    }
    private let state = Mutex(State())
    private let keyFramePending = Atomic<Bool>(false)
    private let identity: DTLSIdentity
    private let configuration: WebRTCPeer.Configuration
    /// The encoder the viewers' feedback goes to (set by `connect`, before the camera starts).
    private let encoder = Mutex<(control: EncoderControl, follower: BandwidthFollower)?>(nil)
    /// Called when a viewer is admitted (a released camera starts again: `CaptureSession.wakeAction`).
    private let arrival = Mutex<(@Sendable () -> Void)?>(nil)
    /// Where the rotation decision goes (`steerRotation(_:)`), and the last one made.
    private let rotation = Mutex<(requests: OutputRequests, applied: Bool?)?>(nil)
    /// The shortest time between two key frames requested for viewers (300 ms, in nanoseconds): requests from
    /// several viewers within it are merged.
    public static let keyFrameIntervalNs: Int64 = 300_000_000
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
        encoder.withLock { $0 = (encode.control, follower) }
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
        do throws(WebRTCError) { offer = try WebRTCOffer(text) } catch { throw .badOffer(error) }
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
                connected: { [weak self] in self?.requestKeyFrame() },
                keyFrameRequest: { [weak self] in self?.requestKeyFrame() },
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

    private func requestKeyFrame() { keyFramePending.store(true, ordering: .releasing) }

    private func remb(_ id: String, _ bps: UInt64) {
        state.withLock { $0.viewers[id]?.remb = bps }
        recomputeBitrate()
    }
    private func recomputeBitrate() {
        let lowest = state.withLock { s in s.viewers.values.compactMap(\.remb).min() }
        guard let lowest else { return }
        encoder.withLock { $0?.follower }?.update(bitsPerSecond: lowest)
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
    public var wantsFrames: Bool {
        let peers = state.withLock { $0.peers }
        return peers.contains { $0.isConnected }
    }
    /// Sends one access unit to every connected viewer (from the encoder's thread), first asking the encoder for
    /// a key frame if a viewer wanted one and the last was long enough ago. Never throws.
    public func write(_ frame: EncodedFrame) throws {
        let now = monotonicNanoseconds()
        if keyFramePending.load(ordering: .acquiring) {
            let due = state.withLock { s -> Bool in
                guard now - s.lastKeyFrameNs >= ViewerHub.keyFrameIntervalNs else { return false }
                s.lastKeyFrameNs = now
                return true
            }
            if due {
                keyFramePending.store(false, ordering: .releasing)
                encoder.withLock { $0?.control }?.requestKeyFrame()
            }
        }
        if frame.isKeyFrame { state.withLock { $0.lastKeyFrameNs = max($0.lastKeyFrameNs, now) } }
        let peers = state.withLock { $0.peers }
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
    public var summary: [(String, String)] {
        let s = state.withLock { ($0.total, $0.left, $0.lastEnded) }
        return [("viewers", "\(s.0) in all, \(s.1) left" + (s.2.last.map { "; last: \($0.1)" } ?? ""))]
    }

    /// GET /stats: one JSON object per viewer, the refusal counters and the open connections. `detailed` (the
    /// token's holder) adds each viewer's resource and remote address.
    public func statsJSON(detailed: Bool, refused: RefusalCounters, connections: Int) -> String {
        let peers = state.withLock { s in s.order.compactMap { id in s.viewers[id].map { (id, $0) } } }
        let items: [Any] = peers.map { (id, v) -> [(String, Any)] in
            let p = v.peer, st = p.statistics
            var item: [(String, Any)] = [("viewer", v.number), ("state", st.state), ("srtp", st.srtpProfile ?? "")]
            if detailed { item += [("resource", "/whep/\(id)"), ("remote", st.remote ?? ""), ("client", v.address)] }
            item += [
                ("payloadType", Int(p.offer.payloadType)), ("profileLevelId", p.offer.profileLevelID),
                ("videoOrientation", p.receivesRotation), ("captureTime", p.sendsCaptureTime),
                ("playoutDelay", p.playoutDelay?.description ?? ""),
                ("framesSent", st.rtp.framesSent), ("packetsSent", st.rtp.packetsSent), ("bytesSent", st.rtp.bytesSent),
                ("packetsDropped", st.rtp.packetsDroppedBySimulation), ("nacks", st.rtp.nacksReceived),
                ("retransmissions", st.rtp.retransmissions), ("retransmittedBytes", st.rtp.retransmittedBytes),
                ("nacksIgnored", st.rtp.nacksIgnored), ("retransmissionsOverBudget", st.rtp.retransmissionsOverBudget),
                ("keyFrameRequests", st.rtp.keyFrameRequests), ("keyFrameRequestsHonoured", st.rtp.keyFrameRequestsHonoured),
                ("receiverReports", st.rtp.receiverReports), ("rttMs", st.rtp.rttMs ?? -1), ("fractionLost", st.rtp.fractionLost ?? -1),
                ("rembBps", v.remb.map { Int(clamping: $0) } ?? -1), ("transportCC", p.usesTransportWideCC),
                ("transportFeedbacks", st.rtp.transportFeedbacks), ("sendSideEstimateBps", st.rtp.sendSideEstimate.map { Int(clamping: $0) } ?? -1),
                ("delayUsage", st.rtp.delayUsage ?? ""), ("transportLoss", st.rtp.transportLoss ?? -1), ("stunRequests", st.stunRequests),
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
        return "{\"viewers\": [" + items.map(jsonValue).joined(separator: ", ") + "], \"total\": \(s.0), \"left\": \(s.1), "
            + "\"connections\": \(connections), \"refused\": \(jsonValue(refused.json))}"
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
