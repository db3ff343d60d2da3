import Foundation
import Testing
import TestSupport

/// `camcap publish --simulcast` against servers that do not take it (#39): an answer without `a=simulcast` gets the
/// full layer alone, and a picture too small for more than one tier publishes one layer; both are said on the start
/// line and in the summary. (Janus taking the three layers: `JanusTests.simulcastLayersReachSubscribersAtTheSubstreamTheyAskFor`.)
@Suite(.serialized, .timeLimit(.minutes(2))) struct PublishSimulcastTests {
    @Test func anAnswerWithoutSimulcastOrASmallPicturePublishesOneLayerAndSaysSo() throws {
        let server = try WHIPAttackServer(name: "simulcast-refused")
        // The server answers every offer with one plain video section (no a=rid, no a=simulcast).
        let refused = try runTool(
            camcap,
            ["publish", "-d", "fixture:vivid", "-s", "1280x720", "--whip", server.a + "/answer", "--token", "T", "--simulcast", "--frames", "10"])
        #expect(refused.code == 0, "\(refused.err.suffix(800))")
        #expect(refused.err.contains("the server refused simulcast: the full layer alone (1280x720)"), "\(refused.err.suffix(800))")
        #expect(refused.out.contains("simulcast refused by the server: the full layer alone"), "\(refused.out)")
        let offer = try #require(server.requests("A").first { $0["method"] as? String == "POST" })
        #expect(offer["path"] as? String == "/answer")
        // 320x180: WebRTC's table gives one layer.
        let small = try runTool(
            camcap,
            ["publish", "-d", "fixture:vivid", "-s", "320x180", "--whip", server.a + "/answer", "--token", "T", "--simulcast", "--frames", "10"])
        #expect(small.code == 0, "\(small.err.suffix(800))")
        #expect(small.err.contains("--simulcast: one layer (a 320x180 picture gets one tier"), "\(small.err.suffix(800))")
        // A camera's own H.264 is passed through as one layer.
        let passthrough = try runTool(
            camcap,
            [
                "publish", "-d", "fixture:h264-webcam", "-s", "640x480", "--pixel-format", "H264", "--whip", server.a + "/answer", "--token", "T",
                "--simulcast", "--frames", "10",
            ])
        #expect(passthrough.code == 0, "\(passthrough.err.suffix(800))")
        #expect(
            passthrough.err.contains("--simulcast: one layer (the camera's H.264 is not re-encoded into tiers)"), "\(passthrough.err.suffix(800))")
        print("FIGURE publish --simulcast refused: \(refused.err.split(separator: "\n").first { $0.contains("refused simulcast") } ?? "-")")
    }
}
