public import VideoCaptureCommons
import SystemIO

extension RTPError: SettingError, SettingRefusal {
    /// `invalidConfiguration`, refusing `setting`.
    package init(refusing setting: String, _ message: String) { self.init(.invalidConfiguration, message, setting: setting) }
}

extension RTPSender.Configuration {
    /// Checks the settings a sender takes from its user, before a socket is made: `dropRate` (0...1),
    /// `localRTCPPort` (0...65535) and `feedbackFrom` (each an IPv4 or IPv6 address, or ADDRESS:PORT). A refusal
    /// is an `RTPError` with code `invalidConfiguration` whose `setting` names the member and whose message gives
    /// the value and what is valid.
    public func validate() throws(RTPError) {
        let stranger = feedbackFrom.first { SocketAddress(host: $0, port: 0) == nil && UDPTransport.hostAndPort($0) == nil }
        try RTPError.refuse([
            ("dropRate", SettingCheck.range("dropRate", dropRate, 0...1)),
            ("localRTCPPort", SettingCheck.range("localRTCPPort", localRTCPPort, 0...65535)),
            ("feedbackFrom", stranger.map { "feedbackFrom must be IP addresses or ADDRESS:PORT, got \"\($0.prefix(64))\"" }),
        ])
    }
}
