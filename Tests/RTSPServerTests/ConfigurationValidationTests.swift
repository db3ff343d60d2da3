import Testing
import RTSPServer

/// `RTSPHub.Configuration.validate()` and the authenticator's checks: the error names the setting and the range.
@Suite struct ConfigurationValidationTests {
    private func refusal(_ change: (inout RTSPHub.Configuration) -> Void) -> RTSPError? {
        var c = RTSPHub.Configuration()
        change(&c)
        do {
            try c.validate()
            return nil
        } catch { return error }
    }

    @Test func theDefaultsAreValid() throws {
        try RTSPHub.Configuration().validate()
        try DigestAuthenticator.validate(user: "admin", realm: "camcap", nonceLifetimeNs: 300_000_000_000)
    }

    @Test func eachSettingIsNamedWithItsRange() {
        let path = refusal { $0.path = "camera" }
        #expect(path?.setting == "path" && path?.message.hasPrefix("path must be /NAME") == true)
        #expect(refusal { $0.path = "/camera/" }?.setting == "path")
        #expect(refusal { $0.udpPort = 80 }?.message == "udpPort must be 0 or 1024...65534, got 80")
        let timeout = refusal { $0.sessionTimeoutNs = 500_000_000 }
        #expect(timeout?.code == .invalidConfiguration && timeout?.setting == "sessionTimeoutNs")
        #expect(timeout?.message == "sessionTimeoutNs must be 1.0...3600.0 seconds, got 0.5")
        #expect(refusal { $0.idleTimeoutNs = .min }?.message == "idleTimeoutNs must be 1.0...86400.0 seconds, got nan")
        #expect(refusal { $0.maxSessions = 300 }?.message == "maxSessions must be 1...256, got 300")
        #expect(refusal { $0.maxConnectionsPerAddress = 0 }?.setting == "maxConnectionsPerAddress")
        #expect(refusal { $0.parserLimits.maxRequestBytes = 100 }?.message == "maxRequestBytes must be 1024...65536, got 100")
    }

    @Test func theAuthenticatorsUserRealmAndNonceLifetime() {
        for (user, realm, lifetime, setting) in [
            ("a:b", "camcap", Int64(300_000_000_000), "user"), ("", "camcap", 300_000_000_000, "user"),
            ("admin", "say \"hi\"", 300_000_000_000, "realm"), ("admin", "camcap", 0, "nonceLifetimeNs"),
        ] {
            #expect {
                try DigestAuthenticator.validate(user: user, realm: realm, nonceLifetimeNs: lifetime)
            } throws: { error in
                (error as? RTSPError)?.setting == setting && (error as? RTSPError)?.message.hasPrefix(setting) == true
            }
        }
    }

    @Test func passwordsComeFromAFileOrTheFallback() throws {
        #expect(try DigestAuthenticator.password(file: nil, fallback: nil) == nil)
        #expect(try DigestAuthenticator.password(file: nil, fallback: " s3cret\n") == "s3cret")
        #expect(throws: RTSPError.self) { try DigestAuthenticator.password(file: nil, fallback: "  ") }
        #expect {
            try DigestAuthenticator.password(file: "/nonexistent/password", fallback: "x")
        } throws: { error in
            (error as? RTSPError)?.message.contains("cannot read the password file /nonexistent/password") == true
        }
    }
}
