import Testing
import RTP
import WebRTC

/// `WebRTCPeer.Configuration.validate()`: the error names the setting, the value and the range.
@Suite struct ConfigurationValidationTests {
    @Test func peerSettingsAreRangeChecked() throws {
        var c = WebRTCPeer.Configuration(bindHost: "127.0.0.1", candidateHosts: ["camera.local"])
        #expect {
            try c.validate()
        } throws: { error in
            (error as? WebRTCError)?.setting == "candidateHosts"
                && (error as? WebRTCError)?.message == "candidateHosts must be IP addresses, got \"camera.local\""
        }
        c.candidateHosts = ["127.0.0.1", "::1"]
        try c.validate()
        c.dropRate = .nan
        #expect {
            try c.validate()
        } throws: { error in
            (error as? WebRTCError)?.setting == "dropRate" && (error as? WebRTCError)?.message == "dropRate must be 0.0...1.0, got nan"
        }
        c.dropRate = 0
        c.pacingFactor = 30
        #expect {
            try c.validate()
        } throws: { error in
            (error as? WebRTCError)?.message == "pacingFactor must be 1.0...20.0 (× the estimate), got 30.0"
        }
        c.pacingFactor = nil
        c.connectTimeoutNs = .max
        #expect {
            try c.validate()
        } throws: { error in
            (error as? WebRTCError)?.code == .invalidConfiguration
                && (error as? WebRTCError)?.message == "connectTimeoutNs must be 1.0...120.0 seconds, got inf"
        }
    }

    @Test func playoutDelayParsesMinColonMax() {
        #expect(PlayoutDelay(parsing: "0:500") == .lowLatency)
        #expect(PlayoutDelay(parsing: "100:40950")?.description == "100:40950")
        for bad in ["500:0", "0:40960", "-1:5", "0", "a:b", "0:500:1"] { #expect(PlayoutDelay(parsing: bad) == nil, "\(bad)") }
    }
}
