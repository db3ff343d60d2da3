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

extension WHIPOutput {
    /// The stage that feeds this output from `session`, wired in one call: for a camera that delivers H.264, a
    /// `PassthroughStage` of its own access units (the offer goes with the camera's first SPS, on its own); else
    /// an `EncodeStage` with `settings`, the pixels turned upright unless `rotationAsMetadata`, where the rotation
    /// stays metadata while the server accepts the video-orientation extension (call `connect()` then, before
    /// the camera starts). Key-frame requests and the server's REMB go to the stage. Call once.
    public func stage(
        for session: CaptureSession, settings: H264Encoder.Settings, keyIntervalSeconds: Double?, rotationAsMetadata: Bool = true
    ) -> any PictureStage {
        if session.selection.pixelFormat == .h264 {
            let stage = PassthroughStage(outputs: [self])
            connect(stage, maxBitrate: settings.effectiveMaxBitrate)
            return stage
        }
        let encode = EncodeStage(settings: settings, keyIntervalSeconds: keyIntervalSeconds, outputs: [self])
        session.sourceOptions.applyRotation = true
        connect(encode, rotation: rotationAsMetadata ? session.outputRequests : nil)
        return encode
    }
}
