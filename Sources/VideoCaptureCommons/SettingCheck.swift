/// An error that can refuse one configuration setting and name it: `setting` is the member's name
/// ("maxViewers", "requestTimeoutNs"), and `message` starts with that name, then gives the value and the valid
/// range ("maxViewers must be 1...256, got 0"), so that a program can put its own option's name in its place.
public protocol SettingError: Error {
    /// The setting refused (the configuration member's name), or nil when the error is about no one setting.
    var setting: String? { get }
    /// A sentence for people; for a refused setting it starts with `setting`.
    var message: String { get }
}

extension SettingError {
    /// `message` with the settings it names called as a program calls them (its options, say): a message that
    /// starts with the refused `setting` starts with `lead(setting)` instead, and every other word that `others`
    /// knows ("at least bitrateKbps") becomes its name; the value and the valid range are kept.
    public func message(calling lead: (String) -> String, others: (String) -> String?) -> String {
        var (start, rest) = ("", message)
        if let setting, rest.hasPrefix(setting), rest.dropFirst(setting.count).first?.isLetter != true {
            (start, rest) = (lead(setting), String(rest.dropFirst(setting.count)))
        }
        return start + rest.replacing(/[\p{L}\p{N}]+/) { others(String($0.output)) ?? String($0.output) }
    }
}

/// The command-line option named after a configuration setting: kebab case, without a nanosecond suffix
/// ("maxViewers" → "--max-viewers", "requestTimeoutNs" → "--request-timeout").
public func optionName(forSetting setting: String) -> String {
    "--" + (setting.hasSuffix("Ns") ? setting.dropLast(2) : Substring(setting)).map { $0.isUppercase ? "-" + $0.lowercased() : String($0) }.joined()
}

/// A `SettingError` the libraries' `validate()` methods throw for a refused setting: each module's error type
/// makes one with its `invalidConfiguration` code, and `refuse(_:)` is the one place that walks the checks.
package protocol SettingRefusal: SettingError {
    /// The error refusing `setting` (its `invalidConfiguration` code), with `message` ("SETTING must be …").
    init(refusing setting: String, _ message: String)
}

extension SettingRefusal {
    /// Throws the refusal of the first setting with a problem: `problems` pairs each setting with nil (valid) or
    /// its message, in the order they are checked (`SettingCheck`).
    package static func refuse(_ problems: [(String, String?)]) throws(Self) {
        for case (let setting, let problem?) in problems { throw Self(refusing: setting, problem) }
    }
}

/// The error of a module whose failures are a code, a message and, for a refused configuration value, the setting
/// at fault: `PipelineError`, `ServerError` and `RTSPError` are this type, each with its own `Domain` (an empty
/// enum), so that each has its own codes (`extension ErrorCode where Domain == PipelineError`) and `catch let e as
/// ServerError` tells them apart.
public struct CodedSettingError<Domain>: CodedError, SettingRefusal {
    /// What kind of failure this is, to switch on.
    public var code: Code
    /// A sentence for people, naming the setting, the address, the camera or the file at fault.
    public var message: String
    /// The configuration member refused by a `validate()` ("bitrateKbps", "maxViewers"); the message then starts
    /// with it.
    public var setting: String?
    /// An error with `code`, a human-readable `message` and the setting at fault, if one is.
    public init(_ code: Code, _ message: String, setting: String? = nil) {
        self.code = code
        self.message = message
        self.setting = setting
    }
    /// `invalidConfiguration` (each domain's code of that name), refusing `setting`.
    package init(refusing setting: String, _ message: String) {
        self.init(Code(rawValue: "invalid configuration"), message, setting: setting)
    }
}

/// The range checks of the libraries' configuration `validate()` methods: each gives nil for a valid value, else
/// the message "SETTING must be LOW...HIGH[ UNIT], got VALUE" (`SettingError`).
package enum SettingCheck {
    /// `value` within `valid`, else the message.
    package static func range<T: Comparable>(_ setting: String, _ value: T, _ valid: ClosedRange<T>, unit: String = "") -> String? {
        valid.contains(value) ? nil : "\(setting) must be \(valid.lowerBound)...\(valid.upperBound)\(unit.isEmpty ? "" : " " + unit), got \(value)"
    }

    /// A duration held in nanoseconds within `valid` seconds, else the message (the value shown in seconds;
    /// `Int64.max` and `Int64.min`, what `nanoseconds(seconds:)` gives for too large a value and NaN, as "inf" and
    /// "nan").
    package static func seconds(_ setting: String, _ ns: Int64, _ valid: ClosedRange<Double>) -> String? {
        let s = Double(ns) / 1e9
        guard !valid.contains(s) || ns == .max || ns == .min else { return nil }
        return "\(setting) must be \(valid.lowerBound)...\(valid.upperBound) seconds, got \(shown(ns))"
    }

    /// Nanoseconds as seconds for a message: `Int64.max` as "inf", `Int64.min` as "nan" (`nanoseconds(seconds:)`).
    package static func shown(_ ns: Int64) -> String { ns == .max ? "inf" : ns == .min ? "nan" : "\(Double(ns) / 1e9)" }
}

/// Seconds as nanoseconds for a configuration's `…Ns` fields, never trapping: values beyond `Int64`'s range
/// saturate and NaN gives `Int64.min`, so that the configuration's `validate()` refuses them.
public func nanoseconds(seconds: Double) -> Int64 {
    guard !seconds.isNaN else { return .min }
    let ns = seconds * 1e9
    if ns >= 9.2e18 { return .max }
    if ns <= -9.2e18 { return .min }
    return Int64(ns)
}
