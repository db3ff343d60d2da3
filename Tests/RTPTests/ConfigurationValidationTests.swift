import Testing
import RTP

/// `RTPSender.Configuration.validate()`: the error names the setting, the value and what is valid.
@Suite struct ConfigurationValidationTests {
    @Test func senderSettingsAreChecked() throws {
        var c = RTPSender.Configuration(host: "127.0.0.1", port: 5004)
        c.feedbackFrom = ["192.0.2.7", "[::1]:6000", "127.0.0.1:5005"]
        try c.validate()
        c.dropRate = 1.5
        #expect {
            try c.validate()
        } throws: { error in
            let e = error as? RTPError
            return e?.code == .invalidConfiguration && e?.setting == "dropRate" && e?.message == "dropRate must be 0.0...1.0, got 1.5"
        }
        c.dropRate = 0
        c.localRTCPPort = 70_000
        #expect {
            try c.validate()
        } throws: { error in
            (error as? RTPError)?.message == "localRTCPPort must be 0...65535, got 70000"
        }
        c.localRTCPPort = 0
        c.feedbackFrom = ["receiver.example"]
        #expect {
            try c.validate()
        } throws: { error in
            (error as? RTPError)?.setting == "feedbackFrom" && (error as? RTPError)?.message.contains("\"receiver.example\"") == true
        }
    }
}
