import ArgumentParser
import Foundation
import VideoCapture
import VideoProcessing
import H264

/// Range checks for command-line values, shared by the commands' `validate()`: every number the user types is
/// checked before any arithmetic on it, and the message names the option, the value and the valid range.
/// A numeric IPv4 or IPv6 address (`--candidate`, `--rtcp-from`).
func isIPAddress(_ s: String) -> Bool {
    var a4 = in_addr(), a6 = in6_addr()
    return inet_pton(AF_INET, s, &a4) == 1 || inet_pton(AF_INET6, s, &a6) == 1
}

enum CLIRange {
    /// A size option (`--size`, `--scale`): within `CaptureLimits` (16384 per side, 64 Mpx).
    static func size(_ s: FrameSize?, _ option: String) throws {
        guard let s else { return }
        if let problem = CaptureLimits.problem(with: s) { throw ValidationError("\(option): \(problem)") }
    }

    /// A count of frames (`--frames`, `--snapshot-every`, `--keyint`): 1...`max`.
    static func count(_ n: Int?, _ option: String, max: Int = 100_000_000) throws {
        guard let n else { return }
        guard (1...max).contains(n) else { throw ValidationError("\(option) must be 1...\(max), got \(n)") }
    }

    /// Seconds (`--duration`, `--keyint-seconds`): finite, above 0 and at most `max` (no "inf", no 1e300).
    static func seconds(_ s: Double?, _ option: String, max: Double) throws {
        guard let s else { return }
        guard s.isFinite, s > 0, s <= max else { throw ValidationError("\(option) must be above 0 and at most \(Int(max)) seconds, got \(s)") }
    }

    /// The options `preview` and `record` share (`CaptureOptions`).
    static func capture(_ c: CaptureOptions) throws {
        try size(c.size, "--size")
        try count(c.frames, "--frames")
        try seconds(c.duration, "--duration", max: 31 * 24 * 3600)
    }

    /// What `record` will ask of the encoder, checked before any camera or file is touched: the settings that
    /// do not depend on the negotiated size go through `H264Encoder.Settings.validate()` (OpenH264's limits)
    /// with a size the encoder accepts; the size itself is checked again once negotiation has picked it.
    static func encoder(
        bitrateKbps: Int, maxBitrateKbps: Int?, keyint: Int?, keyintSeconds: Double?, threads: Int, maxNalSize: Int?,
        fpsLimit: Double
    ) throws {
        guard (10...100_000).contains(bitrateKbps) else { throw ValidationError("--bitrate must be 10...100000 kbps, got \(bitrateKbps)") }
        if let m = maxBitrateKbps {
            guard (bitrateKbps...200_000).contains(m) else {
                throw ValidationError("--max-bitrate must be \(bitrateKbps)...200000 kbps (at least --bitrate), got \(m)")
            }
        }
        try count(keyint, "--keyint", max: 100_000)
        // At most 240 fps (OpenH264's limit) × 400 s = 96,000 frames: within the encoder's 100,000 whatever rate
        // the camera applies.
        try seconds(keyintSeconds, "--keyint-seconds", max: 400)
        guard (1...4).contains(threads) else { throw ValidationError("--threads must be 1...4, got \(threads)") }
        var s = H264Encoder.Settings(width: 640, height: 480)
        s.maxFrameRate = Swift.max(1, Swift.min(fpsLimit, 240)) // the applied rate is checked once negotiated
        s.targetBitrate = bitrateKbps * 1000
        s.maxBitrate = maxBitrateKbps.map { $0 * 1000 }
        s.keyFrameInterval = keyint ?? keyintSeconds.map { Swift.max(1, Int(($0 * s.maxFrameRate).rounded())) }
        s.threads = threads
        if let n = maxNalSize { s.sliceMode = .maxNALSize(n) }
        do { try s.validate() } catch {
            let option =
                error.setting == "sliceMode"
                ? "--max-nal-size" : error.setting == "keyFrameInterval" ? "--keyint/--keyint-seconds" : "encoder settings"
            throw ValidationError("\(option): \(error.message)")
        }
    }
}
