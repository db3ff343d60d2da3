internal import CWebRTC
#if canImport(Glibc)
    import Glibc
#endif

/// An error of the WebRTC layer: what went wrong in words, and a code to act on (an HTTP status, a retry).
public struct WebRTCError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What a caller does about the error: an invalid offer is the client's fault (HTTP 400), an unsupported codec
    /// is a mismatch (HTTP 406 in WHEP), a local failure is the server's (HTTP 500).
    public enum Code: Sendable, Equatable {
        /// The offer is not one this server can answer (syntax, ICE credentials, fingerprint, transport, setup, mid).
        case invalidOffer
        /// The offer is well formed but has no codec this server sends (H.264 packetization-mode 1, Constrained Baseline).
        case unsupportedCodec
        /// Sockets, DTLS, SRTP or certificates failed on our side.
        case local
        /// A configuration value is out of its range (`WebRTCPeer.Configuration.validate()`); `setting` names it.
        case invalidConfiguration
    }
    /// A sentence for people, saying what was wrong and, for an offer, what to change.
    public var message: String
    /// What kind of failure this is, to switch on.
    public var code: Code
    /// The configuration member refused, for `invalidConfiguration` ("connectTimeoutNs"); the message starts
    /// with it.
    public var setting: String?
    /// An error with a human-readable `message`; a local failure unless `code` says otherwise.
    public init(_ message: String, code: Code = .local, setting: String? = nil) {
        self.message = message
        self.code = code
        self.setting = setting
    }
    /// The message.
    public var description: String { message }
}

/// Our DTLS identity: a DTLS 1.2 server context with a fresh self-signed ECDSA P-256 certificate (OpenSSL),
/// offering SRTP_AEAD_AES_128_GCM and SRTP_AES128_CM_SHA1_80 (use_srtp, RFC 5764).
public final class DTLSIdentity: @unchecked Sendable {
    // @unchecked: the SSL_CTX is only read after creation (OpenSSL contexts are thread-safe for SSL_new).
    let pointer: OpaquePointer
    /// SHA-256 fingerprint of the certificate, "AB:CD:…" (for `a=fingerprint:sha-256`).
    public let fingerprint: String

    /// `profiles`: the SRTP profiles offered in the handshake, in our order of preference.
    public convenience init(profiles: [SRTPProfile] = [.aeadAes128Gcm, .aes128CmSha1_80]) throws(WebRTCError) {
        try self.init(profiles: profiles, client: false)
    }

    /// `client`: a DTLS client context (for tests that play the browser's part).
    convenience init(profiles: [SRTPProfile], client: Bool) throws(WebRTCError) {
        try self.init(profiles: profiles, role: client ? 1 : 0)
    }

    /// An identity for either DTLS role, decided per association: an offerer (a WHIP publisher) puts the
    /// fingerprint in its offer before the answer's `a=setup` says which side it plays.
    public static func eitherRole(profiles: [SRTPProfile] = [.aeadAes128Gcm, .aes128CmSha1_80]) throws(WebRTCError) -> DTLSIdentity {
        try DTLSIdentity(profiles: profiles, role: 2)
    }

    private init(profiles: [SRTPProfile], role: Int32) throws(WebRTCError) {
        guard !profiles.isEmpty else { throw WebRTCError("no SRTP profile to offer") }
        var fp = [CChar](repeating: 0, count: 128), error = [CChar](repeating: 0, count: 256)
        let list = profiles.map { $0 == .aeadAes128Gcm ? "SRTP_AEAD_AES_128_GCM" : "SRTP_AES128_CM_SHA1_80" }.joined(separator: ":")
        guard let p = cw_identity_create(list, role, &fp, &error, error.count) else {
            throw WebRTCError(cString(error))
        }
        pointer = p
        fingerprint = cString(fp)
    }
    deinit { cw_identity_free(pointer) }
}

/// SRTP protection profiles (RFC 5764, RFC 7714) we negotiate.
public enum SRTPProfile: Int32, Sendable {
    /// `SRTP_AES128_CM_HMAC_SHA1_80` (RFC 5764): AES counter mode with an 80-bit HMAC-SHA1 tag; every browser
    /// offers it.
    case aes128CmSha1_80 = 1
    /// `SRTP_AEAD_AES_128_GCM` (RFC 7714): AES-GCM, authenticated encryption with a 16-byte tag; preferred.
    case aeadAes128Gcm = 7
    /// The profile's name as RFC 5764 and RFC 7714 spell it, e.g. `AEAD_AES_128_GCM`.
    public var name: String { self == .aes128CmSha1_80 ? "AES_CM_128_HMAC_SHA1_80" : "AEAD_AES_128_GCM" }
}

/// One DTLS server association. Not thread-safe: one thread feeds it.
final class DTLSAssociation {
    enum State: Equatable { case handshaking, connected, closed, failed(String) }
    private let pointer: OpaquePointer
    private var buffer = [UInt8](repeating: 0, count: 2048)

    /// `client`: the role, for an identity made for either (nil: the identity's own).
    init(identity: DTLSIdentity, peerFingerprint: String, mtu: Int = 1200, client: Bool? = nil) throws(WebRTCError) {
        guard let p = cw_dtls_create(identity.pointer, peerFingerprint, Int32(mtu), client.map { $0 ? 1 : 0 } ?? -1) else {
            throw WebRTCError("cannot create a DTLS association")
        }
        pointer = p
    }
    deinit { cw_dtls_free(pointer) }

    private func state(_ r: Int32) -> State {
        switch r {
        case 1: return .connected
        case 0: return .handshaking
        case -2: return .closed
        default: return .failed(String(cString: cw_dtls_error(pointer)))
        }
    }

    func feed(_ datagram: UnsafeRawBufferPointer) -> State {
        state(cw_dtls_feed(pointer, datagram.baseAddress?.assumingMemoryBound(to: UInt8.self), datagram.count))
    }
    func tick() -> State { state(cw_dtls_tick(pointer)) }
    /// Records dropped so far (malformed; after the handshake also of another epoch, too short, or refused).
    var droppedRecords: Int { Int(cw_dtls_dropped(pointer)) }
    func close() { cw_dtls_close(pointer) }

    /// Hands each datagram DTLS wants sent to `emit`.
    func drain(_ emit: (UnsafeRawBufferPointer) -> Void) {
        while true {
            let n = buffer.withUnsafeMutableBytes {
                Int(cw_dtls_next_datagram(pointer, $0.baseAddress!.assumingMemoryBound(to: UInt8.self), $0.count))
            }
            if n <= 0 { return }
            buffer.withUnsafeBytes { emit(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
        }
    }

    /// The negotiated profile and the SRTP sessions for our sending side and the peer's.
    func srtpSessions() throws(WebRTCError) -> (SRTPProfile, outbound: SRTPSession, inbound: SRTPSession) {
        var local = [UInt8](repeating: 0, count: 32), remote = [UInt8](repeating: 0, count: 32)
        var length: Int32 = 0
        let id = cw_dtls_srtp_keys(pointer, &local, &remote, &length)
        defer {
            for i in 0..<32 {
                local[i] = 0
                remote[i] = 0
            }
        }
        guard let profile = SRTPProfile(rawValue: id) else { throw WebRTCError("no SRTP keys from the DTLS handshake (profile \(id))") }
        let out = try SRTPSession(profile: profile, key: Array(local[0..<Int(length)]), outbound: true)
        let inb = try SRTPSession(profile: profile, key: Array(remote[0..<Int(length)]), outbound: false)
        return (profile, out, inb)
    }
}

/// A libsrtp session for one direction. Not thread-safe: callers lock.
// @unchecked: libsrtp's session is used by one thread at a time: the outbound one only inside
// SRTPTransport's Mutex, the inbound one only by the DTLSSRTPTransport's thread (it lives in its Link).
final class SRTPSession: @unchecked Sendable {
    private let pointer: OpaquePointer
    static let overhead = Int(cw_srtp_overhead())

    init(profile: SRTPProfile, key: [UInt8], outbound: Bool) throws(WebRTCError) {
        guard let p = cw_srtp_create(profile.rawValue, key, Int32(key.count), outbound ? 1 : 0) else {
            throw WebRTCError("libsrtp refused a \(profile.name) session")
        }
        pointer = p
    }
    deinit { cw_srtp_free(pointer) }

    /// Protects `length` bytes at the start of `buffer` in place; returns the new length, nil on failure.
    func protect(_ buffer: UnsafeMutableRawBufferPointer, length: Int, rtcp: Bool) -> Int? {
        var n = Int32(length)
        let p = buffer.baseAddress!.assumingMemoryBound(to: UInt8.self)
        let r = rtcp ? cw_srtp_protect_rtcp(pointer, p, &n, Int32(buffer.count)) : cw_srtp_protect_rtp(pointer, p, &n, Int32(buffer.count))
        return r == 0 ? Int(n) : nil
    }
    /// Unprotects in place; returns the plain length, nil when authentication or replay checks fail.
    func unprotect(_ buffer: UnsafeMutableRawBufferPointer, length: Int, rtcp: Bool) -> Int? {
        var n = Int32(length)
        let p = buffer.baseAddress!.assumingMemoryBound(to: UInt8.self)
        let r = rtcp ? cw_srtp_unprotect_rtcp(pointer, p, &n) : cw_srtp_unprotect_rtp(pointer, p, &n)
        return r == 0 ? Int(n) : nil
    }
}

/// The text a C function wrote into `buffer`, up to its NUL (invalid UTF-8 becomes U+FFFD).
func cString(_ buffer: [CChar]) -> String {
    String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

func randomBytes(_ n: Int) -> [UInt8] {
    var b = [UInt8](repeating: 0, count: n)
    if cw_random(&b, n) != 1 { for i in 0..<n { b[i] = .random(in: 0...255) } }
    return b
}

/// ICE credentials (RFC 8839: ufrag ≥ 4, pwd ≥ 22 characters of ice-char).
func iceToken(_ length: Int) -> String {
    let chars = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    return String(decoding: randomBytes(length).map { chars[Int($0) % chars.count] }, as: UTF8.self)
}

/// A self-signed TLS certificate for HTTPS (ECDSA P-256, made with OpenSSL), for names the server answers to.
public struct SelfSignedCertificate: Sendable {
    /// The certificate in PEM form (`-----BEGIN CERTIFICATE-----`).
    public var certificatePEM: String
    /// The private key in PEM form (PKCS #8). A secret: keep it out of logs and files others can read.
    public var privateKeyPEM: String
    /// SHA-256 of the certificate, "AB:CD:…".
    public var fingerprint: String
    /// Base64 SHA-256 of the public key (SubjectPublicKeyInfo): what Chromium's `--ignore-certificate-errors-spki-list` and HPKP-style pins take.
    public var publicKeySHA256: String

    /// `names`: IP addresses and DNS names for subjectAltName (at most 32, each up to 253 characters).
    public init(names: [String], days: Int = 30) throws(WebRTCError) {
        guard names.count <= 32, names.allSatisfy({ (1...253).contains($0.utf8.count) && !$0.contains(",") }) else {
            throw WebRTCError("a certificate takes at most 32 names of 1...253 characters without commas")
        }
        guard (1...825).contains(days) else { throw WebRTCError("certificate validity \(days) days is not 1...825") }
        var cert = [CChar](repeating: 0, count: 8192), key = [CChar](repeating: 0, count: 4096)
        var spki = [CChar](repeating: 0, count: 64), fp = [CChar](repeating: 0, count: 128), error = [CChar](repeating: 0, count: 256)
        let cNames = names.map { strdup($0) }
        defer { cNames.forEach { free($0) } }
        let ok = cNames.map { UnsafePointer($0) }.withUnsafeBufferPointer { list in
            cw_tls_self_signed(list.baseAddress, Int32(list.count), Int32(days), &cert, cert.count, &key, key.count, &spki, &fp, &error, error.count)
        }
        defer { for i in key.indices { key[i] = 0 } }
        guard ok == 1 else { throw WebRTCError(cString(error)) }
        certificatePEM = cString(cert)
        privateKeyPEM = cString(key)
        fingerprint = cString(fp)
        publicKeySHA256 = cString(spki)
    }
}

/// Hands datagrams from the network to DTLS as a viewer's thread does: to an association still in its
/// handshake and to one whose handshake is done (completed in memory with a client of our own), re-made when
/// one ends. For fuzzing the record checks that run before OpenSSL sees a datagram.
@_spi(Fuzzing) public final class DTLSDatagramHarness {
    private let serverIdentity: DTLSIdentity, clientIdentity: DTLSIdentity
    private var fresh: DTLSAssociation
    private var established: DTLSAssociation
    /// Whether the established association is still connected (a forged datagram must never end it).
    public private(set) var isConnected = true

    public init() throws(WebRTCError) {
        serverIdentity = try DTLSIdentity()
        clientIdentity = try DTLSIdentity(profiles: [.aeadAes128Gcm], client: true)
        fresh = try DTLSAssociation(identity: serverIdentity, peerFingerprint: clientIdentity.fingerprint)
        established = try DTLSDatagramHarness.handshake(serverIdentity, clientIdentity)
    }

    private static func handshake(_ server: DTLSIdentity, _ client: DTLSIdentity) throws(WebRTCError) -> DTLSAssociation {
        let s = try DTLSAssociation(identity: server, peerFingerprint: client.fingerprint)
        let c = try DTLSAssociation(identity: client, peerFingerprint: server.fingerprint)
        var serverState = DTLSAssociation.State.handshaking, clientState = c.tick()
        for _ in 0..<50 where serverState != .connected || clientState != .connected {
            c.drain { serverState = s.feed($0) }
            s.drain { clientState = c.feed($0) }
        }
        guard serverState == .connected else { throw WebRTCError("the in-memory DTLS handshake did not complete: \(serverState)") }
        return s
    }

    public func feed(_ datagram: UnsafeRawBufferPointer) {
        if case .failed = fresh.feed(datagram) { fresh = try! DTLSAssociation(identity: serverIdentity, peerFingerprint: clientIdentity.fingerprint) }
        fresh.drain { _ in }
        let state = established.feed(datagram)
        established.drain { _ in }
        isConnected = state == .connected
        if !isConnected, let again = try? DTLSDatagramHarness.handshake(serverIdentity, clientIdentity) { established = again }
    }
}
