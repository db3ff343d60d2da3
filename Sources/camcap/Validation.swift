import ArgumentParser
import VideoCapture
import CapturePipeline

/// The options that set library settings whose names differ from the option's; any other setting is its option
/// in kebab case, without a nanosecond suffix ("maxViewers" → --max-viewers, "requestTimeoutNs" → --request-timeout).
let optionNames = [
    "maxSessions": "--max-clients", "maxSessionsPerAddress": "--max-clients-per-address", "maxPerAddress": "--max-viewers-per-address",
    "bitrateKbps": "--bitrate", "maxBitrateKbps": "--max-bitrate", "keyFrameInterval": "--keyint", "keyIntervalSeconds": "--keyint-seconds",
    "sliceMode": "--max-nal-size", "pacingFactor": "--pacing", "adaptsToBandwidth": "--adapt-to-bandwidth", "durationNs": "--duration",
    "fpsLimit": "--fps-limit", "pixelFormats": "--pixel-format", "candidateHosts": "--candidate", "feedbackFrom": "--rtcp-from",
    "localRTCPPort": "--rtcp-port", "allowedOrigins": "--allow-origin", "hostNames": "--allow-host", "tiers": "--tiers",
]

/// The option that sets a library setting.
func option(for setting: String) -> String {
    if let name = optionNames[setting] { return name }
    return "--"
        + (setting.hasSuffix("Ns") ? setting.dropLast(2) : Substring(setting)).map { $0.isUppercase ? "-" + $0.lowercased() : String($0) }.joined()
}

/// Runs library checks (the configurations' `validate()`, parsing): a refusal names our options where the
/// library names its settings, keeping the value and the valid range. The one place where settings become options.
func validating<T>(_ checks: () throws -> T) throws -> T {
    do { return try checks() } catch let error as any SettingError {
        var (lead, rest) = ("", error.message)
        if let setting = error.setting, rest.hasPrefix(setting), rest.dropFirst(setting.count).first?.isLetter != true {
            (lead, rest) = (option(for: setting), String(rest.dropFirst(setting.count)))
        }
        // Other settings named in the message ("at least bitrateKbps") become their options too.
        throw ValidationError(lead + rest.replacing(/[\p{L}\p{N}]+/) { optionNames[String($0.output)] ?? String($0.output) })
    } catch { throw ValidationError("\(error)") }
}

/// --token and --token-file (serve, publish): the bearer token, given once.
struct TokenOptions: ParsableArguments {
    @Option(help: "The bearer token (visible to other users in ps; prefer --token-file or the environment variable).") var token: String?
    @Option(help: "Read the bearer token from this file.") var tokenFile: String?

    func validate() throws {
        if token != nil && tokenFile != nil { throw ValidationError("give the token once: --token or --token-file") }
    }
}

/// The options both servers (serve, rtsp) take: where to listen, the request timeout, the connection limits and
/// when to release the camera. Those not given keep the server's own default (`ServerPolicy`, `RTSPHub.Configuration`).
struct ServerOptions: ParsableArguments {
    @Option(help: "HOST:PORT (port 0: a free one, printed); default 127.0.0.1:8080 (serve), 127.0.0.1:8554 (rtsp); UDP media on HOST.")
    var listen: String?
    @Option(help: "Seconds a connection has to send a complete request (default 10).") var requestTimeout: Double?
    @Option(help: "Open connections at most (default: serve 256, rtsp 64; kept below the descriptor limit).") var maxConnections: Int?
    @Option(help: "Open connections per client address at most (default: serve 32, rtsp 16).") var maxConnectionsPerAddress: Int?
    @Option(help: "Seconds without viewers before the camera is released (its light goes off; the next viewer starts it); 0: never.")
    var idleRelease: Double = 30

    func validate() throws {
        if let listen, ListenAddress(listen) == nil {
            throw ValidationError("--listen must be HOST:PORT with an IPv4/IPv6 address and a port 0...65535, got \"\(listen.prefix(80))\"")
        }
    }

    /// The request timeout and connection limits given, over a server's defaults.
    func apply(requestTimeoutNs: inout Int64, maxConnections: inout Int, maxConnectionsPerAddress: inout Int) {
        if let requestTimeout { requestTimeoutNs = nanoseconds(seconds: requestTimeout) }
        maxConnections = self.maxConnections ?? maxConnections
        maxConnectionsPerAddress = self.maxConnectionsPerAddress ?? maxConnectionsPerAddress
    }
}
