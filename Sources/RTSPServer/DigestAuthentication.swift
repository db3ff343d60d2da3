import Foundation
import SystemIO
import VideoCaptureCommons
import Synchronization

/// HTTP Digest authentication for RTSP (RFC 2617, RFC 7616) with MD5, the algorithm ffmpeg, VLC (live555),
/// GStreamer and go2rtc all speak. A nonce is the issue time, the number of the connection it was issued on and an
/// HMAC-MD5 of them and the client's address with a secret made at start: it cannot be forged, it is good only
/// from the address it was given to (a captured exchange does not replay from elsewhere), and it expires after
/// `nonceLifetimeNs` (then the client is told `stale=true` and retries with a new one, without asking its user
/// again). The challenge offers `qop="auth"`: a client that uses it (ffmpeg) numbers its requests (`nc`), and a
/// number not above the last one seen with that nonce is refused (a replay); such a nonce may be used on any
/// connection from its address. Clients that answer without `qop` (RFC 2069: live555, GStreamer) number nothing,
/// so their answers are accepted only on the connection the nonce was issued on (these clients keep one
/// connection): the same headers replayed on a new connection, even from the same address, are refused. The
/// answer's `uri` must be the request's. Responses are compared in constant time.
public struct DigestAuthenticator: Sendable {
    /// The realm shown to users and mixed into the hash.
    public let realm: String
    /// How long a nonce is accepted after it was issued, in nanoseconds (5 minutes by default).
    public var nonceLifetimeNs: Int64
    /// The one user name accepted.
    public let user: String
    /// MD5(user:realm:password), hex: the password itself is not kept.
    private let ha1: String
    private let secret: [UInt8]
    private let counts: NonceCounts

    /// An authenticator for one user. `realm` names the camera (ASCII without quotes).
    public init(user: String, password: String, realm: String = "RTSP camera", nonceLifetimeNs: Int64 = 300_000_000_000) {
        self.user = user
        self.realm = realm.filter { $0 != "\"" && $0 != "\\" && $0.isASCII }
        self.nonceLifetimeNs = nonceLifetimeNs
        ha1 = MD5.hex(Array("\(user):\(self.realm):\(password)".utf8))
        var g = SystemRandomNumberGenerator()
        secret = (0..<32).map { _ in UInt8.random(in: 0...255, using: &g) }
        counts = NonceCounts()
    }

    /// The outcome of checking a request's `Authorization` header.
    public enum Verdict: Sendable, Equatable {
        /// Valid credentials with a current nonce.
        case authorized
        /// Valid credentials, but the nonce has expired: challenge again with `stale=true`.
        case stale
        /// No `Authorization` header: challenge (not a wrong answer).
        case missing
        /// Wrong credentials, a nonce that is not this client's, a replayed `nc`, an answer without `qop` on
        /// another connection than its nonce's, or a `uri` that is not the request's (the reason is for logs,
        /// never for the client).
        case refused(String)
    }

    /// The `WWW-Authenticate` value for a 401 to `client` (its IP address) on `connection` (a number the server
    /// gives each connection, never reused while this authenticator lives): a fresh nonce bound to both, and
    /// `stale=true` when the client's was expired.
    public func challenge(stale: Bool = false, client: String, connection: UInt64) -> String {
        challenge(stale: stale, client: client, connection: connection, nowNs: monotonicNanoseconds())
    }

    /// The challenge as if it were `nowNs` on the monotonic clock (tests).
    package func challenge(stale: Bool, client: String, connection: UInt64, nowNs: Int64) -> String {
        "Digest realm=\"\(realm)\", nonce=\"\(nonce(issuedNs: nowNs, connection: connection, client: client))\", algorithm=MD5, qop=\"auth\""
            + (stale ? ", stale=true" : "")
    }

    /// 16 hex digits of the issue time, 16 of the connection's number, then the keyed hash of both and the
    /// client's address (64 characters).
    func nonce(issuedNs: Int64, connection: UInt64, client: String) -> String {
        func hex16(_ v: UInt64) -> String {
            let t = String(v, radix: 16)
            return String(repeating: "0", count: max(0, 16 - t.count)) + t
        }
        let stamp = hex16(UInt64(bitPattern: issuedNs)) + hex16(connection)
        return stamp + MD5.hmacHex(key: secret, Array("\(stamp):\(client)".utf8))
    }

    /// Checks `header` (the request's `Authorization` value) for a `method` request to `uri` from `client` on
    /// `connection` (the number given to `challenge` for this connection).
    public func verify(_ header: String?, method: String, uri: String, client: String, connection: UInt64) -> Verdict {
        verify(header, method: method, uri: uri, client: client, connection: connection, nowNs: monotonicNanoseconds())
    }

    /// The verdict as if it were `nowNs` on the monotonic clock (tests).
    package func verify(_ header: String?, method: String, uri: String, client: String, connection: UInt64, nowNs: Int64) -> Verdict {
        guard let header else { return .missing }
        guard header.utf8.count <= 2048 else { return .refused("an Authorization header over 2048 bytes") }
        guard header.lowercased().hasPrefix("digest ") else { return .refused("not Digest authorization") }
        guard let p = DigestAuthenticator.parameters(header.dropFirst(7)) else { return .refused("malformed Digest parameters") }
        guard let username = p["username"], let realm = p["realm"], let nonce = p["nonce"], let answeredURI = p["uri"], let response = p["response"]
        else { return .refused("a Digest parameter is missing") }
        if let a = p["algorithm"], a.uppercased() != "MD5" { return .refused("algorithm \(a.prefix(20)) is not MD5") }
        // The nonce: 16 hex digits of its issue time, 16 of its connection, then the keyed hash of them and the
        // client's address.
        guard nonce.utf8.count == 64, let issuedBits = UInt64(nonce.prefix(16), radix: 16),
            let issuedOn = UInt64(nonce.dropFirst(16).prefix(16), radix: 16)
        else { return .refused("not our nonce") }
        let issuedNs = Int64(bitPattern: issuedBits)
        guard constantTimeEqual(nonce, self.nonce(issuedNs: issuedNs, connection: issuedOn, client: client)) else {
            return .refused("not a nonce given to this address")
        }
        guard DigestAuthenticator.sameResource(answeredURI, uri) else { return .refused("the uri answered for is not the request's") }
        let ha2 = MD5.hex(Array("\(method):\(answeredURI)".utf8))
        let expected: String
        var count: UInt32?
        if let qop = p["qop"] {
            guard qop.lowercased() == "auth", let nc = p["nc"], let cnonce = p["cnonce"] else { return .refused("qop \(qop.prefix(20)) is not auth") }
            guard nc.utf8.count == 8, let n = UInt32(nc, radix: 16), n > 0 else { return .refused("nc is not 8 hex digits") }
            count = n
            expected = MD5.hex(Array("\(ha1):\(nonce):\(nc):\(cnonce):\(qop):\(ha2)".utf8))
        } else {
            // RFC 2069: nothing numbers the requests, so the answer is good only where its nonce was given.
            guard issuedOn == connection else { return .refused("an answer without qop on another connection than its nonce's (a replay)") }
            expected = MD5.hex(Array("\(ha1):\(nonce):\(ha2)".utf8))
        }
        // Every comparison runs whatever the earlier ones gave: the time taken says nothing about which failed.
        let userOK = constantTimeEqual(username, user), realmOK = constantTimeEqual(realm, self.realm)
        let responseOK = constantTimeEqual(response.lowercased(), expected)
        guard userOK && realmOK && responseOK else { return .refused("wrong user name or password") }
        // A nonce from the future is not ours (the clock is monotonic); an old one is stale.
        guard issuedNs >= 0, issuedNs <= nowNs else { return .refused("not our nonce") }
        if nowNs - issuedNs > nonceLifetimeNs { return .stale }
        if let count {
            switch counts.use(nonce: nonce, count: count, issuedNs: issuedNs, nowNs: nowNs, lifetimeNs: nonceLifetimeNs) {
            case .fresh: break
            case .replayed: return .refused("nc \(count) was used before with this nonce (a replay)")
            case .forgotten: return .stale
            }
        }
        return .authorized
    }

    /// Whether the `uri` of a Digest answer names the request's resource: the same text, or the same path
    /// (a client may answer for the absolute URI or for its path).
    static func sameResource(_ answered: String, _ requested: String) -> Bool {
        if answered == requested { return true }
        let a = RTSPRequest(method: "", uri: answered, headers: [], cseq: 0).path
        let b = RTSPRequest(method: "", uri: requested, headers: [], cseq: 0).path
        return a != nil && a == b
    }

    /// `name="value", name=value, …` → a dictionary (names lower-cased); nil when malformed or repeated.
    static func parameters(_ s: Substring) -> [String: String]? {
        var out: [String: String] = [:]
        var rest = s.utf8[...]
        func skipSpaces() { while let c = rest.first, c == 0x20 || c == 0x09 || c == 0x2c { rest = rest.dropFirst() } }
        skipSpaces()
        while !rest.isEmpty {
            guard out.count < 16, let eq = rest.firstIndex(of: 0x3d) else { return nil }
            let name = String(decoding: rest[..<eq], as: UTF8.self).trimmingCharacters(in: .init(charactersIn: " \t")).lowercased()
            guard !name.isEmpty, name.utf8.count <= 32 else { return nil }
            rest = rest[rest.index(after: eq)...]
            var value: String
            if rest.first == 0x22 { // quoted string (a backslash escapes the next character)
                rest = rest.dropFirst()
                var bytes: [UInt8] = []
                var closed = false
                while let c = rest.first {
                    rest = rest.dropFirst()
                    if c == 0x5c, let next = rest.first {
                        bytes.append(next)
                        rest = rest.dropFirst()
                    } else if c == 0x22 {
                        closed = true
                        break
                    } else {
                        bytes.append(c)
                    }
                }
                guard closed else { return nil }
                value = String(decoding: bytes, as: UTF8.self)
            } else {
                let end = rest.firstIndex(of: 0x2c) ?? rest.endIndex
                value = String(decoding: rest[..<end], as: UTF8.self).trimmingCharacters(in: .init(charactersIn: " \t"))
                rest = rest[end...]
            }
            guard out[name] == nil else { return nil }
            out[name] = value
            skipSpaces()
        }
        return out
    }
}

/// Equal strings, compared in time that depends only on their lengths.
func constantTimeEqual(_ a: String, _ b: String) -> Bool {
    let x = Array(a.utf8), y = Array(b.utf8)
    var diff = x.count ^ y.count
    for i in 0..<max(x.count, y.count) { diff |= Int((i < x.count ? x[i] : 0) ^ (i < y.count ? y[i] : 0)) }
    return diff == 0
}

/// MD5 (RFC 1321), for Digest authentication only (it is what RTSP clients speak; not for anything that needs
/// a secure hash).
enum MD5 {
    private static let s: [UInt32] = [
        7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20,
        4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21,
    ]
    private static let k: [UInt32] = (0..<64).map { i in UInt32(truncatingIfNeeded: Int64(abs(sin(Double(i + 1))) * 4_294_967_296.0)) }

    /// The 16-byte digest of `message`.
    static func digest(_ message: [UInt8]) -> [UInt8] {
        var m = message
        let bitLength = UInt64(message.count) &* 8
        m.append(0x80)
        while m.count % 64 != 56 { m.append(0) }
        for i in 0..<8 { m.append(UInt8(truncatingIfNeeded: bitLength >> (8 * UInt64(i)))) }
        var a0: UInt32 = 0x6745_2301, b0: UInt32 = 0xefcd_ab89, c0: UInt32 = 0x98ba_dcfe, d0: UInt32 = 0x1032_5476
        var w = [UInt32](repeating: 0, count: 16)
        for chunk in stride(from: 0, to: m.count, by: 64) {
            for i in 0..<16 {
                let o = chunk + 4 * i
                w[i] = UInt32(m[o]) | UInt32(m[o + 1]) << 8 | UInt32(m[o + 2]) << 16 | UInt32(m[o + 3]) << 24
            }
            var a = a0, b = b0, c = c0, d = d0
            for i in 0..<64 {
                var f: UInt32, g: Int
                switch i {
                case 0..<16:
                    f = (b & c) | (~b & d)
                    g = i
                case 16..<32:
                    f = (d & b) | (~d & c)
                    g = (5 * i + 1) % 16
                case 32..<48:
                    f = b ^ c ^ d
                    g = (3 * i + 5) % 16
                default:
                    f = c ^ (b | ~d)
                    g = (7 * i) % 16
                }
                f = f &+ a &+ k[i] &+ w[g]
                a = d
                d = c
                c = b
                b = b &+ (f << s[i] | f >> (32 - s[i]))
            }
            a0 = a0 &+ a
            b0 = b0 &+ b
            c0 = c0 &+ c
            d0 = d0 &+ d
        }
        return [a0, b0, c0, d0].flatMap { v in (0..<4).map { UInt8(truncatingIfNeeded: v >> (8 * UInt32($0))) } }
    }

    /// HMAC-MD5 (RFC 2104) of `message` with `key` (at most 64 bytes), as 32 lower-case hex digits.
    static func hmacHex(key: [UInt8], _ message: [UInt8]) -> String {
        var k = key.count > 64 ? digest(key) : key
        k += [UInt8](repeating: 0, count: 64 - k.count)
        let inner = digest(k.map { $0 ^ 0x36 } + message)
        return hex(bytes: digest(k.map { $0 ^ 0x5c } + inner))
    }

    /// The digest as 32 lower-case hex digits.
    static func hex(_ message: [UInt8]) -> String { hex(bytes: digest(message)) }

    /// 16 bytes as 32 lower-case hex digits.
    static func hex(bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(32)
        for b in bytes {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 0xf)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// The highest `nc` used with each nonce (RFC 7616 3.4: a count not above it is a replay). Bounded: past
/// `capacity` nonces the oldest-issued are forgotten, and a forgotten nonce issued before the newest one
/// forgotten is answered stale (the client retries with a fresh nonce) rather than trusted again.
final class NonceCounts: Sendable {
    enum Use { case fresh, replayed, forgotten }
    private struct State {
        var highest: [String: (count: UInt32, issuedNs: Int64)] = [:]
        var forgottenBeforeNs: Int64 = .min
    }
    private let state = Mutex(State())
    let capacity: Int
    init(capacity: Int = 4096) { self.capacity = capacity }

    func use(nonce: String, count: UInt32, issuedNs: Int64, nowNs: Int64, lifetimeNs: Int64) -> Use {
        state.withLock { s in
            if let known = s.highest[nonce] {
                guard count > known.count else { return .replayed }
                s.highest[nonce] = (count, issuedNs)
                return .fresh
            }
            if issuedNs <= s.forgottenBeforeNs { return .forgotten }
            if s.highest.count >= capacity {
                s.highest = s.highest.filter { nowNs - $0.value.issuedNs <= lifetimeNs } // expired ones first
                while s.highest.count >= capacity, let oldest = s.highest.min(by: { $0.value.issuedNs < $1.value.issuedNs }) {
                    s.highest[oldest.key] = nil
                    s.forgottenBeforeNs = max(s.forgottenBeforeNs, oldest.value.issuedNs)
                }
                if issuedNs <= s.forgottenBeforeNs { return .forgotten }
            }
            s.highest[nonce] = (count, issuedNs)
            return .fresh
        }
    }
}
