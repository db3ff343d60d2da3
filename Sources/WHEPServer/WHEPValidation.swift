public import VideoCaptureCommons
import CapturePipeline

extension ViewerHub.Limits {
    /// Checks every limit is 1...256. A refusal is a `ServerError` with code `invalidConfiguration` whose
    /// `setting` names the member ("maxViewers", "maxPending", "maxPerAddress", "maxPendingPerAddress").
    public func validate() throws(ServerError) {
        try ServerError.refuse([
            ("maxViewers", SettingCheck.range("maxViewers", maxViewers, 1...256)),
            ("maxPending", SettingCheck.range("maxPending", maxPending, 1...256)),
            ("maxPerAddress", SettingCheck.range("maxPerAddress", maxPerAddress, 1...256)),
            ("maxPendingPerAddress", SettingCheck.range("maxPendingPerAddress", maxPendingPerAddress, 1...256)),
        ])
    }
}

extension ServerPolicy {
    /// Checks the names and limits: `allowedOrigins` (each `scheme://host[:port]`, http or https, lower-case, no
    /// path: `ServeSecurity.origin(_:)` gives that form), `hostNames` (`ServeSecurity.isHostName(_:)`),
    /// `requestTimeoutNs` (0.5...3600 s) and the connections (1...65536 in all, per address and per network). A
    /// refusal is a `ServerError` with code `invalidConfiguration` whose `setting` names the member and whose
    /// message gives the value and what is valid.
    public func validate() throws(ServerError) {
        let origin = allowedOrigins.sorted().first { ServeSecurity.origin($0) != $0 }
        let host = hostNames.sorted().first { !ServeSecurity.isHostName($0) }
        try ServerError.refuse([
            (
                "allowedOrigins",
                origin.map { "allowedOrigins must be scheme://host[:port] (http or https, lower-case, no path), got \"\($0.prefix(80))\"" }
            ),
            (
                "hostNames",
                host.map { "hostNames must be host names or addresses (letters, digits, '-', '.', ':'), got \"\($0.prefix(80))\"" }
            ),
            ("requestTimeoutNs", SettingCheck.seconds("requestTimeoutNs", requestTimeoutNs, 0.5...3600)),
            ("maxConnections", SettingCheck.range("maxConnections", maxConnections, 1...65536)),
            ("maxConnectionsPerAddress", SettingCheck.range("maxConnectionsPerAddress", maxConnectionsPerAddress, 1...65536)),
            ("maxConnectionsPerNetwork", SettingCheck.range("maxConnectionsPerNetwork", maxConnectionsPerNetwork, 1...65536)),
        ])
    }
}

extension WHEPBroadcast.Configuration {
    /// Checks `tiers` (1...3), that `adaptsToBandwidth` comes with one tier (it changes the one shared encode),
    /// and the encoder recipe (`EncodeStage.Configuration.validate(frameRate:)`, whose `PipelineError` is passed
    /// on). A refusal of this type's own settings is a `ServerError` with code `invalidConfiguration` naming it.
    public func validate(frameRate: Double = 30) throws {
        try ServerError.refuse([
            ("tiers", SettingCheck.range("tiers", tiers, 1...3)),
            ("adaptsToBandwidth", adaptsToBandwidth && tiers > 1 ? "adaptsToBandwidth changes the one shared encode: use it with tiers 1" : nil),
        ])
        try encoder.validate(frameRate: frameRate)
    }
}
