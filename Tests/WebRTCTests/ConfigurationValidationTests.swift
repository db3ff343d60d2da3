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

    /// The text form of a peer's playout delay: auto (low latency while clear, the receiver's default while
    /// congested), off, or MIN:MAX always; anything else is refused naming the setting, changing nothing.
    @Test func playoutDelaySettingsFromText() throws {
        var c = WebRTCPeer.Configuration(bindHost: "127.0.0.1", candidateHosts: [])
        try c.setPlayoutDelay(parsing: "auto")
        #expect(c.playoutDelay == .lowLatency && c.congestedPlayoutDelay == .receiverDefault)
        try c.setPlayoutDelay(parsing: "100:2000")
        #expect(c.playoutDelay == PlayoutDelay(minMs: 100, maxMs: 2000) && c.congestedPlayoutDelay == nil)
        #expect {
            try c.setPlayoutDelay(parsing: "soon")
        } throws: { error in
            (error as? WebRTCError)?.setting == "playoutDelay"
                && (error as? WebRTCError)?.message == "playoutDelay must be auto, off or MIN:MAX in ms with 0 <= MIN <= MAX <= 40950, got \"soon\""
        }
        #expect(c.playoutDelay == PlayoutDelay(minMs: 100, maxMs: 2000), "a refusal changes nothing")
        try c.setPlayoutDelay(parsing: "off")
        #expect(c.playoutDelay == nil && c.congestedPlayoutDelay == nil)
    }
}
