import Testing
import CapturePipeline
import WHEPServer

/// The servers' configurations check their own ranges: the error names the setting, the value and the range.
@Suite struct ConfigurationValidationTests {
    @Test func limitsNameTheSettingAndRange() throws {
        try ViewerHub.Limits().validate()
        var limits = ViewerHub.Limits()
        limits.maxPendingPerAddress = 0
        #expect {
            try limits.validate()
        } throws: { error in
            let e = error as? ServerError
            return e?.code == .invalidConfiguration && e?.setting == "maxPendingPerAddress"
                && e?.message == "maxPendingPerAddress must be 1...256, got 0"
        }
    }

    @Test func stillsSettingsNameTheSettingAndRange() throws {
        try JPEGFeed.Configuration().validate()
        let cases: [(String, (inout JPEGFeed.Configuration) -> Void, String)] = [
            ("cacheWindowNs", { $0.cacheWindowNs = 61_000_000_000 }, "cacheWindowNs must be 0.0...60.0 seconds, got 61.0"),
            ("cacheWindowNs", { $0.cacheWindowNs = .min }, "cacheWindowNs must be 0.0...60.0 seconds, got nan"),
            ("maxClients", { $0.maxClients = 1025 }, "maxClients must be 0...1024, got 1025"),
            ("maxClientsPerAddress", { $0.maxClientsPerAddress = 0 }, "maxClientsPerAddress must be 1...1024, got 0"),
            ("defaultFrameRate", { $0.defaultFrameRate = .nan }, "defaultFrameRate must be 0.1...240, got nan"),
            ("quality", { $0.quality = 0 }, "quality must be 1...100, got 0"),
            ("maxSide", { $0.maxSide = 8 }, "maxSide must be 16...16384, got 8"),
            ("stallTimeoutNs", { $0.stallTimeoutNs = 0 }, "stallTimeoutNs must be 0.5...600.0 seconds, got 0.0"),
            ("snapshotTimeoutNs", { $0.snapshotTimeoutNs = 61_000_000_000 }, "snapshotTimeoutNs must be 0.1...60.0 seconds, got 61.0"),
            ("maxPendingSnapshots", { $0.maxPendingSnapshots = 0 }, "maxPendingSnapshots must be 1...4096, got 0"),
        ]
        for (setting, change, message) in cases {
            var c = JPEGFeed.Configuration()
            change(&c)
            #expect {
                try c.validate()
            } throws: { error in
                let e = error as? ServerError
                return e?.code == .invalidConfiguration && e?.setting == setting && e?.message == message
            }
        }
    }

    @Test func policyTimeoutsAreInSeconds() throws {
        var policy = try ServerPolicy(token: nil)
        try policy.validate()
        policy.requestTimeoutNs = 100_000_000
        #expect {
            try policy.validate()
        } throws: { error in
            (error as? ServerError)?.setting == "requestTimeoutNs"
                && (error as? ServerError)?.message == "requestTimeoutNs must be 0.5...3600.0 seconds, got 0.1"
        }
        policy.requestTimeoutNs = .max // what nanoseconds(seconds: .infinity) gives
        #expect(throws: ServerError.self) { try policy.validate() }
        policy.requestTimeoutNs = 10_000_000_000
        policy.allowedOrigins = ["https://app.example", "https://App.example/path"]
        #expect {
            try policy.validate()
        } throws: { error in
            (error as? ServerError)?.setting == "allowedOrigins" && (error as? ServerError)?.message.contains("\"https://App.example/path\"") == true
        }
        policy.allowedOrigins = ["https://app.example"]
        policy.hostNames = ["camera.local", "bad host"]
        #expect {
            try policy.validate()
        } throws: { error in
            (error as? ServerError)?.setting == "hostNames"
        }
        policy.hostNames = ["camera.local", "::1"]
        policy.maxConnectionsPerNetwork = 70_000
        #expect {
            try policy.validate()
        } throws: { error in
            (error as? ServerError)?.message == "maxConnectionsPerNetwork must be 1...65536, got 70000"
        }
    }

    /// Origins given to the policy are taken as browsers send them; what is no origin is kept for `validate()`.
    @Test func theOriginsGivenAreLowerCasedAndTheRestRefused() throws {
        let policy = try ServerPolicy(token: nil, allowedOrigins: ["HTTPS://App.Example:8443", "https://app.example:8443"])
        #expect(policy.allowedOrigins == ["https://app.example:8443"])
        try policy.validate()
        let bad = try ServerPolicy(token: nil, allowedOrigins: ["https://App.example/path"])
        #expect(bad.allowedOrigins == ["https://App.example/path"])
        #expect(throws: ServerError.self) { try bad.validate() }
    }

    @Test func broadcastTiersAndTheEncoderRecipe() throws {
        try WHEPBroadcast.Configuration().validate()
        #expect {
            try WHEPBroadcast.Configuration(tiers: 4).validate()
        } throws: { error in
            (error as? ServerError)?.setting == "tiers" && (error as? ServerError)?.message == "tiers must be 1...3, got 4"
        }
        #expect {
            try WHEPBroadcast.Configuration(tiers: 2, adaptsToBandwidth: true).validate()
        } throws: { error in
            (error as? ServerError)?.setting == "adaptsToBandwidth"
        }
        #expect {
            try WHEPBroadcast.Configuration(encoder: .init(bitrateKbps: 5)).validate()
        } throws: { error in
            (error as? PipelineError)?.setting == "bitrateKbps"
        }
    }

    @Test func theSendSideEstimateFitsTheEncoder() {
        let e = WHEPBroadcast.Configuration(encoder: .init(bitrateKbps: 1500)).sendSideEstimation
        #expect(e.minBitrate == 50_000 && e.maxBitrate == 2_250_000 && e.startBitrate == 1_000_000)
        let capped = WHEPBroadcast.Configuration(encoder: .init(bitrateKbps: 600, maxBitrateKbps: 800)).sendSideEstimation
        #expect(capped.maxBitrate == 800_000 && capped.startBitrate == 600_000)
    }
}
