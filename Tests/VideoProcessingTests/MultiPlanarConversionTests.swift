import Foundation
import Testing
import VideoCapture
@testable import VideoProcessing

/// A picture's samples, from which both layouts of a format are built: the single-buffer one (V4L2 single-planar
/// rules, one storage) and the separate-plane one (each plane in its own storage, with its own stride).
struct PlanarPicture {
    let width: Int, height: Int
    let y: [UInt8], u: [UInt8], v: [UInt8]
    let chromaRows: Int
    var chromaWidth: Int { (width + 1) / 2 }

    init(width: Int, height: Int, vertical420: Bool) {
        self.width = width
        self.height = height
        chromaRows = vertical420 ? (height + 1) / 2 : height
        var seed: UInt32 = 0x1234_5678
        func next() -> UInt8 {
            seed = seed &* 1_664_525 &+ 1_013_904_223
            return UInt8(truncatingIfNeeded: seed >> 24)
        }
        y = (0..<(width * height)).map { _ in next() }
        let cn = ((width + 1) / 2) * chromaRows
        u = (0..<cn).map { _ in next() }
        v = (0..<cn).map { _ in next() }
    }

    /// The rows of each memory plane of `twin` (a single-buffer layout), tightly packed.
    func planes(_ twin: PixelFormat) -> [(rowBytes: Int, rows: [[UInt8]])] {
        let cw = chromaWidth
        let yRows = (0..<height).map { Array(y[($0 * width)..<($0 * width + width)]) }
        let uRows = (0..<chromaRows).map { Array(u[($0 * cw)..<($0 * cw + cw)]) }
        let vRows = (0..<chromaRows).map { Array(v[($0 * cw)..<($0 * cw + cw)]) }
        switch twin {
        case .i420, .yuv422p: return [(width, yRows), (cw, uRows), (cw, vRows)]
        case .yv12: return [(width, yRows), (cw, vRows), (cw, uRows)]
        case .nv12, .nv16: return [(width, yRows), (2 * cw, zip(uRows, vRows).map { a, b in zip(a, b).flatMap { [$0, $1] } })]
        default: return [(width, yRows), (2 * cw, zip(vRows, uRows).map { a, b in zip(a, b).flatMap { [$0, $1] } })] // NV21, NV61
        }
    }

    /// One storage, V4L2 single-planar layout with luma stride `stride` (chroma strides derived from it).
    func singleBuffer(_ twin: PixelFormat, stride: Int) -> VideoFrameBuffer {
        let semi = twin == .nv12 || twin == .nv21 || twin == .nv16 || twin == .nv61
        let chromaStride = semi ? stride : stride / 2
        let planes = planes(twin)
        let size = twin.frameSize(width: width, height: height, stride: stride)!
        let storage = FrameStorage(capacity: size)
        memset(storage.mutableBaseAddress, 0, size)
        var at = 0
        for (i, plane) in planes.enumerated() {
            let s = i == 0 ? stride : chromaStride
            for (r, row) in plane.rows.enumerated() {
                row.withUnsafeBytes { (storage.mutableBaseAddress + at + r * s).copyMemory(from: $0.baseAddress!, byteCount: row.count) }
            }
            at += s * plane.rows.count
        }
        return VideoFrameBuffer(pixelFormat: twin, width: width, height: height, stride: stride, bytesUsed: size, storage: storage)
    }

    /// Each plane in its own storage with its own stride (`pad` bytes beyond the row), as a multi-planar driver
    /// delivers `format`. The storages are returned too: the caller keeps them alive while the buffer is used.
    func separatePlanes(_ format: PixelFormat, pads: [Int]) -> (VideoFrameBuffer, [FrameStorage]) {
        let planes = planes(format.singleBufferEquivalent)
        var storages: [FrameStorage] = [], strides: [Int] = []
        for (i, plane) in planes.enumerated() {
            let s = plane.rowBytes + pads[i]
            let st = FrameStorage(capacity: s * plane.rows.count)
            memset(st.mutableBaseAddress, 0xEE, st.capacity) // padding that must not be read as samples
            for (r, row) in plane.rows.enumerated() {
                row.withUnsafeBytes { (st.mutableBaseAddress + r * s).copyMemory(from: $0.baseAddress!, byteCount: row.count) }
            }
            storages.append(st)
            strides.append(s)
        }
        let base = Int(bitPattern: storages[0].baseAddress)
        func off(_ i: Int) -> Int { i < storages.count ? Int(bitPattern: storages[i].baseAddress) - base : 0 }
        func str(_ i: Int) -> Int { i < strides.count ? strides[i] : 0 }
        let layout = PlaneLayout(count: storages.count, offsets: (0, off(1), off(2)), strides: (str(0), str(1), str(2)))
        let buffer = VideoFrameBuffer(
            pixelFormat: format, width: width, height: height, planes: layout, firstPlaneBytes: storages[0].capacity, storage: storages[0])
        return (buffer, storages)
    }
}

/// Each separate-plane format and its single-buffer twin.
let separatePlaneFormats: [PixelFormat] = [.nv12m, .nv21m, .yuv420m, .yvu420m, .nv16m, .nv61m, .yuv422m]

@Test(arguments: separatePlaneFormats)
func separatePlanesConvertToTheSameI420AsTheSingleBufferTwin(_ format: PixelFormat) throws {
    let twin = format.singleBufferEquivalent
    #expect(twin != format && format.memoryPlaneCount > 1 && format.isConvertibleToI420)
    #expect(format.conversionCost == twin.conversionCost! + 1, "ranked right after its twin")
    let vertical420 = twin == .i420 || twin == .yv12 || twin == .nv12 || twin == .nv21
    for (w, h) in [(320, 180), (318, 179)] {
        let picture = PlanarPicture(width: w, height: h, vertical420: vertical420)
        let single = picture.singleBuffer(twin, stride: (w + 63) & ~63)
        let (separate, storages) = picture.separatePlanes(format, pads: [32, 8, 40])
        try withExtendedLifetime(storages) {
            let options: [FrameConverter.Options] = [
                .init(), .init(crop: CropRect(x: 10, y: 6, width: 200, height: 120)), .init(rotation: .rotation90),
                .init(rotation: .rotation270, mirror: true, scale: FrameSize(width: 90, height: 160)),
            ]
            for o in options {
                let a = try FrameConverter().convert(single, options: o).packedBytes()
                let b = try FrameConverter().convert(separate, options: o).packedBytes()
                #expect(a == b, "\(format) \(w)x\(h) \(o) differs from \(twin)")
                // And from a copy of the separate planes (one storage, the planes one after the other).
                let c = try FrameConverter().convert(separate.copy(), options: o).packedBytes()
                #expect(a == c, "a copy of \(format) \(w)x\(h) \(o) differs from \(twin)")
            }
        }
    }
}

@Test func ym12IsPassedThroughWithoutACopy() throws {
    let picture = PlanarPicture(width: 320, height: 180, vertical420: true)
    let (separate, storages) = picture.separatePlanes(.yuv420m, pads: [0, 16, 16])
    try withExtendedLifetime(storages) {
        let out = try FrameConverter().convert(separate)
        #expect(out.dataY == separate.baseAddress.assumingMemoryBound(to: UInt8.self))
        #expect(UnsafeRawPointer(out.dataU) == storages[1].baseAddress && UnsafeRawPointer(out.dataV) == storages[2].baseAddress)
        #expect(out.strideU == 176 && out.packedBytes() == picture.y + picture.u + picture.v)
    }
}

@Test func aSeparateChromaPlaneWithTooSmallAStrideIsAnErrorNamingIt() throws {
    let picture = PlanarPicture(width: 320, height: 180, vertical420: true)
    let (good, storages) = picture.separatePlanes(.nv12m, pads: [0, 0, 0])
    withExtendedLifetime(storages) {
        var l = good.planes
        l.strides.1 = 100
        let bad = VideoFrameBuffer(pixelFormat: .nv12m, width: 320, height: 180, planes: l, firstPlaneBytes: good.bytesUsed, storage: good.storage)
        #expect {
            _ = try FrameConverter().convert(bad)
        } throws: { e in
            "\(e)".contains("plane 1 stride 100") && "\(e)".contains("320")
        }
    }
}

@Test(arguments: separatePlaneFormats)
func aSeparatePlaneFormatWrittenInOneBufferConvertsLikeItsTwin(_ format: PixelFormat) throws {
    let src = I420Buffer(width: 322, height: 182)
    let picture = PlanarPicture(width: 322, height: 182, vertical420: true)
    picture.y.withUnsafeBufferPointer { y in
        for r in 0..<182 { (src.writablePlanes!.y + r * src.strideY).update(from: y.baseAddress! + r * 322, count: 322) }
    }
    for r in 0..<91 {
        picture.u.withUnsafeBufferPointer { (src.writablePlanes!.u + r * src.strideU).update(from: $0.baseAddress! + r * 161, count: 161) }
        picture.v.withUnsafeBufferPointer { (src.writablePlanes!.v + r * src.strideV).update(from: $0.baseAddress! + r * 161, count: 161) }
    }
    func written(_ f: PixelFormat) throws -> [UInt8] {
        let storage = FrameStorage(capacity: FormatWriter.capacity(for: f, width: 322, height: 182))
        let b = try FormatWriter().write(src, as: f, into: storage)
        #expect(b.pixelFormat == f)
        return try FrameConverter().convert(b).packedBytes()
    }
    #expect(try written(format) == written(format.singleBufferEquivalent))
}
