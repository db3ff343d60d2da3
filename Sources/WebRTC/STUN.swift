import SystemIO
internal import CWebRTC

/// The part of STUN (RFC 5389) ICE needs here: an ICE-lite agent (RFC 8445 §2.5, `serve`) answers Binding
/// requests that carry its short-term credentials (USERNAME "ourUfrag:theirUfrag", MESSAGE-INTEGRITY keyed with
/// our ice-pwd) with a success response holding XOR-MAPPED-ADDRESS, MESSAGE-INTEGRITY and FINGERPRINT; a
/// controlling agent (a WHIP publisher) also sends checks (`bindingRequest`) and reads their responses.
public enum STUN {
    /// The fixed value in every STUN header (RFC 5389 §6).
    public static let magicCookie: UInt32 = 0x2112_A442

    /// A Binding request as received (only what ICE-lite looks at).
    public struct BindingRequest: Sendable, Equatable {
        /// The 12-byte transaction ID, echoed in the response.
        public var transactionID: [UInt8]
        /// The USERNAME attribute: "ourUfrag:theirUfrag".
        public var username: String
        /// USE-CANDIDATE: the controlling agent nominates this pair.
        public var useCandidate: Bool
        /// ICE-CONTROLLING was present (a browser talking to an ICE-lite agent always controls).
        public var iceControlling: Bool
        /// The PRIORITY attribute, if present.
        public var priority: UInt32?
    }

    /// What `parseRequest(_:localUfrag:localPassword:)` made of a datagram.
    public enum Outcome: Sendable, Equatable {
        /// A valid, authenticated Binding request.
        case request(BindingRequest)
        /// Not a Binding request for us (a response, an indication, a malformed or unauthenticated message):
        /// the reason, for counters and logs. Never an answer.
        case ignored(String)
    }

    /// RFC 7983: the first byte of a STUN message is 0...3.
    public static func looksLikeSTUN(_ p: UnsafeRawBufferPointer) -> Bool {
        p.count >= 20 && p[0] < 4 && p.bigEndianUInt32(at: 4) == magicCookie
    }

    /// Parses and authenticates a Binding request against our `ufrag`/`pwd`. Every length is range-checked.
    public static func parseRequest(_ p: UnsafeRawBufferPointer, localUfrag: String, localPassword: String) -> Outcome {
        guard let message = Message(p) else { return .ignored("not STUN") }
        guard message.type == 0x0001 else { return .ignored("STUN message type 0x\(String(message.type, radix: 16)) is not a Binding request") }
        var username: String?, useCandidate = false, controlling = false, priority: UInt32?
        let walked = message.walk { a in
            switch a.type {
            case 0x0006: username = String(decoding: UnsafeRawBufferPointer(rebasing: p[a.value]), as: UTF8.self)
            case 0x0025: useCandidate = true
            case 0x802A: controlling = true
            case 0x0024: if a.length == 4 { priority = p.bigEndianUInt32(at: a.value.lowerBound) }
            default: break
            }
        }
        guard case .wellFormed(let integrityAt) = walked else { return .ignored(walked.reason) }
        guard let username, let integrityAt else { return .ignored("Binding request without USERNAME and MESSAGE-INTEGRITY") }
        guard username.hasPrefix(localUfrag + ":") else { return .ignored("Binding request for another ufrag") }
        guard integrityMatches(p, at: integrityAt, password: localPassword) else {
            return .ignored("STUN MESSAGE-INTEGRITY does not match our ice-pwd")
        }
        return .request(
            BindingRequest(
                transactionID: Array(p[8..<20]), username: username, useCandidate: useCandidate,
                iceControlling: controlling, priority: priority))
    }

    /// A Binding success response to `request` from `address` (IPv4 4 bytes or IPv6 16 bytes) and `port`,
    /// authenticated with our ice-pwd and fingerprinted.
    public static func successResponse(to request: BindingRequest, address: [UInt8], port: UInt16, localPassword: String) -> [UInt8] {
        var m: [UInt8] = [0x01, 0x01, 0, 0, 0x21, 0x12, 0xA4, 0x42] + request.transactionID
        // XOR-MAPPED-ADDRESS
        let family: UInt8 = address.count == 16 ? 2 : 1
        var xaddr: [UInt8] = [0, family, UInt8((port ^ 0x2112) >> 8), UInt8((port ^ 0x2112) & 0xff)]
        let mask: [UInt8] = [0x21, 0x12, 0xA4, 0x42] + request.transactionID
        for (i, b) in address.enumerated() { xaddr.append(b ^ mask[i]) }
        append(&m, 0x0020, xaddr)
        sign(&m, password: localPassword)
        return m
    }

    // MARK: The controlling side (a WHIP publisher's checks)

    /// A Binding request of a controlling ICE agent (RFC 8445 §7.1.1) to a peer with credentials
    /// `remoteUfrag`/`remotePassword`: USERNAME "remoteUfrag:localUfrag", PRIORITY, ICE-CONTROLLING with our
    /// tie-breaker, USE-CANDIDATE when `nominate` (aggressive nomination), MESSAGE-INTEGRITY keyed with the
    /// remote ice-pwd, FINGERPRINT.
    public static func bindingRequest(
        transactionID: [UInt8], localUfrag: String, remoteUfrag: String, remotePassword: String, priority: UInt32, tieBreaker: UInt64,
        nominate: Bool
    ) -> [UInt8] {
        var m: [UInt8] = [0x00, 0x01, 0, 0, 0x21, 0x12, 0xA4, 0x42] + transactionID.prefix(12)
        while m.count < 20 { m.append(0) }
        append(&m, 0x0006, Array("\(remoteUfrag):\(localUfrag)".utf8))
        append(&m, 0x0024, [UInt8(priority >> 24), UInt8((priority >> 16) & 0xff), UInt8((priority >> 8) & 0xff), UInt8(priority & 0xff)])
        append(&m, 0x802A, (0..<8).map { UInt8(truncatingIfNeeded: tieBreaker >> (56 - 8 * UInt64($0))) })
        if nominate { append(&m, 0x0025, []) }
        sign(&m, password: remotePassword)
        return m
    }

    /// What a response to one of our Binding requests said.
    public enum Response: Sendable, Equatable {
        /// A success response to the transaction, authenticated with the remote ice-pwd.
        case success(transactionID: [UInt8])
        /// An error response (RFC 8445 §7.2.5.1: 487 is a role conflict), with its code.
        case error(transactionID: [UInt8], code: Int)
        /// Not a response to us, or not authentic: the reason.
        case ignored(String)
    }

    /// Parses a Binding response and checks its MESSAGE-INTEGRITY (keyed with `remotePassword`) and
    /// FINGERPRINT. Every length is range-checked.
    public static func parseResponse(_ p: UnsafeRawBufferPointer, remotePassword: String) -> Response {
        guard let message = Message(p) else { return .ignored("not STUN") }
        let type = message.type
        guard type == 0x0101 || type == 0x0111 else { return .ignored("STUN message type 0x\(String(type, radix: 16)) is not a Binding response") }
        var code = 0
        let walked = message.walk { a in
            let v = a.value.lowerBound
            if a.type == 0x0009 && a.length >= 4 { code = Int(p[v + 2] & 0x07) * 100 + Int(p[v + 3] % 100) } // ERROR-CODE
        }
        guard case .wellFormed(let integrityAt) = walked else { return .ignored(walked.reason) }
        guard let integrityAt else { return .ignored("Binding response without MESSAGE-INTEGRITY") }
        guard integrityMatches(p, at: integrityAt, password: remotePassword) else {
            return .ignored("STUN MESSAGE-INTEGRITY does not match the remote ice-pwd")
        }
        let id = Array(p[8..<20])
        return type == 0x0101 ? .success(transactionID: id) : .error(transactionID: id, code: code)
    }

    // MARK: Reading a message

    /// One attribute of a STUN message: its type, where its type-length-value header starts, and its value's
    /// bytes (without the padding to 4 bytes that follows them).
    struct Attribute: Equatable {
        /// The attribute type (0x0006 USERNAME, 0x0008 MESSAGE-INTEGRITY, 0x8028 FINGERPRINT, …).
        var type: UInt16
        /// The offset of the attribute's header in the message.
        var offset: Int
        /// The offsets of its value.
        var value: Range<Int>
        /// The value's length in bytes, as the attribute says.
        var length: Int { value.count }
    }

    /// What `Message.walk` found.
    enum Walk: Equatable {
        /// Every attribute was read and the FINGERPRINT, if any, matches: where MESSAGE-INTEGRITY is, if any (its
        /// HMAC is checked by `integrityMatches`, against the password the caller knows).
        case wellFormed(integrityAt: Int?)
        /// Why the message is malformed: a length that does not fit, an attribute that overruns the message, an
        /// attribute after MESSAGE-INTEGRITY, MESSAGE-INTEGRITY or FINGERPRINT of the wrong size, a FINGERPRINT
        /// that does not match.
        case malformed(String)

        /// The reason when malformed, "" when well formed.
        var reason: String {
            if case .malformed(let r) = self { return r }
            return ""
        }
    }

    /// A datagram that looks like STUN (RFC 7983's first byte, the magic cookie), and the one walk over its
    /// attributes that every parser here uses: the header's length must be a multiple of 4 and fit the datagram,
    /// every attribute's value must end inside the message (values are padded to 4 bytes, RFC 5389 §15), nothing
    /// but FINGERPRINT may follow MESSAGE-INTEGRITY (§15.4: it would not be covered by the integrity), and both
    /// have their fixed sizes (20 and 4 bytes); a FINGERPRINT must match.
    struct Message {
        let bytes: UnsafeRawBufferPointer
        /// The message type (0x0001 Binding request, 0x0101 success response, 0x0111 error response).
        let type: UInt16
        /// The message length from the header: the attributes' bytes after the 20-byte header.
        let length: Int

        /// nil when `p` is not STUN (too short, a first byte over 3, no magic cookie).
        init?(_ p: UnsafeRawBufferPointer) {
            guard STUN.looksLikeSTUN(p) else { return nil }
            bytes = p
            type = p.bigEndianUInt16(at: 0)
            length = Int(p.bigEndianUInt16(at: 2))
        }

        /// Calls `visit` with each attribute in order, bounds-checked, and says whether the message is well formed
        /// (and where its MESSAGE-INTEGRITY is) or why not. Attributes before a malformed one have been visited.
        func walk(_ visit: (Attribute) -> Void) -> Walk {
            let end = 20 + length
            guard length % 4 == 0, end <= bytes.count else { return .malformed("STUN length \(length) does not fit \(bytes.count) bytes") }
            var o = 20
            var integrityAt: Int?, fingerprintAt: Int?
            while o + 4 <= end {
                let t = bytes.bigEndianUInt16(at: o), l = Int(bytes.bigEndianUInt16(at: o + 2))
                let v = o + 4
                guard v + l <= end else { return .malformed("STUN attribute 0x\(String(t, radix: 16)) of \(l) bytes overruns the message") }
                if integrityAt != nil && t != 0x8028 { return .malformed("STUN attribute after MESSAGE-INTEGRITY") }
                switch t {
                case 0x0008:
                    guard l == 20 else { return .malformed("MESSAGE-INTEGRITY of \(l) bytes") }
                    integrityAt = o
                case 0x8028:
                    guard l == 4 else { return .malformed("FINGERPRINT of \(l) bytes") }
                    fingerprintAt = o
                default: break
                }
                visit(Attribute(type: t, offset: o, value: v..<(v + l)))
                o = v + (l + 3) & ~3
            }
            if let f = fingerprintAt, !STUN.fingerprintMatches(bytes, at: f) { return .malformed("STUN FINGERPRINT mismatch") }
            return .wellFormed(integrityAt: integrityAt)
        }
    }

    /// Appends MESSAGE-INTEGRITY (HMAC-SHA1 keyed with `password`, over the message with its length counting the
    /// attribute) and FINGERPRINT (CRC-32 ^ 0x5354554e): the end of every message we send.
    private static func sign(_ m: inout [UInt8], password: String) {
        setLength(&m, m.count - 20 + 24)
        append(&m, 0x0008, hmacSHA1(key: Array(password.utf8), m))
        setLength(&m, m.count - 20 + 8)
        let crc = crc32(m) ^ 0x5354_554e
        append(&m, 0x8028, [UInt8(crc >> 24), UInt8((crc >> 16) & 0xff), UInt8((crc >> 8) & 0xff), UInt8(crc & 0xff)])
    }

    /// The FINGERPRINT attribute at `f` matches the CRC-32 of everything before it.
    private static func fingerprintMatches(_ p: UnsafeRawBufferPointer, at f: Int) -> Bool {
        p.bigEndianUInt32(at: f + 4) == crc32(UnsafeRawBufferPointer(rebasing: p[0..<f])) ^ 0x5354_554e
    }

    /// The MESSAGE-INTEGRITY attribute at `at` is the HMAC-SHA1, keyed with `password`, of the header (its length
    /// counting up to and including this attribute) and everything before the attribute.
    private static func integrityMatches(_ p: UnsafeRawBufferPointer, at: Int, password: String) -> Bool {
        var covered = [UInt8](UnsafeRawBufferPointer(rebasing: p[0..<at]))
        let adjusted = at - 20 + 24
        covered[2] = UInt8(adjusted >> 8)
        covered[3] = UInt8(adjusted & 0xff)
        return hmacSHA1(key: Array(password.utf8), covered).elementsEqual(p[(at + 4)..<(at + 24)])
    }

    private static func append(_ m: inout [UInt8], _ type: UInt16, _ value: [UInt8]) {
        m += [UInt8(type >> 8), UInt8(type & 0xff), UInt8(value.count >> 8), UInt8(value.count & 0xff)] + value
        while m.count % 4 != 0 { m.append(0) }
        setLength(&m, m.count - 20)
    }
    private static func setLength(_ m: inout [UInt8], _ n: Int) {
        m[2] = UInt8(n >> 8)
        m[3] = UInt8(n & 0xff)
    }

    static func hmacSHA1(key: [UInt8], _ data: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 20)
        _ = cw_hmac_sha1(key, key.count, data, data.count, &out)
        return out
    }

    private static let crcTable: [UInt32] = (0..<256).map { n in
        var c = UInt32(n)
        for _ in 0..<8 { c = c & 1 != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        return c
    }
    /// CRC-32 (ISO 3309, as FINGERPRINT uses): a checksum, not cryptography.
    static func crc32<C: Collection>(_ bytes: C) -> UInt32 where C.Element == UInt8 {
        var c: UInt32 = 0xFFFF_FFFF
        for b in bytes { c = crcTable[Int((c ^ UInt32(b)) & 0xff)] ^ (c >> 8) }
        return c ^ 0xFFFF_FFFF
    }

}
