// The refusals the guides (docs/) and the DocC articles promise, each with what keeps it (#54). Every sentence
// of those files that says something "is refused", "are refused", "refused by name" or "refuses … by name" must
// be listed here (RefusalPromiseTests finds them), so a new promise cannot go unchecked:
// - `.call`: the API called the way an app calls it; it must throw an error whose description contains the text;
// - `.test`: a protocol-level refusal (an HTTP status, a TLS alert, a CLI option) kept by a test of another target,
//   named by file and function (the function must exist).
import Foundation
import VideoCapture
import VideoProcessing
import FixtureCameras
import CapturePipeline
import H264

/// One promise: the sentence (its start, whitespace collapsed) in `file`, and what keeps it.
struct RefusalPromise {
    enum Check {
        case call(String, () async throws -> Void)
        case test(file: String, function: String)
    }
    var file: String
    var sentence: String
    var checks: [Check]
}

/// The promises, in the order of their files.
func refusalPromises() -> [RefusalPromise] {
    let size = FrameSize(width: 640, height: 480)
    func select(_ device: String, _ size: FrameSize = size, limit: Fraction = 30, formats: [PixelFormat] = []) throws {
        let capturer = CameraVideoCapturer(providers: [FixtureCameraProvider()])
        _ = try capturer.selectFormat(for: try capturer.device(device), targetSize: size, fpsLimit: limit, pixelFormats: formats)
    }
    func session(_ change: (inout CaptureSession.Configuration) -> Void) throws {
        if let e = sessionRefusal(change) { throw e }
    }
    func encode(onH264 stage: (CaptureSession) throws -> any PictureStage) async throws {
        let s = try fixtureSession("fixture:h264-webcam", pixelFormats: [.h264])
        _ = try await s.run(stages: [try stage(s)])
    }
    let encodeStage: (CaptureSession) throws -> any PictureStage = { s in
        EncodeStage(
            settings: EncodeStage.baseSettings(for: s.selection, bitrateKbps: 500, maxBitrateKbps: nil), keyIntervalSeconds: 2,
            outputs: [try RecordingOutput(.init(path: work + "/promise-\(UUID().uuidString).mp4"))])
    }
    let passthroughOnMJPG: () async throws -> Void = {
        let s = try fixtureSession("fixture:uvc-webcam", pixelFormats: [.mjpeg])
        _ = try await s.run(stages: [PassthroughStage(outputs: [try RecordingOutput(.init(path: work + "/promise-\(UUID().uuidString).h264"))])])
    }
    let recorderNeedsPictures: () async throws -> Void = {
        var c = Recorder.Configuration(output: .init(path: work + "/promise-\(UUID().uuidString).mp4"))
        c.applyRotation = true
        _ = try Recorder(session: try fixtureSession("fixture:h264-webcam", pixelFormats: [.h264]), configuration: c)
    }
    let parseTooLarge: () async throws -> Void = {
        _ = try CameraDescription.parse(
            #"{"name": "big", "formats": [{"pixelFormat": "YUYV", "sizes": [{"width": 99999, "height": 10, "fps": [30]}]}]}"#, file: "big.json")
    }
    let bayer = PixelFormat(rawValue: 0x3138_4142) // BA81
    let negotiation: [RefusalPromise.Check] = [
        .call("target size 0x0 must be positive") { try select("fixture:uvc-webcam", FrameSize(width: 0, height: 0)) },
        .call("frame-rate limit must be above 0 and at most 1000, got 0") { try select("fixture:uvc-webcam", limit: 0) },
        .call("frame-rate limit must be above 0 and at most 1000, got 5000") {
            let capturer = CameraVideoCapturer(providers: [FixtureCameraProvider()])
            try await capturer.startCapture(device: try capturer.device("fixture:uvc-webcam"), targetSize: size, fpsLimit: Fraction(5000))
        },
        .call("fpsLimit must be above 0 and at most 1000, got 5000") { try session { $0.fpsLimit = Fraction(5000) } },
        .call("ZZZZ is not a pixel format this package knows") { try select("fixture:uvc-webcam", formats: [PixelFormat(rawValue: 0x5a5a_5a5a)]) },
        .call("BA81 (8-bit Bayer BGBG/GRGR) cannot be converted to I420") { try select("fixture:continuous", formats: [bayer]) },
        .call("offers none of the pixel formats asked for (NV12); it offers: MJPG, YUYV") { try select("fixture:uvc-webcam", formats: [.nv12]) },
    ]
    let stages: [RefusalPromise.Check] = [
        .call("EncodeStage takes pictures, and fixture:h264-webcam delivers its own H.264") { try await encode(onH264: encodeStage) },
        .call("Y4MStage takes pictures") { try await encode { _ in try Y4MStage(path: work + "/promise-\(UUID().uuidString).y4m") } },
        .call("PassthroughStage takes a camera's own H.264, and fixture:uvc-webcam delivers pictures (MJPG)", passthroughOnMJPG),
    ]
    return [
        RefusalPromise(
            file: "docs/cameras.md", sentence: "Nonsense is refused by name before a camera starts",
            checks: negotiation + [
                .call("frames must be 1...100000000, got -5") { try session { $0.frames = -5 } },
                .call("no fixture file at /nowhere/cam.json") { try session { $0.device = "/nowhere/cam.json" } },
            ]),
        RefusalPromise(
            file: "docs/camcap.md", sentence: "Segments need file names, and only one output can be standard output",
            checks: [
                .call("segments need a file pattern: standard output (-) is one stream") {
                    var r = RecordingOutput.Configuration(path: "-")
                    r.segmentSeconds = 2
                    try r.validate()
                },
                .test(file: "Tests/CamcapTests/PipeTests.swift", function: "aRecordingGoesToStandardOutputAsAnnexBOrFragmentedMP4"),
            ]),
        RefusalPromise(
            file: "docs/cameras.md", sentence: "The trace replays the mode it recorded only: another size or format is refused",
            checks: [.test(file: "Tests/CamcapTests/ProcessingCLITests.swift", function: "aRecordedTraceReplaysTheSamePictures")]),
        RefusalPromise(
            file: "docs/cameras.md", sentence: "Its access units are then **passed through**",
            checks: [.test(file: "Tests/CamcapTests/PassthroughTests.swift", function: "whatNeedsPicturesIsRefusedByName")]),
        RefusalPromise(
            file: "docs/cameras.md", sentence: "What needs pictures cannot work with a camera's own stream",
            checks: [
                .call("applyRotation needs decoded pictures", recorderNeedsPictures),
                .test(file: "Tests/CamcapTests/PassthroughTests.swift", function: "whatNeedsPicturesIsRefusedByName"),
            ]),
        RefusalPromise(file: "docs/cameras.md", sentence: "In the library, `run(stages:)` asks every stage", checks: stages),
        RefusalPromise(
            file: "docs/cameras.md", sentence: "Single-planar cameras go through the same format check",
            checks: [.test(file: "Tests/V4L2CaptureTests/BufferSetTests.swift", function: "aSinglePlanarStrideTooShortForItsLinesIsRefusedByName")]),
        RefusalPromise(
            file: "Sources/V4L2Capture/V4L2Capture.docc/V4L2Capture.md", sentence: "**One buffer model.**",
            checks: [.test(file: "Tests/V4L2CaptureTests/BufferSetTests.swift", function: "aSinglePlanarStrideTooShortForItsLinesIsRefusedByName")]),
        RefusalPromise(
            file: "docs/record.md", sentence: "The fixed directory must exist",
            checks: [
                .call("/nonexistent-dir-for-segments") {
                    var c = RecordingOutput.Configuration(path: "/nonexistent-dir-for-segments/%Y%m%d/cam-%H%M%S.mp4")
                    c.segmentSeconds = 60
                    _ = try RecordingOutput(c)
                }
            ]),
        RefusalPromise(
            file: "docs/encoders.md", sentence: "A node that is not an encoder, or no encoder at all",
            checks: [.test(file: "Tests/CamcapTests/EncoderCLITests.swift", function: "noEncoder")]),
        RefusalPromise(
            file: "docs/publish.md", sentence: "An answer with no other candidate is refused",
            checks: [.test(file: "Tests/WebRTCTests/PublisherTests.swift", function: "candidateAddressesThatAreNotUnicastHostsAreRefused")]),
        RefusalPromise(
            file: "docs/security.md", sentence: "ICE checks go only to unicast host addresses",
            checks: [.test(file: "Tests/CamcapTests/PublishSecurityTests.swift", function: "candidatesThatAreNotUnicastHostsGetNoPacket")]),
        RefusalPromise(
            file: "docs/library.md", sentence: "Its control plane, `encoder.control`",
            checks: [.call("bitrate 0 bit/s is out of range") { try EncoderControl().setBitrate(0) }]),
        RefusalPromise(
            file: "docs/operations.md", sentence: "Limits (`CaptureLimits`)",
            checks: [
                .call("a directory") { _ = try FixtureCameraProvider().device(for: work) },
                .call("is too large", parseTooLarge),
            ]),
        RefusalPromise(
            file: "docs/processing.md", sentence: "**A socket left by a process that is gone is replaced**",
            checks: [
                .call("another tap is running there") {
                    let path = work + "/promise-tap-\(UUID().uuidString.prefix(8)).sock"
                    let first = try FrameTap(socketPath: path)
                    defer { first.close() }
                    _ = try FrameTap(socketPath: path)
                },
                .call("something that is not a socket is there") {
                    let path = work + "/promise-tap-file"
                    _ = FileManager.default.createFile(atPath: path, contents: Data("x".utf8))
                    _ = try FrameTap(socketPath: path)
                },
                .test(file: "Tests/CamcapTests/FrameTapCLITests.swift", function: "aRunningTapIsRefused"),
            ]),
        RefusalPromise(
            file: "docs/operations.md", sentence: "**Concurrent writers** of one file are refused",
            checks: [
                .call("is being written by another writer") {
                    let path = work + "/promise-locked.mp4"
                    let first = try RecordingOutput(.init(path: path))
                    defer { first.discard() }
                    _ = try RecordingOutput(.init(path: path))
                }
            ]),
        RefusalPromise(
            file: "docs/record.md", sentence: "`Recorder` (CapturePipeline) is what `record` runs",
            checks: [.call("applyRotation needs decoded pictures", recorderNeedsPictures)]),
        RefusalPromise(file: "docs/record.md", sentence: "A stage that cannot take the camera's frames", checks: stages),
        RefusalPromise(
            file: "docs/rtsp.md", sentence: "The challenge offers `qop=\"auth\"`",
            checks: [
                .test(file: "Tests/RTSPServerTests/RTSPParserTests.swift", function: "aNonceIsBoundToItsClientItsURIAndItsCount"),
                .test(file: "Tests/CamcapTests/RTSPAbuseTests.swift", function: "digestGuessingIsThrottledAndAnswersDoNotReplay"),
            ]),
        RefusalPromise(
            file: "docs/rtsp.md", sentence: "Guessing costs time",
            checks: [
                .test(file: "Tests/RTSPServerTests/RTSPParserTests.swift", function: "theFailureBudgetsLimitTheGuessesCheckedPerAddressAndInAll")
            ]),
        RefusalPromise(
            file: "docs/security.md", sentence: "**Origins and names.**",
            checks: [.test(file: "Tests/CamcapTests/SecurityTests.swift", function: "aPageOfAnotherOriginGetsNothing")]),
        RefusalPromise(
            file: "docs/security.md", sentence: "A request whose `Host` is not one of the server's names",
            checks: [
                .test(file: "Tests/CamcapTests/SecurityTests.swift", function: "aForeignHostIsRefused"),
                .test(file: "Tests/WHEPServerTests/ServeSecurityTests.swift", function: "aServerAnswersToItsOwnNamesOnly"),
            ]),
        RefusalPromise(
            file: "docs/security.md", sentence: "TLS 1.2 is the minimum",
            checks: [.test(file: "Tests/CamcapTests/SlowRequestTests.swift", function: "httpsIsTLS12AtLeastWithAEADSuitesOnly")]),
        RefusalPromise(
            file: "docs/security.md", sentence: "`Expect: 100-continue` gets `100 Continue`",
            checks: [.test(file: "Tests/CamcapTests/SecurityTests.swift", function: "offersThatCanNeverConnectAreRefusedAndExpectContinueIsAnswered")]
        ),
        RefusalPromise(
            file: "docs/security.md", sentence: "The token goes to the endpoint's origin",
            checks: [.test(file: "Tests/CamcapTests/PublishSecurityTests.swift", function: "theTokenStaysOnTheEndpointsOrigin")]),
        RefusalPromise(
            file: "Sources/CapturePipeline/CapturePipeline.docc/CapturePipeline.md",
            sentence: "A camera that delivers H.264 itself hands its access units to ``PassthroughStage`` instead", checks: stages),
        RefusalPromise(
            file: "Sources/FixtureCameras/FixtureCameras.docc/NegotiationTesting.md", sentence: "Sizes and rates beyond `CaptureLimits` are refused",
            checks: [
                .call("is too large", parseTooLarge)
            ]),
        RefusalPromise(
            file: "docs/cameras.md", sentence: "`select`, `--pixel-format`, `--size` and `--fps-limit` negotiate them by the usual rules",
            checks: [.test(file: "Tests/PipeWireTests/PipeWireCameraTests.swift", function: "aFormatTheNodeDoesNotOfferIsRefused")]),
        RefusalPromise(
            file: "Sources/PipeWireCapture/PipeWireCapture.docc/PipeWireCapture.md",
            sentence: "The usual negotiation (sizes, rates, `--pixel-format`)",
            checks: [.test(file: "Tests/PipeWireTests/PipeWireCameraTests.swift", function: "aFormatTheNodeDoesNotOfferIsRefused")]),
        RefusalPromise(
            file: "Sources/VideoCapture/VideoCapture.docc/GettingStarted.md", sentence: "A target with a side ≤ 0, a limit ≤ 0 or above 1000",
            checks: negotiation),
        RefusalPromise(
            file: "Sources/WHEPServer/WHEPServer.docc/ServingAndStreaming.md", sentence: "**Host.** A request whose `Host`",
            checks: [.test(file: "Tests/WHEPServerTests/ServeSecurityTests.swift", function: "aServerAnswersToItsOwnNamesOnly")]),
        RefusalPromise(
            file: "Sources/WHEPServer/WHEPServer.docc/ServingAndStreaming.md", sentence: "**Origin.** A browser request from another site's page",
            checks: [.test(file: "Tests/CamcapTests/SecurityTests.swift", function: "aPageOfAnotherOriginGetsNothing")]),
        RefusalPromise(
            file: "Sources/WHIPClient/WHIPClient.docc/WHIPClient.md", sentence: "The HTTP side runs on SwiftNIO",
            checks: [
                .test(file: "Tests/CamcapTests/PublishSecurityTests.swift", function: "theTokenStaysOnTheEndpointsOrigin"),
                .test(file: "Tests/CamcapTests/PublishSecurityTests.swift", function: "aHugeAnswerIsCutAt64KiB"),
            ]),
    ]
}
