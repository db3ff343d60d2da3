import ArgumentParser
import Foundation
import VideoCapture

/// The options that set library settings whose names differ from the option's; any other setting is its option
/// in kebab case, without a nanosecond suffix ("maxViewers" → --max-viewers, "requestTimeoutNs" → --request-timeout).
let optionNames = [
    "maxSessions": "--max-clients", "maxSessionsPerAddress": "--max-clients-per-address", "maxPerAddress": "--max-viewers-per-address",
    "bitrateKbps": "--bitrate", "maxBitrateKbps": "--max-bitrate", "keyFrameInterval": "--keyint", "keyIntervalSeconds": "--keyint-seconds",
    "sliceMode": "--max-nal-size", "pacingFactor": "--pacing", "adaptsToBandwidth": "--adapt-to-bandwidth", "durationNs": "--duration",
    "fpsLimit": "--fps-limit", "pixelFormats": "--pixel-format",
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
        var message = error.message
        if let setting = error.setting, message.hasPrefix(setting) { message = option(for: setting) + message.dropFirst(setting.count) }
        var out = "", word = "" // other settings named in the message ("at least bitrateKbps")
        for c in message + "\n" {
            if c.isLetter || c.isNumber {
                word.append(c)
                continue
            }
            out += optionNames[word] ?? word
            out.append(c)
            word = ""
        }
        throw ValidationError(String(out.dropLast()))
    } catch { throw ValidationError("\(error)") }
}

/// A numeric IPv4 or IPv6 address (`--candidate`, `--rtcp-from`).
func isIPAddress(_ s: String) -> Bool {
    var a4 = in_addr(), a6 = in6_addr()
    return inet_pton(AF_INET, s, &a4) == 1 || inet_pton(AF_INET6, s, &a6) == 1
}

/// The message for a `--listen` that is not HOST:PORT.
func listenRule(_ listen: String) -> String {
    "--listen must be HOST:PORT with an IPv4/IPv6 address and a port 0...65535, got \"\(listen.prefix(80))\""
}

/// --token and --token-file (serve, publish): the bearer token, given once.
struct TokenOptions: ParsableArguments {
    @Option(help: "The bearer token (visible to other users in ps; prefer --token-file or the environment variable).") var token: String?
    @Option(help: "Read the bearer token from this file.") var tokenFile: String?

    func validate() throws {
        if token != nil && tokenFile != nil { throw ValidationError("give the token once: --token or --token-file") }
    }
}
