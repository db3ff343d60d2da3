import Foundation
public import NIOSSL
import SystemIO
import WebRTC
public import VideoCaptureCommons
import CapturePipeline

/// The pieces of a server's safety that come from its configuration: the token, origins, host names, the
/// descriptor budget and the TLS context.
public enum ServeSecurity {
    /// What a valid token looks like, in one sentence for error messages.
    public static let tokenRule = "a token must be 16...256 characters of A-Z a-z 0-9 - . _ ~ + / (RFC 6750's b64token)"

    /// True for a bearer token of 16–256 characters of RFC 6750's b64token alphabet (A–Z a–z 0–9 `-._~+/`).
    public static func isValidToken(_ t: String) -> Bool {
        let allowed = Set("-._~+/".utf8)
        return (16...256).contains(t.utf8.count)
            && t.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x41...0x5a).contains($0) || (0x61...0x7a).contains($0) || allowed.contains($0) }
    }

    /// 32 characters from 192 random bits (the system's CSPRNG: getrandom on Linux), URL-safe.
    public static func randomToken() -> String {
        let chars = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        var g = SystemRandomNumberGenerator()
        return String(decoding: (0..<32).map { _ in chars[Int(g.next() % 64)] }, as: UTF8.self)
    }

    /// "scheme://host[:port]" (http or https, no path), lower-cased as browsers send it; nil if it is not one.
    public static func origin(_ s: String) -> String? {
        let lower = s.lowercased()
        guard lower.count <= 300, let r = lower.range(of: "://") else { return nil }
        let scheme = lower[..<r.lowerBound], rest = lower[r.upperBound...]
        guard scheme == "http" || scheme == "https", !rest.isEmpty, !rest.contains("/"), !rest.contains("@") else { return nil }
        let host = ServerPolicy.hostPart(String(rest))
        guard isHostName(host) else { return nil }
        return lower
    }

    /// True for a plausible host name or address for `ServerPolicy.hostNames`: 1–253 characters of letters,
    /// digits, `-`, `.` and `:` (no port, no brackets).
    public static func isHostName(_ h: String) -> Bool {
        (1...253).contains(h.utf8.count)
            && h.utf8.allSatisfy {
                $0 == 0x2d || $0 == 0x2e || $0 == 0x3a || (0x30...0x39).contains($0) || (0x41...0x5a).contains($0) || (0x61...0x7a).contains($0)
            }
    }

    /// The network a client address counts in for `ServerPolicy.maxConnectionsPerNetwork`: its /24 for IPv4
    /// (and IPv4-mapped IPv6), "a.b.c.0/24", its /64 for IPv6, "2001:db8:0:1::/64"; anything else as it is.
    public static func network(of address: String) -> String {
        var v4 = in_addr()
        let plain = address.lowercased().hasPrefix("::ffff:") && address.contains(".") ? String(address.dropFirst(7)) : address
        if inet_pton(AF_INET, plain, &v4) == 1 {
            let b = withUnsafeBytes(of: v4.s_addr) { Array($0) }
            return "\(b[0]).\(b[1]).\(b[2]).0/24"
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, address, &v6) == 1 {
            let b = withUnsafeBytes(of: v6) { Array($0.prefix(8)) }
            return stride(from: 0, to: 8, by: 2).map { String(UInt16(b[$0]) << 8 | UInt16(b[$0 + 1]), radix: 16) }.joined(separator: ":") + "::/64"
        }
        return address
    }

    /// True for a loopback address: `127.x.x.x` or `::1` (not the name `localhost`).
    public static func isLoopback(_ host: String) -> Bool { host.hasPrefix("127.") || host == "::1" }

    /// HTTP connections that fit under the descriptor limit (RLIMIT_NOFILE) beside the camera, the viewers'
    /// sockets and the process's own: accepting past the limit would make accept fail (EMFILE) and the server stall.
    public static func connectionsWithinDescriptorLimit(viewers: Int) -> Int {
        CapturePipeline.connectionsWithinDescriptorLimit(viewers: viewers)
    }

    /// The bearer token a server uses, and where it came from (for the start line): none with `noAuth`, else
    /// the one given, the first line of `file` (a regular file of at most 4 KiB), `CAMCAP_TOKEN` from
    /// `environment`, or a random one. A token that breaks RFC 6750's syntax is an error naming its source.
    public static func token(noAuth: Bool, given: String?, file: String?, environment: [String: String]) throws(ServerError) -> (
        token: String?, source: String
    ) {
        if noAuth { return (nil, "none (--no-auth)") }
        if let given {
            guard isValidToken(given) else { throw ServerError(.badToken, "--token: \(tokenRule)") }
            return (given, "--token")
        }
        if let file {
            let text = try readSmallFile(file, what: "token file", limit: 4096).trimmingCharacters(in: .whitespacesAndNewlines)
            guard isValidToken(text) else { throw ServerError(.badToken, "\(file): \(tokenRule)") }
            return (text, file)
        }
        if let env = environment["CAMCAP_TOKEN"] {
            guard isValidToken(env) else { throw ServerError(.badToken, "CAMCAP_TOKEN: \(tokenRule)") }
            return (env, "$CAMCAP_TOKEN")
        }
        return (randomToken(), "random")
    }

    /// The names a server listening on `host` answers to in `Host` (lowercased): its listen and candidate
    /// addresses, every interface address and loopback for a wildcard listener, `localhost` for loopback and
    /// wildcard listeners, and the extra names given. Anything else is DNS rebinding or a mistake.
    public static func hostNames(listening host: String, isWildcard: Bool, candidates: [String], interfaces: [String], extra: [String]) -> Set<String>
    {
        var names = Set(([host] + candidates + extra).map { $0.lowercased() })
        if isWildcard { names.formUnion(interfaces + ["127.0.0.1", "::1"]) }
        if isWildcard || isLoopback(host) { names.insert("localhost") }
        names.remove("0.0.0.0")
        names.remove("::")
        return names
    }

    /// A regular file of at most `limit` bytes, as text; errors name the file and what is wrong.
    public static func readSmallFile(_ path: String, what: String, limit: Int) throws(ServerError) -> String {
        do throws(BoundedReadFailure) {
            return String(decoding: try readBoundedFile(path, limit: limit), as: UTF8.self)
        } catch {
            throw ServerError(.badFile, error.message(path, what: what, limit: limit))
        }
    }

    /// The TLS 1.2 cipher suites a server offers: ECDHE key exchange with AEAD ciphers only (AES-GCM,
    /// ChaCha20-Poly1305); no CBC, no SHA-1 MACs, no static RSA. TLS 1.3's suites are all AEAD.
    public static let tls12CipherSuites = [
        "ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-ECDSA-AES256-GCM-SHA384", "ECDHE-RSA-AES256-GCM-SHA384",
        "ECDHE-ECDSA-CHACHA20-POLY1305", "ECDHE-RSA-CHACHA20-POLY1305",
    ].joined(separator: ":")

    /// A server's TLS: `chain` and `key`, TLS 1.2 at least (1.0 and 1.1 are refused), AEAD suites only.
    static func serverTLS(chain: [NIOSSLCertificate], key: NIOSSLPrivateKey) -> TLSConfiguration {
        var config = TLSConfiguration.makeServerConfiguration(certificateChain: chain.map { .certificate($0) }, privateKey: .privateKey(key))
        config.minimumTLSVersion = .tlsv12
        config.cipherSuites = tls12CipherSuites
        return config
    }

    /// TLS from PEM files (the chain, then the key): TLS 1.2 or 1.3, AEAD suites only.
    public static func tlsContext(certificate: String, key: String) throws -> (NIOSSLContext, String) {
        let certText = try readSmallFile(certificate, what: "TLS certificate", limit: 256 * 1024)
        let keyText = try readSmallFile(key, what: "TLS key", limit: 64 * 1024)
        let chain: [NIOSSLCertificate], privateKey: NIOSSLPrivateKey
        do { chain = try NIOSSLCertificate.fromPEMBytes(Array(certText.utf8)) } catch {
            throw ServerError(.badFile, "\(certificate): not a PEM certificate (\(error))")
        }
        guard !chain.isEmpty else { throw ServerError(.badFile, "\(certificate): no certificate in it") }
        do { privateKey = try NIOSSLPrivateKey(bytes: Array(keyText.utf8), format: .pem) } catch {
            throw ServerError(.badFile, "\(key): not a PEM private key (\(error))")
        }
        let config = serverTLS(chain: chain, key: privateKey)
        do { return (try NIOSSLContext(configuration: config), "https: certificate \(certificate)") } catch {
            throw ServerError(
                .tls, "the TLS certificate \(certificate) and key \(key) do not make a TLS context (do they belong together?): \(error)")
        }
    }

    /// TLS with a certificate made now for `names` (TLS 1.2 or 1.3, AEAD suites only); the line to print gives
    /// its fingerprints.
    public static func selfSignedContext(names: [String]) throws -> (NIOSSLContext, String) {
        let made: SelfSignedCertificate
        do { made = try SelfSignedCertificate(names: names) } catch { throw ServerError(.tls, "cannot make a self-signed certificate: \(error)") }
        do {
            let config = serverTLS(
                chain: try NIOSSLCertificate.fromPEMBytes(Array(made.certificatePEM.utf8)),
                key: try NIOSSLPrivateKey(bytes: Array(made.privateKeyPEM.utf8), format: .pem))
            return (
                try NIOSSLContext(configuration: config),
                "https: self-signed certificate for \(names.joined(separator: ", ")); sha-256 \(made.fingerprint); public key sha-256 (base64) \(made.publicKeySHA256)"
            )
        } catch { throw ServerError(.tls, "cannot use the self-signed certificate: \(error)") }
    }
}
