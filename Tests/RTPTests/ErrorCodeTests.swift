import Testing
import VideoCapture
import RTP

/// The parse errors have codes like every other public error (#38).
@Test func parseErrorsHaveCodes() {
    let sdp = #expect(throws: SDPParseError.self) { try SDP.parse("v=0\r\nthis is not sdp\r\n") }
    #expect(sdp?.code == .malformed && sdp?.line == 2, "\(String(describing: sdp))")
    let bytes: [UInt8] = [0x80, 200, 0, 1, 0, 0, 0, 1] // a sender report claiming 8 bytes, shorter than one
    let rtcp = #expect(throws: RTCPParseError.self) { try bytes.withUnsafeBytes { try RTCPPacket.parseCompound($0) } }
    #expect(rtcp?.code == .malformed && rtcp?.offset == 0, "\(String(describing: rtcp))")
}
