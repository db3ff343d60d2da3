// Issue 11: the H.264 writer reports what reached the kernel, frame by frame.
import Foundation
import Testing
import VideoCapture
import VideoProcessing
import H264
import Recording

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

/// The one flush policy of recordings (`RecordingOutput` and `AnnexBFileOutput` both take it): the first frame
/// starts the count, and a frame a second or more of capture time after the last flush hands the buffer to the
/// kernel; `.whenFull` leaves it to the owner.
@Test func theRecordingFlushPolicyFlushesOnceASecondOfCaptureTime() throws {
    var frame = EncodedFrame()
    frame.data = [0, 0, 0, 1, 0x67, 1, 2, 3, 0, 0, 0, 1, 0x68, 4, 0, 0, 0, 1, 0x65, 5, 6, 7, 8]
    frame.nalUnits = [
        NALUnit(type: .sps, offset: 4, length: 4), NALUnit(type: .pps, offset: 12, length: 2), NALUnit(type: .idr, offset: 18, length: 5),
    ]
    frame.isKeyFrame = true
    for policy in [AnnexBWriter.FlushPolicy.recording, .whenFull] {
        let p = scratch + "/flush-policy.h264"
        try? FileManager.default.removeItem(atPath: p)
        let w = try AnnexBWriter(path: p, flushPolicy: policy)
        var onDisk: [Int] = []
        // 0.5 s apart from an arbitrary start: due at 1 s and 2 s after the first frame.
        for i in 0..<5 {
            frame.timestampNs = 7_000_000_000 + Int64(i) * 500_000_000
            try w.write(frame)
            onDisk.append(w.framesOnDisk)
        }
        #expect(onDisk == (policy == .recording ? [0, 0, 3, 3, 5] : [0, 0, 0, 0, 0]), "\(policy)")
        try w.close()
        #expect(w.framesOnDisk == 5)
    }
}
