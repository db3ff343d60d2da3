public import Foundation
import RTP
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
public import H264
public import CapturePipeline
public import WebRTC
public import Logging
import Synchronization
import SystemIO
import VideoCapture

/// Why publishing failed, in words that name the server's answer or the local cause.
public struct WHIPError: Error, Sendable, CustomStringConvertible {
    /// What went wrong.
    public var message: String
    /// The HTTP status, when the server answered with an error.
    public var status: Int?
    /// An error with its message and, if any, the HTTP status.
    public init(_ message: String, status: Int? = nil) {
        self.message = message
        self.status = status
    }
    /// The message.
    public var description: String { message }
}

/// The HTTP side of WHIP (RFC 9725): POST an SDP offer to the endpoint, get `201 Created` with the answer and
/// the session's resource URL (`Location`), DELETE the resource to end it. A bearer token, if given, goes in
/// `Authorization` on both. Synchronous (each call waits for the server, at most `timeout` seconds).
public struct WHIPClient: Sendable {
    /// The WHIP endpoint (http or https).
    public var endpoint: URL
    /// The bearer token, if the server wants one.
    public var token: String?
    /// Seconds a request may take.
    public var timeout: Double = 10

    /// A client for `endpoint`; throws for a URL that is not http(s) with a host.
    public init(endpoint: String, token: String?) throws(WHIPError) {
        guard endpoint.utf8.count <= 2048, let url = URL(string: endpoint), ["http", "https"].contains(url.scheme?.lowercased() ?? ""),
            url.host?.isEmpty == false
        else {
            throw WHIPError("the WHIP endpoint must be an http:// or https:// URL with a host, got \"\(endpoint.prefix(100))\"")
        }
        self.endpoint = url
        self.token = token
    }

    /// POSTs `offer`; returns the resource URL (from `Location`, resolved against the endpoint) and the answer.
    /// Throws with the status and the start of the body for anything but 201 with an SDP body and a Location.
    public func publish(offer: String) throws(WHIPError) -> (resource: URL, answer: String) {
        let r = try send("POST", endpoint, body: Data(offer.utf8), contentType: "application/sdp")
        guard r.status == 201 else {
            throw WHIPError(
                "the WHIP server answered \(r.status)\(reason(r.status)) to the offer: \(String(decoding: r.body.prefix(300), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))",
                status: r.status)
        }
        guard let location = r.headers["location"], let resource = URL(string: location, relativeTo: endpoint)?.absoluteURL else {
            throw WHIPError("the WHIP server answered 201 without a Location header (RFC 9725 §4.2 requires one)", status: 201)
        }
        guard r.body.count <= 64 * 1024, let answer = String(data: r.body, encoding: .utf8), answer.hasPrefix("v=0") else {
            throw WHIPError("the WHIP server's 201 carries no SDP answer (\(r.body.count) bytes)", status: 201)
        }
        return (resource, answer)
    }

    /// DELETEs the session's resource (the server frees the publisher). Throws with the status for anything but 2xx.
    public func delete(_ resource: URL) throws(WHIPError) {
        let r = try send("DELETE", resource, body: nil, contentType: nil)
        guard (200...299).contains(r.status) else {
            throw WHIPError("DELETE \(resource.path) answered \(r.status)\(reason(r.status))", status: r.status)
        }
    }

    private func reason(_ status: Int) -> String {
        switch status {
        case 401, 403: " (the token is missing or wrong: --token, --token-file or CAMCAP_WHIP_TOKEN)"
        case 404: " (no such endpoint: check the URL)"
        case 406, 488: " (the server takes no H.264 Constrained Baseline)"
        case 503: " (the server is full or busy)"
        default: ""
        }
    }

    private func send(_ method: String, _ url: URL, body: Data?, contentType: String?) throws(WHIPError) -> (
        status: Int, headers: [String: String], body: Data
    ) {
        var request = URLRequest(url: url, timeoutInterval: timeout)
        request.httpMethod = method
        request.httpBody = body
        if let contentType { request.setValue(contentType, forHTTPHeaderField: "Content-Type") }
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        let result = Mutex<(Data?, URLResponse?, Error?)?>(nil)
        let done = DispatchSemaphore(value: 0)
        let task = URLSession.shared.dataTask(with: request) { data, response, error in
            result.withLock { $0 = (data, response, error) }
            done.signal()
        }
        task.resume()
        if done.wait(timeout: .now() + timeout + 1) == .timedOut {
            task.cancel()
            throw WHIPError("\(method) \(url.absoluteString.prefix(200)): no answer within \(Int(timeout)) s")
        }
        let (data, response, error) = result.withLock { $0 } ?? (nil, nil, nil)
        if let error { throw WHIPError("\(method) \(url.absoluteString.prefix(200)) failed: \(error.localizedDescription)") }
        guard let http = response as? HTTPURLResponse else { throw WHIPError("\(method) \(url.absoluteString.prefix(200)): not an HTTP answer") }
        var headers: [String: String] = [:]
        for (k, v) in http.allHeaderFields { if let k = k as? String, let v = v as? String { headers[k.lowercased()] = v } }
        return (http.statusCode, headers, data ?? Data())
    }
}

/// Publishes the encode to a WHIP server (RFC 9725): an `EncodedOutput` that sends every access unit over
/// WebRTC to the server, asks the encoder for a key frame on connection and on the server's PLI/FIR, follows
/// its REMB with the bitrate, and, when the connection ends (the server went away, consent expired), publishes
/// again with backoff (1, 2, 4 … 30 s). `end()` closes the connection and DELETEs the resource.
public final class WHIPOutput: EncodedOutput, Sendable {
    /// How the output publishes.
    public struct Configuration: Sendable {
        /// The publisher's ICE, DTLS and RTP settings.
        public var publisher = WebRTCPublisher.Configuration()
        /// The longest wait between two attempts to publish again (seconds).
        public var maxBackoff: Double = 30
        /// The defaults.
        public init() {}
    }

    private let client: WHIPClient
    private let configuration: Configuration
    private let identity: DTLSIdentity
    private let logger: Logger
    private struct State {
        var publisher: WebRTCPublisher?
        var resource: URL?
        var connections = 0, attempts = 0
        var lastEnd: String?
        var ended = false
        var follower: BandwidthFollower?
        var control: EncoderControl?
        var rotation: OutputRequests?
        var reconnector: WorkerThread?
        var deleted: String?
    }
    private let state = Mutex(State())
    private let reconnecting = Atomic<Bool>(false)

    /// An output for `client`'s endpoint; nothing is sent until `connect()`.
    public init(
        client: WHIPClient, configuration: Configuration = Configuration(),
        logger: Logger = Logger(label: "swift-video-capture.whip", factory: { _ in SwiftLogNoOpLogHandler() })
    ) throws(WebRTCError) {
        self.client = client
        self.configuration = configuration
        self.logger = logger
        identity = try DTLSIdentity.eitherRole()
    }

    /// Key-frame requests and the server's REMB go to `encode`; with `rotation`, the camera's rotation stays
    /// metadata while the server accepts the video-orientation extension. Call before `connect()`.
    public func connect(_ encode: EncodeStage, rotation: OutputRequests? = nil) {
        let follower = BandwidthFollower(encode, adapting: nil)
        state.withLock {
            $0.follower = follower
            $0.control = encode.control
            $0.rotation = rotation
        }
    }

    /// Publishes once: POSTs the offer, takes the answer and starts ICE and DTLS (media follows once they are
    /// up). Throws `WHIPError` when the server refuses or cannot be reached; call it before the camera starts so
    /// a bad URL or token fails at once.
    public func connect() throws(WHIPError) {
        let c = configuration.publisher
        let host = client.endpoint.host
        let publisher: WebRTCPublisher
        do throws(WebRTCError) { publisher = try WebRTCPublisher(identity: identity, configuration: c, server: host) } catch {
            throw WHIPError("cannot make the WebRTC publisher: \(error)")
        }
        state.withLock { $0.attempts += 1 }
        let (resource, answer) = try client.publish(offer: publisher.offer)
        do throws(WebRTCError) {
            try publisher.accept(answer: answer)
            let (control, follower, rotation) = state.withLock { ($0.control, $0.follower, $0.rotation) }
            rotation?.requestRotationApplied(!publisher.receivesRotation)
            try publisher.start(
                WebRTCPublisher.Handlers(
                    connected: { [weak self] in
                        control?.requestKeyFrame()
                        self?.logger.info("publishing", metadata: ["resource": "\(resource.absoluteString)"])
                    },
                    keyFrameRequest: { control?.requestKeyFrame() },
                    bitrateEstimate: { follower?.update(bitsPerSecond: $0) },
                    closed: { [weak self] reason in self?.closed(publisher, reason) }))
        } catch {
            publisher.close()
            try? client.delete(resource)
            throw WHIPError("the WHIP server's answer cannot be used: \(error)")
        }
        let stale = state.withLock { s -> WebRTCPublisher? in
            defer {
                s.publisher = publisher
                s.resource = resource
                s.connections += 1
            }
            return s.publisher
        }
        stale?.close()
    }

    /// The connection ended by itself: publish again, with backoff, unless the output has ended.
    private func closed(_ publisher: WebRTCPublisher, _ reason: String) {
        let current = state.withLock { s -> Bool in
            guard s.publisher === publisher, !s.ended else { return false }
            s.lastEnd = reason
            return true
        }
        guard current, !reconnecting.exchange(true, ordering: .acquiringAndReleasing) else { return }
        logger.warning("the WHIP connection ended; publishing again", metadata: ["reason": "\(reason)"])
        let old = state.withLock { $0.resource }
        let thread = WorkerThread(name: "whip-reconnect") { [self] stop in
            if let old { try? client.delete(old) } // the server may still hold it
            var waitNs: Int64 = 1_000_000_000
            while !stop.isSet && !state.withLock({ $0.ended }) {
                do throws(WHIPError) {
                    try connect()
                    break
                } catch {
                    state.withLock { $0.lastEnd = "\(error)" }
                    logger.warning("publishing again failed", metadata: ["error": "\(error)", "retry in": "\(waitNs / 1_000_000_000) s"])
                }
                let until = monotonicNanoseconds() + waitNs
                while monotonicNanoseconds() < until && !stop.isSet { Sleep.for(nanoseconds: 100_000_000) }
                waitNs = min(Int64(configuration.maxBackoff * 1e9), waitNs * 2)
            }
            reconnecting.store(false, ordering: .releasing)
        }
        state.withLock { $0.reconnector = thread }
    }

    /// The current connection's publisher, if any.
    public var publisher: WebRTCPublisher? { state.withLock { $0.publisher } }

    /// The current session's resource URL (what `end()` DELETEs).
    public var resource: URL? { state.withLock { $0.resource } }

    // EncodedOutput

    /// True while connected (frames are encoded only then; the first after a pause is a key frame).
    public var wantsFrames: Bool { state.withLock { $0.publisher }?.isConnected ?? false }
    /// Always: the camera keeps running while the publisher reconnects.
    public var hasAudience: Bool { true }
    /// `write` may run on the encoder's thread.
    public var acceptsWritesFromEncoderThread: Bool { true }

    /// Sends one access unit to the server.
    public func write(_ frame: EncodedFrame) throws { state.withLock { $0.publisher }?.send(frame) }

    /// DELETEs the resource and ends the connection (RTCP BYE, DTLS close_notify). Never throws: how the DELETE
    /// went is in the summary.
    public func end() throws {
        let (publisher, resource, reconnector) = state.withLock { s -> (WebRTCPublisher?, URL?, WorkerThread?) in
            s.ended = true
            return (s.publisher, s.resource, s.reconnector)
        }
        reconnector?.stop()
        // DELETE first (RFC 9725 §4.3: the server tears the session down), then BYE and close_notify; a server that
        // already dropped the session (404) or cannot be reached does not fail the run: the summary says so.
        if let resource {
            do throws(WHIPError) {
                try client.delete(resource)
                state.withLock { $0.deleted = "DELETE \(resource.path): done" }
            } catch {
                state.withLock { $0.deleted = error.status == 404 ? "DELETE \(resource.path): already gone (404)" : "\(error)" }
            }
        }
        publisher?.close(reason: "the publisher stopped")
    }

    /// The same as `end()`, errors ignored.
    public func discard() { try? end() }

    /// "whip connected, rtt …" (or "whip reconnecting …") for the progress line.
    public var progress: String? {
        if reconnecting.load(ordering: .acquiring) { return "whip reconnecting (\(state.withLock { $0.attempts }) attempts in all)" }
        guard let p = state.withLock({ $0.publisher }) else { return "whip: not connected" }
        let s = p.statistics
        return "whip \(s.state)" + (s.rtp?.rttMs.map { ", rtt \(Int($0)) ms" } ?? "")
    }

    /// The resource, the connections made, and what the server asked for.
    public var summary: [(String, String)] {
        let s = state.withLock { ($0.resource, $0.connections, $0.attempts, $0.lastEnd, $0.publisher?.statistics, $0.deleted) }
        var line = "\(s.1) connection\(s.1 == 1 ? "" : "s") (\(s.2) attempt\(s.2 == 1 ? "" : "s"))"
        if let r = s.0 { line += ", resource \(r.absoluteString)" }
        if let st = s.4?.rtp {
            line += "; PLI/FIR \(st.keyFrameRequests), NACKs \(st.nacksReceived), retransmissions \(st.retransmissions)"
            if let e = st.rembBitrate { line += ", REMB \(e / 1000) kbps" }
        }
        if let e = s.3 { line += "; last end: \(e)" }
        if let d = s.5 { line += "; \(d)" }
        return [("whip", line)]
    }
}
