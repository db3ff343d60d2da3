import Testing
import H264
import RTP
import CapturePipeline

/// `RTPOutput.sdp(target:configuration:parameterSets:)`: the SDP `camcap stream --sdp-only` writes before the
/// stream starts, naming the SSRCs the sender will use.
@Test func theSDPWrittenBeforehandNamesTheStreamsSSRCs() throws {
    let target = try #require(StreamTarget("127.0.0.1:5004"))
    var c = RTPSender.Configuration(host: target.host, port: target.port)
    (c.rtxPayloadType, c.videoOrientationExtensionID) = (97, 1)
    let ps = try H264Encoder.parameterSets(for: H264Encoder.Settings(width: 640, height: 360))
    let derived = target.derivedSSRCs()
    let sdp = RTPOutput.sdp(target: target, configuration: c, parameterSets: ps)
    #expect(sdp.contains("m=video 5004 RTP/AVPF 96 97") && sdp.contains("a=extmap:1 urn:3gpp:video-orientation"), "\(sdp)")
    #expect(sdp.contains("a=ssrc-group:FID \(derived.media) \(derived.rtx)"), "the derived SSRCs: \(sdp)")
    (c.ssrc, c.rtxPayloadType) = (1234, nil)
    let given = RTPOutput.sdp(target: target, configuration: c, parameterSets: ps)
    #expect(given.contains("a=ssrc:1234 cname:") && !given.contains("ssrc-group") && !given.contains("rtx/90000"), "\(given)")
}

/// `StreamTarget.senderConfiguration(ssrc:)`: a sender to the target with the SSRCs its SDP names (derived, or
/// the media one given) and the rotation in the video-orientation extension.
@Test func aTargetsSenderUsesTheSSRCsItsSDPNames() throws {
    let target = try #require(StreamTarget("[::1]:5004"))
    let c = target.senderConfiguration(), derived = target.derivedSSRCs()
    #expect(c.host == "::1" && c.port == 5004 && c.videoOrientationExtensionID == 1)
    #expect(c.ssrc == derived.media && c.rtxSSRC == derived.rtx)
    #expect(target.senderConfiguration(ssrc: 42).ssrc == 42 && target.senderConfiguration(ssrc: 42).rtxSSRC == derived.rtx)
}
