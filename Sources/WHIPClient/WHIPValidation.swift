import Foundation
public import CapturePipeline
public import H264
import VideoCapture
import VideoProcessing
import VideoCaptureCommons
public import WebRTC

extension WHIPClient {
    /// The bearer token a publisher uses: `given`, else the contents of `file` (a regular file of at most
    /// 4 KiB, surrounding white space trimmed), else `fallback` (an environment variable's value, say); nil when
    /// there is none. A token that is empty, longer than 1024 characters or has a space or line break is a
    /// `WHIPError` with code `invalidConfiguration`, as is a file that cannot be read.
    public static func token(given: String?, file: String?, fallback: String?) throws(WHIPError) -> String? {
        var token = given ?? fallback
        if let file {
            do throws(BoundedReadFailure) {
                token = String(decoding: try readBoundedFile(file, limit: 4096), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            } catch {
                throw WHIPError(.invalidConfiguration, error.message(file, what: "token file", limit: 4096))
            }
        }
        if let t = token, t.isEmpty || t.utf8.count > 1024 || t.contains(where: { $0.isNewline || $0 == " " }) {
            throw WHIPError(.invalidConfiguration, "the WHIP token must be 1...1024 characters without spaces or line breaks")
        }
        return token
    }
}

extension WHIPOutput.Configuration {
    /// Checks the publisher's settings (`WebRTCPublisher.Configuration.validate()`, whose `WebRTCError` names
    /// the setting).
    public func validate() throws(WebRTCError) { try publisher.validate() }
}

extension WHIPOutput.Configuration {
    /// Simulcast for an encode with `settings`: the tiers `EncodeTier.plan` makes for its size (up to 3: full,
    /// half and quarter size, fewer for small pictures, as WebRTC's table), with the offer's rids set to match
    /// (`f`, `h`, `q`: largest first). Returns the tiers to give `WHIPOutput.stage(for:…tiers:)`; one tier (a
    /// picture too small for more) leaves the offer as one stream.
    public mutating func offerSimulcast(for settings: H264Encoder.Settings) -> [EncodeTier] {
        let plan = EncodeTier.plan(
            for: FrameSize(width: settings.width, height: settings.height), maxCount: 3, targetBitrate: settings.targetBitrate,
            maxBitrate: settings.effectiveMaxBitrate)
        publisher.simulcastRIDs = plan.count > 1 ? Array(["f", "h", "q"].prefix(plan.count)) : []
        return plan
    }
}

extension WHIPOutput {
    /// The stage that feeds this output from `session`, wired in one call: for a camera that delivers H.264, a
    /// `PassthroughStage` of its own access units (the offer goes with the camera's first SPS, on its own); with
    /// more than one of `tiers` (from `Configuration.offerSimulcast(for:)`), a `TieredEncodeStage` whose tiers are
    /// the simulcast layers (upright pixels; a PLI on a layer asks that tier alone); else an `EncodeStage` with
    /// `settings`, the pixels turned upright unless `rotationAsMetadata`, where the rotation stays metadata while
    /// the server accepts the video-orientation extension. Call `connect()` for the encoded stages, before the
    /// camera starts. Key-frame requests and the server's REMB go to the stage. Call once.
    public func stage(
        for session: CaptureSession, settings: H264Encoder.Settings, keyIntervalSeconds: Double?, rotationAsMetadata: Bool = true,
        tiers: [EncodeTier] = []
    ) -> any PictureStage {
        if session.selection.frameKind == .accessUnit {
            let stage = PassthroughStage(outputs: [self])
            connect(stage, maxBitrate: settings.effectiveMaxBitrate)
            return stage
        }
        session.sourceOptions.applyRotation = true
        if tiers.count > 1 {
            let tiered = TieredEncodeStage(
                tiers: tiers, settings: settings, keyIntervalSeconds: keyIntervalSeconds, outputs: layerOutputs(tiers.count))
            connect(tiered)
            return tiered
        }
        let encode = EncodeStage(settings: settings, keyIntervalSeconds: keyIntervalSeconds, outputs: [self])
        connect(encode, rotation: rotationAsMetadata ? session.outputRequests : nil)
        return encode
    }
}
