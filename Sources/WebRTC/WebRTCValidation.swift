public import VideoCaptureCommons
import RTP
import SystemIO

extension WebRTCPeer.Configuration {
    /// Checks the settings a server takes from its user: `candidateHosts` (numeric IPv4 or IPv6 addresses),
    /// `dropRate` (0...1), `consentTimeoutNs` (1...3600 s),
    /// `connectTimeoutNs` (1...120 s) and `pacingFactor` (1...20 × the estimate). A refusal is a `WebRTCError`
    /// with code `invalidConfiguration` whose `setting` names the member and whose message gives the value and
    /// the valid range.
    public func validate() throws(WebRTCError) {
        try WebRTCError.refuse([
            (
                "candidateHosts",
                candidateHosts.first { SocketAddress(host: $0, port: 0) == nil }.map {
                    "candidateHosts must be IP addresses, got \"\($0.prefix(64))\""
                }
            ),
            ("dropRate", SettingCheck.range("dropRate", dropRate, 0...1)),
            ("consentTimeoutNs", SettingCheck.seconds("consentTimeoutNs", consentTimeoutNs, 1...3600)),
            ("connectTimeoutNs", SettingCheck.seconds("connectTimeoutNs", connectTimeoutNs, 1...120)),
            ("pacingFactor", pacingFactor.flatMap { SettingCheck.range("pacingFactor", $0, 1...20, unit: "(× the estimate)") }),
        ])
    }
}

extension WebRTCPeer.Configuration {
    /// Sets `playoutDelay` and `congestedPlayoutDelay` from their text form: `auto` asks for
    /// `PlayoutDelay.lowLatency` (each frame rendered as soon as it is decoded) while the viewer's link is clear and
    /// `PlayoutDelay.receiverDefault` (the browser's own jitter buffer) while it is congested or limited; `MIN:MAX`
    /// in milliseconds (`PlayoutDelay(parsing:)`) always; `off` answers without the extension (the viewer chooses).
    /// Other text is refused with a `WebRTCError` (`invalidConfiguration`, setting `playoutDelay`), changing nothing.
    public mutating func setPlayoutDelay(parsing text: String) throws(WebRTCError) {
        switch text {
        case "auto": (playoutDelay, congestedPlayoutDelay) = (.lowLatency, .receiverDefault)
        case "off": (playoutDelay, congestedPlayoutDelay) = (nil, nil)
        default:
            guard let bounds = PlayoutDelay(parsing: text) else {
                throw WebRTCError(
                    refusing: "playoutDelay",
                    "playoutDelay must be auto, off or MIN:MAX in ms with 0 <= MIN <= MAX <= 40950, got \"\(text.prefix(20))\"")
            }
            (playoutDelay, congestedPlayoutDelay) = (bounds, nil)
        }
    }
}

extension WebRTCPublisher.Configuration {
    /// Checks the settings a publisher takes from its user: `connectTimeoutNs` (1...120 s) and
    /// `consentTimeoutNs` (1...3600 s). A refusal is a `WebRTCError` with code `invalidConfiguration` whose
    /// `setting` names the member.
    public func validate() throws(WebRTCError) {
        try WebRTCError.refuse([
            ("connectTimeoutNs", SettingCheck.seconds("connectTimeoutNs", connectTimeoutNs, 1...120)),
            ("consentTimeoutNs", SettingCheck.seconds("consentTimeoutNs", consentTimeoutNs, 1...3600)),
        ])
    }
}

extension WebRTCError: SettingError, SettingRefusal {
    /// `invalidConfiguration`, refusing `setting`.
    package init(refusing setting: String, _ message: String) { self.init(message, code: .invalidConfiguration, setting: setting) }
}
