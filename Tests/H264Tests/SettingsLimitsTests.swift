// The encoder's settings at their limits: refused with a message, never a trap; what validate() accepts, OpenH264 accepts.
import Testing
import VideoCapture
@testable import H264

@Test func settingsWithExtremeValuesAreRefusedNotTrapped() {
    var s = H264Encoder.Settings(width: 640, height: 480)
    s.maxFrameRate = .infinity
    #expect(s.effectiveKeyFrameInterval == 1_000_000_000)
    #expect(throws: EncoderError.self) { try s.validate() }
    s.maxFrameRate = .nan
    #expect(s.effectiveKeyFrameInterval == 1)
    #expect(throws: EncoderError.self) { try s.validate() }
    s = H264Encoder.Settings(width: 640, height: 480)
    s.targetBitrate = .max
    #expect(s.effectiveMaxBitrate == .max)
    #expect(throws: EncoderError.self) { try s.validate() }
    s = H264Encoder.Settings(width: 640, height: 480)
    s.sliceMode = .maxNALSize(419)
    #expect(throws: EncoderError.self) { try s.validate() }
    s.sliceMode = .maxNALSize(.max)
    let e = #expect(throws: EncoderError.self) { try s.validate() }
    #expect(e?.message == "max NAL size \(Int.max) is out of range: 420...65535 bytes")
}

/// What `validate()` accepts, OpenH264 accepts (it refused 200 at 1280x720 once the camera had started): the
/// max-NAL-size bounds at the smallest, a common and the largest size.
@Test(arguments: [420, 1200, 65535])
func everyMaxNALSizeValidateAcceptsOpenH264Accepts(_ n: Int) throws {
    for (w, h) in [(16, 16), (1280, 720), (4096, 2304)] {
        var s = H264Encoder.Settings(width: w, height: h)
        s.sliceMode = .maxNALSize(n)
        try s.validate()
        let enc = try H264Encoder(settings: s)
        let f = try enc.encode(I420Buffer(width: w, height: h), timestampNs: 0)
        #expect(f.isKeyFrame, "\(w)x\(h) max NAL \(n)")
        if w > 16 { #expect(f.nalUnits.allSatisfy { $0.length <= n }, "\(w)x\(h) max NAL \(n)") } // one macroblock cannot be split
        enc.close()
    }
}
