import Foundation
public import VideoCaptureCommons

extension RTSPHub.Configuration {
    /// Checks every setting against the range a server is meant to run with, before anything is bound: the
    /// path (`/NAME`, 2...200 bytes of visible ASCII without `?` or `#`, no trailing `/`), `udpPort` (0 or
    /// 1024...65534), the timeouts (`sessionTimeoutNs` 1...3600 s, `setupTimeoutNs` and `requestTimeoutNs`
    /// 0.5...3600 s, `idleTimeoutNs` 1...86400 s, `slowClientTimeoutNs` 0.5...3600 s), the sessions (1...256 in
    /// all and per address), the connections (1...4096 in all and per address), `parserLimits.maxRequestBytes`
    /// (1024...65536) and the authenticator's (`DigestAuthenticator.validate(user:realm:nonceLifetimeNs:)`).
    /// A refusal is an `RTSPError` with code `invalidConfiguration` whose `setting` names the member and whose
    /// message gives the value and the valid range. `RTSPHub.init` checks only what it cannot work without.
    public func validate() throws(RTSPError) {
        let visible = path.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7f && $0 != UInt8(ascii: "?") && $0 != UInt8(ascii: "#") }
        try RTSPError.refuse([
            (
                "path",
                path.hasPrefix("/") && (2...200).contains(path.utf8.count) && !path.hasSuffix("/") && visible
                    ? nil
                    : "path must be /NAME (visible ASCII without spaces, '?' or '#', no trailing /), got \"\(path.prefix(80))\""
            ),
            ("udpPort", udpPort == 0 || (1024...65534).contains(udpPort) ? nil : "udpPort must be 0 or 1024...65534, got \(udpPort)"),
            ("sessionTimeoutNs", SettingCheck.seconds("sessionTimeoutNs", sessionTimeoutNs, 1...3600)),
            ("setupTimeoutNs", SettingCheck.seconds("setupTimeoutNs", setupTimeoutNs, 0.5...3600)),
            ("requestTimeoutNs", SettingCheck.seconds("requestTimeoutNs", requestTimeoutNs, 0.5...3600)),
            ("idleTimeoutNs", SettingCheck.seconds("idleTimeoutNs", idleTimeoutNs, 1...86_400)),
            ("slowClientTimeoutNs", SettingCheck.seconds("slowClientTimeoutNs", slowClientTimeoutNs, 0.5...3600)),
            ("maxSessions", SettingCheck.range("maxSessions", maxSessions, 1...256)),
            ("maxSessionsPerAddress", SettingCheck.range("maxSessionsPerAddress", maxSessionsPerAddress, 1...256)),
            ("maxConnections", SettingCheck.range("maxConnections", maxConnections, 1...4096)),
            ("maxConnectionsPerAddress", SettingCheck.range("maxConnectionsPerAddress", maxConnectionsPerAddress, 1...4096)),
            ("maxRequestBytes", SettingCheck.range("maxRequestBytes", parserLimits.maxRequestBytes, 1024...65536)),
        ])
        if let authenticator {
            try DigestAuthenticator.validate(user: nil, realm: authenticator.realm, nonceLifetimeNs: authenticator.nonceLifetimeNs)
        }
    }
}

extension DigestAuthenticator {
    /// Checks what an authenticator is made with, before a password is read: the user (1...64 visible ASCII
    /// characters without `:` or `"`; nil: not checked), the realm (at most 64 printable ASCII characters without
    /// quotes or backslashes) and the nonce lifetime (1...86400 s). A refusal is an `RTSPError` with code
    /// `invalidConfiguration` naming the setting ("user", "realm", "nonceLifetimeNs").
    public static func validate(user: String?, realm: String, nonceLifetimeNs: Int64) throws(RTSPError) {
        if let user, !(1...64).contains(user.utf8.count) || !user.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f && $0 != UInt8(ascii: ":") && $0 != 0x22 })
        {
            throw RTSPError(.invalidConfiguration, "user must be 1...64 visible ASCII characters without ':' or '\"'", setting: "user")
        }
        guard realm.utf8.count <= 64, realm.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7f && $0 != 0x22 && $0 != 0x5c }) else {
            throw RTSPError(
                .invalidConfiguration, "realm must be at most 64 printable ASCII characters without quotes or backslashes", setting: "realm")
        }
        if let problem = SettingCheck.seconds("nonceLifetimeNs", nonceLifetimeNs, 1...86_400) {
            throw RTSPError(.invalidConfiguration, problem, setting: "nonceLifetimeNs")
        }
    }
}

extension DigestAuthenticator {
    /// A password from where a user keeps it: the first line of `file` (a regular file of at most 4 KiB), else
    /// `fallback` (an environment variable's value, say), white space trimmed; nil when neither is given. A file
    /// that cannot be read, or a password that is not 1...256 bytes, is an `RTSPError` with code
    /// `invalidConfiguration` naming the file.
    public static func password(file: String?, fallback: String?) throws(RTSPError) -> String? {
        var text = fallback
        if let file {
            do throws(BoundedReadFailure) {
                let contents = String(decoding: try readBoundedFile(file, limit: 4096), as: UTF8.self)
                text = contents.split(separator: "\n", omittingEmptySubsequences: false).first.map(String.init) ?? ""
            } catch {
                throw RTSPError(.invalidConfiguration, error.message(file, what: "password file", limit: 4096))
            }
        }
        guard let p = text?.trimmingCharacters(in: .whitespacesAndNewlines) else { return nil }
        guard (1...256).contains(p.utf8.count) else {
            throw RTSPError(.invalidConfiguration, "the password (\(file ?? "given")) must be 1...256 bytes, got \(p.utf8.count)")
        }
        return p
    }
}
