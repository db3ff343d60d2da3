// Issue 11: the H.264 writer reports what reached the kernel, frame by frame.
import Foundation
import Testing
import VideoCapture
import VideoProcessing
@testable import H264

@Test func annexBCountsFramesThatReachedTheKernel() throws {
    let p = scratch + "/frames.h264"
    try? FileManager.default.removeItem(atPath: p)
    let w = try AnnexBWriter(path: p)
    // SPS, PPS, IDR with their 4-byte start codes, as the encoder hands them over.
    var frame = EncodedFrame()
    frame.data = [0, 0, 0, 1, 0x67, 1, 2, 3, 0, 0, 0, 1, 0x68, 4, 0, 0, 0, 1, 0x65, 5, 6, 7, 8]
    frame.nalUnits = [
        NALUnit(type: .sps, offset: 4, length: 4), NALUnit(type: .pps, offset: 12, length: 2), NALUnit(type: .idr, offset: 18, length: 5),
    ]
    frame.isKeyFrame = true
    for _ in 0..<3 { try w.write(frame) }
    #expect(w.framesWritten == 3 && w.framesOnDisk == 0, "still in the buffer")
    try w.flush()
    #expect(w.framesOnDisk == 3 && w.bytesWritten == Int64(3 * frame.data.count))
    frame.data += Array(repeating: 0x11, count: 100_000) // a big frame goes straight through
    frame.nalUnits[frame.nalUnits.count - 1].length += 100_000
    try w.write(frame)
    #expect(w.framesOnDisk == 4)
    try w.close()
    #expect(FileManager.default.contents(atPath: p)?.count == Int(w.bytesWritten))
}

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
