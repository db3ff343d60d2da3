import Testing
import VideoCapture
import VideoProcessing

// The example processors (#50): the capture-time overlay, read back from the picture, and the region crop.

@Test(
    "the time overlay shows the frame's capture time to the millisecond, and reads back from the picture",
    arguments: [(320, 240), (640, 480), (1280, 720)])
func timeOverlayReadsBack(size: (Int, Int)) throws {
    let (w, h) = size
    let overlay = TimeOverlay()
    let input = pattern(w, h)
    let before = input.packedBytes()
    for ts: Int64 in [0, 1_234_567_891, 98_765_432_109_876, 33_366_666] {
        let out = try overlay.process(input, frame: VideoFrame(buffer: input.buffer, timestampNs: ts, sequence: 1))
        #expect(TimeOverlay.read(luma: out.dataY, stride: out.strideY, width: w, height: h) == ts / 1_000_000)
        // Outside the box, the picture is the input's.
        let b = TimeOverlay.box(forHeight: h)
        for r in stride(from: b.y + b.height + 2, to: h, by: 7) {
            for x in stride(from: 0, to: w, by: 5) { #expect(out.dataY[r * out.strideY + x] == input.dataY[r * input.strideY + x]) }
        }
    }
    // The input (shared with other stages) is not written.
    #expect(input.packedBytes() == before)
    #expect(TimeOverlay.read(luma: input.dataY, stride: input.strideY, width: w, height: h) == nil)
}

@Test func timeOverlayTextAndTooSmallPictures() throws {
    #expect(TimeOverlay.text(timestampNs: 1_234_567_891) == "         1.234")
    #expect(TimeOverlay.text(timestampNs: -5) == "         0.000")
    #expect(TimeOverlay.text(timestampNs: .max) == "9223372036.854")
    // A picture smaller than the box comes back as it is.
    let tiny = pattern(64, 32)
    let out = try TimeOverlay().process(tiny, frame: VideoFrame(buffer: tiny.buffer, timestampNs: 5, sequence: 1))
    #expect(out.dataY == tiny.dataY)
}

@Test func theTimeOverlayAllocatesNoPicturePerFrame() throws {
    let overlay = TimeOverlay()
    let input = pattern(640, 480)
    var seen = Set<UnsafePointer<UInt8>>()
    for i in 0..<50 {
        let out = try overlay.process(input, frame: VideoFrame(buffer: input.buffer, timestampNs: Int64(i) * 33_000_000, sequence: UInt64(i)))
        seen.insert(out.dataY)
    }
    #expect(seen.count == 1, "a picture released before the next one comes back from the pool: \(seen.count) buffers")
}

@Test func regionCropKeepsTheRegionsPixels() throws {
    let input = pattern(640, 480)
    let crop = try RegionCrop(region: CropRect(x: 100, y: 60, width: 200, height: 120))
    #expect(crop.name == "crop 200x120+100+60")
    let out = try crop.process(input, frame: VideoFrame(buffer: input.buffer, timestampNs: 0, sequence: 0))
    #expect(out.width == 200 && out.height == 120)
    for r in 0..<120 {
        for x in 0..<200 { #expect(out.dataY[r * out.strideY + x] == input.dataY[(r + 60) * input.strideY + x + 100]) }
    }
    for r in 0..<60 {
        for x in 0..<100 {
            #expect(out.dataU[r * out.strideU + x] == input.dataU[(r + 30) * input.strideU + x + 50])
            #expect(out.dataV[r * out.strideV + x] == input.dataV[(r + 30) * input.strideV + x + 50])
        }
    }
    let scaled = try RegionCrop(region: CropRect(x: 0, y: 0, width: 320, height: 240), outputSize: FrameSize(width: 640, height: 480))
    let big = try scaled.process(input, frame: VideoFrame(buffer: input.buffer, timestampNs: 0, sequence: 0))
    #expect(big.width == 640 && big.height == 480)
}

@Test func regionCropRefusesRegionsItCannotKeep() throws {
    let input = pattern(320, 240)
    let crop = try RegionCrop(region: CropRect(x: 200, y: 0, width: 200, height: 100))
    #expect {
        try crop.process(input, frame: VideoFrame(buffer: input.buffer, timestampNs: 0, sequence: 0))
    } throws: { ($0 as? ProcessingError)?.message == "crop region 200x100+200+0 is outside the 320x240 picture" }
    #expect {
        try RegionCrop(region: CropRect(x: 0, y: 0, width: 0, height: 100))
    } throws: { ($0 as? ProcessingError)?.message.contains("crop region 0x100+0+0: sizes must be 2...16384") == true }
    #expect {
        try RegionCrop(region: CropRect(x: -2, y: 0, width: 10, height: 10))
    } throws: { ($0 as? ProcessingError)?.message.contains("offsets 0...16384") == true }
}
