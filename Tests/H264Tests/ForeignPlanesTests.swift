import Foundation
import Synchronization
import Testing
import VideoCapture
import VideoProcessing
import H264

/// How many wrapped pictures have handed their planes back.
private final class Releases: Sendable {
    let count = Mutex(0)
}

/// Copies a picture into three separate allocations with strides of their own (as another library lays it out).
private func foreignCopy(of p: I420Buffer, released: Releases, sameChromaStrides: Bool = false) throws -> I420Buffer {
    let sy = p.width + 13, su = p.chromaWidth + 7, sv = p.chromaWidth + (sameChromaStrides ? 7 : 3)
    let y = UnsafeMutablePointer<UInt8>.allocate(capacity: sy * p.height)
    let u = UnsafeMutablePointer<UInt8>.allocate(capacity: su * p.chromaHeight)
    let v = UnsafeMutablePointer<UInt8>.allocate(capacity: sv * p.chromaHeight)
    for r in 0..<p.height { (y + r * sy).update(from: p.dataY + r * p.strideY, count: p.width) }
    for r in 0..<p.chromaHeight {
        (u + r * su).update(from: p.dataU + r * p.strideU, count: p.chromaWidth)
        (v + r * sv).update(from: p.dataV + r * p.strideV, count: p.chromaWidth)
    }
    // The closure owns the three allocations: a Sendable box of their addresses.
    let addresses = (Int(bitPattern: y), Int(bitPattern: u), Int(bitPattern: v))
    return try I420Buffer(wrapping: (UnsafePointer(y), UnsafePointer(u), UnsafePointer(v)), strides: (sy, su, sv), width: p.width, height: p.height) {
        for a in [addresses.0, addresses.1, addresses.2] { UnsafeMutablePointer<UInt8>(bitPattern: a)?.deallocate() }
        released.count.withLock { $0 += 1 }
    }
}

@Test func wrappedForeignPlanesEncodeInPlaceAndEqualTheirCopy() throws {
    let released = Releases()
    let source = PatternSource(width: 320, height: 180, count: 6)
    let settings = H264Encoder.Settings(width: 320, height: 180)
    do {
        for i in 0..<6 {
            let wrapped = try foreignCopy(of: source[i], released: released)
            #expect(wrapped.strideY == 333 && wrapped.strideU == 167 && wrapped.strideV == 163)
            #expect(wrapped.writablePlanes == nil, "someone else's memory is read-only")
            // Through the converter: a whole I420 frame passes through (the same planes, no copy)...
            let passed = try FrameConverter().convert(wrapped.buffer)
            #expect(passed.dataY == wrapped.dataY && passed.dataU == wrapped.dataU && passed.dataV == wrapped.dataV)
            #expect(passed.packedBytes() == source[i].packedBytes())
            // ...and a crop and scale read the planes with their own strides.
            let options = FrameConverter.Options(crop: CropRect(x: 10, y: 6, width: 200, height: 120), scale: FrameSize(width: 100, height: 60))
            let fromWrapped = try FrameConverter().convert(wrapped.buffer, options: options).packedBytes()
            let fromOurs = try FrameConverter().convert(source[i].buffer, options: options).packedBytes()
            #expect(fromWrapped == fromOurs)
        }
    }
    // The encoder reads the planes in place (OpenH264 takes one chroma stride: with two different ones it
    // copies once): the same bitstream as from our own buffer.
    for same in [true, false] {
        var outA = EncodedFrame(), outB = EncodedFrame()
        let a = try H264Encoder(settings: settings), b = try H264Encoder(settings: settings)
        for i in 0..<6 {
            let wrapped = try foreignCopy(of: source[i], released: released, sameChromaStrides: same)
            try a.encode(VideoFrame(buffer: wrapped.buffer, timestampNs: Int64(i) * 33_333_333, sequence: UInt64(i)), into: &outA)
            try b.encode(VideoFrame(buffer: source[i].buffer, timestampNs: Int64(i) * 33_333_333, sequence: UInt64(i)), into: &outB)
            #expect(outA.data == outB.data, "frame \(i), same chroma strides \(same): \(outA.size) vs \(outB.size) bytes")
        }
    }
    #expect(released.count.withLock { $0 } == 18, "every wrapped picture handed its planes back")
}

@Test func wrappingRefusesBadStridesAndSizes() {
    let p = UnsafeMutablePointer<UInt8>.allocate(capacity: 64)
    defer { p.deallocate() }
    let q = UnsafePointer(p)
    func message(_ strides: (Int, Int, Int), _ w: Int, _ h: Int) -> String {
        do {
            _ = try I420Buffer(wrapping: (q, q, q), strides: (y: strides.0, u: strides.1, v: strides.2), width: w, height: h) {}
            return "accepted"
        } catch { return error.message }
    }
    #expect(message((7, 4, 4), 8, 2) == "luma stride 7 for a 8x2 I420 picture must be 8...1048576")
    #expect(message((8, 3, 4), 8, 2) == "U stride 3 for a 8x2 I420 picture must be 4...1048576")
    #expect(message((8, 4, 2_000_000), 8, 2) == "V stride 2000000 for a 8x2 I420 picture must be 4...1048576")
    #expect(message((8, 4, 4), 0, 2) == "an I420 picture of 0x2: width and height must be 1...16384")
}
