import Foundation
public import VideoCapture
import H264

extension CaptureSession.Configuration {
    /// Checks what a user gives, before any camera is opened: `size` within `CaptureLimits`, `fpsLimit` (above 0,
    /// at most 1000), `pixelFormats` (each converted to I420, or H264), `frames` (1...100,000,000), `durationNs`
    /// (above 0, at most 31 days; not with `frames`) and `idleReleaseNs` (0.1...86400 s). `CaptureSession.init`
    /// calls it first. A refusal is a `PipelineError` with code `invalidConfiguration` whose `setting` names the
    /// member and whose message gives the value and the valid range. The frame-rate limit and the pixel formats
    /// are checked as negotiation checks them (`FormatSelector.problem(withFpsLimit:shown:)`,
    /// `FormatSelector.problem(withPixelFormats:)`), as are the text parsers `fpsLimit(parsing:)` and
    /// `pixelFormats(parsing:)`.
    public func validate() throws(PipelineError) {
        try PipelineError.refuse([
            ("size", CaptureLimits.problem(with: size).map { "size: \($0)" }),
            ("fpsLimit", FormatSelector.problem(withFpsLimit: fpsLimit).map { "fpsLimit \($0)" }),
            ("pixelFormats", FormatSelector.problem(withPixelFormats: pixelFormats).map { "pixelFormats: \($0)" }),
            ("frames", frames.flatMap { SettingCheck.range("frames", $0, 1...100_000_000) }),
            (
                "durationNs",
                durationNs.flatMap {
                    $0 > 0 && $0 <= 31 * 86_400 * 1_000_000_000
                        ? nil : "durationNs must be above 0 and at most 2678400 seconds (31 days), got \(SettingCheck.shown($0))"
                }
            ),
            ("frames", frames != nil && durationNs != nil ? "frames and durationNs: give one, not both" : nil),
            ("idleReleaseNs", idleReleaseNs.flatMap { SettingCheck.seconds("idleReleaseNs", $0, 0.1...86_400) }),
        ])
    }
}

extension EncodeStage.Configuration {
    /// Checks the recipe before a camera is opened or a file claimed: `bitrateKbps` (10...100000),
    /// `maxBitrateKbps` (the target...200000), the key-frame interval (1...100000 frames, or above 0 and at most
    /// 400 s: at 240 fps within the encoder's 100,000 frames), `threads` (1...4), then what OpenH264 takes
    /// (`H264Encoder.Settings.validate()`: slices) at `frameRate` (clamped to 1...240; the rate the camera applies
    /// is checked again by `settings(for:)`). A refusal is a `PipelineError` with code `invalidConfiguration`
    /// whose `setting` names the member ("keyIntervalSeconds" for `.seconds`, "keyFrameInterval" for `.frames`).
    public func validate(frameRate: Double = 30) throws(PipelineError) {
        var frames: Int?, seconds: Double?
        switch keyFrameInterval {
        case .frames(let n): frames = n
        case .seconds(let s): seconds = s
        }
        try PipelineError.refuse([
            ("bitrateKbps", SettingCheck.range("bitrateKbps", bitrateKbps, 10...100_000, unit: "kbps")),
            (
                "maxBitrateKbps",
                maxBitrateKbps.flatMap {
                    (bitrateKbps...200_000).contains($0)
                        ? nil : "maxBitrateKbps must be \(bitrateKbps)...200000 kbps (at least bitrateKbps), got \($0)"
                }
            ),
            ("keyFrameInterval", frames.flatMap { SettingCheck.range("keyFrameInterval", $0, 1...100_000) }),
            (
                "keyIntervalSeconds",
                seconds.flatMap { $0.isFinite && $0 > 0 && $0 <= 400 ? nil : "keyIntervalSeconds must be above 0 and at most 400 seconds, got \($0)" }
            ),
            ("threads", SettingCheck.range("threads", threads, 1...4)),
        ])
        var s = H264Encoder.Settings(width: 640, height: 480)
        s.maxFrameRate = frameRate.isNaN ? 30 : Swift.max(1, Swift.min(frameRate, 240))
        s.targetBitrate = bitrateKbps * 1000
        s.maxBitrate = maxBitrateKbps.map { $0 * 1000 }
        s.keyFrameInterval = frames ?? seconds.map { Swift.max(1, Int(($0 * s.maxFrameRate).rounded())) }
        s.threads = threads
        s.sliceMode = sliceMode
        do { try s.validate() } catch {
            let setting =
                error.setting == "keyFrameInterval" ? (frames == nil ? "keyIntervalSeconds" : "keyFrameInterval") : error.setting ?? "encoder"
            throw PipelineError(.invalidConfiguration, "\(setting): \(error.message)", setting: setting)
        }
    }
}

extension CaptureSession.Configuration {
    /// A frame-rate limit (`fpsLimit`) from what a user types: "30", "12.5", "29.97" (= 30000/1001) or
    /// "30000/1001", above 0 and at most 1000 fps. Anything else is a `PipelineError` with code
    /// `invalidConfiguration` and setting "fpsLimit", quoting the text.
    public static func fpsLimit(parsing text: String) throws(PipelineError) -> Fraction {
        guard let f = Fraction(rate: text) else {
            throw PipelineError(
                .invalidConfiguration, "fpsLimit expects a rate such as 30, 12.5, 29.97 or 30000/1001, got \"\(text.prefix(40))\"",
                setting: "fpsLimit")
        }
        if let problem = FormatSelector.problem(withFpsLimit: f, shown: String(text.prefix(40))) {
            throw PipelineError(.invalidConfiguration, "fpsLimit \(problem)", setting: "fpsLimit")
        }
        return f
    }

    /// The pixel formats wanted (`pixelFormats`) from "YUYV,MJPG": at most 32 FourCCs, in order of preference
    /// (repeats dropped), each one known and converted to I420, or H.264 (a camera's own stream, passed through).
    /// Anything else is a `PipelineError` with code `invalidConfiguration` and setting "pixelFormats", naming the entry.
    public static func pixelFormats(parsing text: String) throws(PipelineError) -> [PixelFormat] {
        let parts = text.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        guard parts.count <= 32 else {
            throw PipelineError(.invalidConfiguration, "pixelFormats takes at most 32 FourCCs, got \(parts.count)", setting: "pixelFormats")
        }
        var formats: [PixelFormat] = []
        for p in parts {
            guard p.count == 4 || (p.count == 7 && p.hasSuffix("-BE")), let f = PixelFormat(fourcc: p) else {
                throw PipelineError(
                    .invalidConfiguration,
                    "pixelFormats: \"\(p.prefix(16))\" is not a FourCC this package knows (four characters, such as YUYV, MJPG, NV12)",
                    setting: "pixelFormats")
            }
            if let problem = FormatSelector.problem(withPixelFormats: [f]) {
                throw PipelineError(.invalidConfiguration, "pixelFormats: \(problem)", setting: "pixelFormats")
            }
            if !formats.contains(f) { formats.append(f) }
        }
        return formats
    }
}
