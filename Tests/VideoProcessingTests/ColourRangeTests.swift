// Issue 36, colour range: a snapshot keeps black at 0 and white at 255 whatever the source's quantization range.
// The judges are ffmpeg's own decoders and its own Y'CbCr → RGB conversion (swscale) of the same source.
import Foundation
import Testing
import VideoCapture
@testable import VideoProcessing

/// The grey patches every source below starts with (32 columns each, from x = 0), as full-range levels: black,
/// a deep shadow, mid grey, a bright highlight, white. A limited-range matrix applied to full-range samples
/// clips the shadow to 0 and the highlight to 255.
private let greyLevels = [0, 8, 128, 247, 255]

/// A real full-range JPEG (JFIF, `yuvj420p(pc)`) written by ffmpeg's encoder: the grey patches, then testsrc2's
/// colours (256x64).
private func fullRangeJPEG() throws -> String {
    let path = scratchDir + "/colour-full-range.jpg"
    let patches = greyLevels.enumerated().map { i, g in
        "color=c=0x\(String(repeating: String(format: "%02x", g), count: 3)):s=32x64:d=1[p\(i)]"
    }
    let graph =
        patches.joined(separator: ";") + ";testsrc2=s=96x64:d=1[t];"
        + (0..<greyLevels.count).map { "[p\($0)]" }.joined() + "[t]hstack=inputs=\(greyLevels.count + 1),format=yuvj420p"
    let (rc, _, err) = try run("ffmpeg", ["-v", "error", "-y", "-filter_complex", graph, "-frames:v", "1", "-q:v", "2", path])
    #expect(rc == 0, "ffmpeg: \(err)")
    let (prc, probed, _) = try run("ffprobe", ["-v", "error", "-show_entries", "stream=pix_fmt,color_range", "-of", "csv=p=0", path])
    #expect(prc == 0 && probed.trimmingCharacters(in: .whitespacesAndNewlines) == "yuvj420p,pc", "ffprobe: \(probed)")
    return path
}

/// The full-range JPEG decoded by our converter, with the colour description the capture path gives it.
private func decodedFullRangeJPEG() throws -> (I420Buffer, VideoColorSpace) {
    let bytes = readBytes(try fullRangeJPEG())
    let s = FrameStorage(capacity: bytes.count)
    s.mutableBaseAddress.copyMemory(from: bytes, byteCount: bytes.count)
    let jpeg = VideoFrameBuffer(pixelFormat: .mjpeg, width: 256, height: 64, stride: 0, bytesUsed: bytes.count, storage: s)
    let out = try FrameConverter().convert(VideoFrame(buffer: jpeg, timestampNs: 0, sequence: 0, colorSpace: .unspecified))
    #expect(out.colorSpace.range == .full, "JPEG decodes to full range")
    return (I420Buffer(out.buffer)!, out.colorSpace)
}

/// A limited-range picture: the grey patches at their limited-range levels (16 + g × 219 / 255), then the fixture
/// bars; written as raw yuv420p for ffmpeg too.
private func limitedRangePicture(_ name: String) -> (I420Buffer, String) {
    let b = pattern(256, 64)
    let p = b.writablePlanes!
    for (i, g) in greyLevels.enumerated() {
        let y = UInt8(16 + (g * 219 + 127) / 255)
        for r in 0..<64 { (p.y + r * b.strideY + 32 * i).update(repeating: y, count: 32) }
        for r in 0..<32 {
            (p.u + r * b.strideU + 16 * i).update(repeating: 128, count: 16)
            (p.v + r * b.strideV + 16 * i).update(repeating: 128, count: 16)
        }
    }
    let raw = scratchDir + "/colour-\(name).yuv"
    b.packedBytes().withUnsafeBytes { writeFile(raw, $0) }
    return (b, raw)
}

/// ffmpeg's decode of a PNG or JPEG (its own full-range conversion for JPEG) as packed rgb24.
private func ffmpegRGB(_ path: String) throws -> [UInt8] {
    try ffmpegToYUV420([], path, outFmt: "rgb24")
}

/// ffmpeg's conversion of a raw limited-range yuv420p picture with the given matrix (bt601 or bt709) to rgb24.
private func ffmpegRGB(raw: String, matrix: String) throws -> [UInt8] {
    try ffmpegToYUV420(
        ["-f", "rawvideo", "-pix_fmt", "yuv420p", "-s", "256x64"], raw, outFmt: "rgb24",
        filter: "scale=in_color_matrix=\(matrix):in_range=tv:out_range=pc")
}

/// PSNR of two rgb24 pictures (dB; 99 when identical).
private func rgbPSNR(_ a: [UInt8], _ b: [UInt8]) -> Double {
    guard a.count == b.count, !a.isEmpty else { return 0 }
    var sum = 0.0
    for i in a.indices {
        let d = Double(a[i]) - Double(b[i])
        sum += d * d
    }
    return sum == 0 ? 99 : 10 * log10(255 * 255 * Double(a.count) / sum)
}

/// The R, G, B values at the centre of each grey patch (row 32).
private func patchValues(_ rgb: [UInt8]) -> [[Int]] {
    greyLevels.indices.map { i in
        let o = (32 * 256 + 32 * i + 16) * 3
        return rgb.count >= o + 3 ? [Int(rgb[o]), Int(rgb[o + 1]), Int(rgb[o + 2])] : [-1, -1, -1]
    }
}

/// Largest difference between the patches' channels in two pictures (ours and the judge's).
private func patchError(_ rgb: [UInt8], _ reference: [UInt8]) -> Int {
    zip(patchValues(rgb), patchValues(reference)).map { a, b in zip(a, b).map { abs($0 - $1) }.max()! }.max()!
}

/// Largest difference between the patches' channels and their grey levels. (ffmpeg's encoder leaves the 247 patch
/// of the full-range JPEG with Cb 127: its own RGB of it is 247, 247, 245.)
private func greyError(_ rgb: [UInt8]) -> Int {
    zip(patchValues(rgb), greyLevels).map { v, g in v.map { abs($0 - g) }.max()! }.max()!
}

@Test func pngSnapshotOfAFullRangeJPEGKeepsShadowsAndHighlights() throws {
    let (picture, colour) = try decodedFullRangeJPEG()
    let png = scratchDir + "/colour-full.png"
    try SnapshotWriter.write(picture, colorSpace: colour, to: png)
    let ours = try ffmpegRGB(png), theirs = try ffmpegRGB(try fullRangeJPEG())
    let q = rgbPSNR(ours, theirs)
    print("FIGURE full-range JPEG → PNG: patches \(patchValues(ours)) (want \(greyLevels)), \(String(format: "%.1f", q)) dB against ffmpeg's RGB")
    #expect(patchError(ours, theirs) <= 1, "grey patches \(patchValues(ours)), ffmpeg's \(patchValues(theirs))")
    #expect(greyError(ours) <= 2, "grey patches \(patchValues(ours)), want \(greyLevels)")
    #expect(q >= 38, "PSNR \(q) against ffmpeg's own conversion of the JPEG")
    // The limited-range matrix (what snapshots used before) clips the shadow and the highlight: the test tells.
    let clipped = scratchDir + "/colour-full-as-limited.png"
    try SnapshotWriter.write(picture, colorSpace: .bt601, to: clipped)
    let wrong = patchValues(try ffmpegRGB(clipped))
    #expect(wrong[1][0] == 0 && wrong[3][0] == 255, "as limited range: \(wrong)")
}

@Test func pngSnapshotOfALimitedRangePictureMaps16And235To0And255() throws {
    let (picture, raw) = limitedRangePicture("limited-png")
    let png = scratchDir + "/colour-limited.png"
    try SnapshotWriter.write(picture, colorSpace: .bt601, to: png)
    let ours = try ffmpegRGB(png), theirs = try ffmpegRGB(raw: raw, matrix: "bt601")
    let q = rgbPSNR(ours, theirs)
    print("FIGURE limited-range I420 → PNG: patches \(patchValues(ours)) (want \(greyLevels)), \(String(format: "%.1f", q)) dB against ffmpeg's RGB")
    #expect(patchError(ours, theirs) <= 1, "grey patches \(patchValues(ours)), ffmpeg's \(patchValues(theirs))")
    #expect(greyError(ours) <= 1, "grey patches \(patchValues(ours)), want \(greyLevels)")
    #expect(q >= 38, "PSNR \(q) against ffmpeg's limited-range BT.601 conversion")
}

@Test(arguments: ["full-bt601", "limited-bt601", "limited-bt709"])
func snapshotsOfEverySourceAreFullRangeInBothFormats(_ source: String) throws {
    // The source, its colour description and ffmpeg's RGB of it (the judge).
    let picture: I420Buffer, colour: VideoColorSpace, reference: [UInt8]
    if source == "full-bt601" {
        (picture, colour) = try decodedFullRangeJPEG()
        reference = try ffmpegRGB(try fullRangeJPEG())
    } else {
        let raw: String
        (picture, raw) = limitedRangePicture(source)
        colour = source == "limited-bt709" ? .bt709 : .bt601
        reference = try ffmpegRGB(raw: raw, matrix: source == "limited-bt709" ? "bt709" : "bt601")
    }
    for ext in ["png", "jpg"] {
        let path = scratchDir + "/colour-\(source).\(ext)"
        try SnapshotWriter.write(picture, colorSpace: colour, to: path)
        let rgb = try ffmpegRGB(path)
        let q = rgbPSNR(rgb, reference)
        var line = "FIGURE \(source) → \(ext): patches \(patchValues(rgb).map { $0[0] }), \(String(format: "%.1f", q)) dB against ffmpeg's RGB"
        #expect(patchError(rgb, reference) <= (ext == "png" ? 1 : 2), "\(ext): grey patches \(patchValues(rgb)), ffmpeg's \(patchValues(reference))")
        #expect(greyError(rgb) <= 2, "\(ext): grey patches \(patchValues(rgb)), want \(greyLevels)")
        #expect(q >= (ext == "png" ? 38 : 30), "\(ext): PSNR \(q) against ffmpeg's RGB of the source")
        if ext == "jpg" {
            // The JPEG's own samples are full range (JFIF): ffmpeg reads them as yuvj420p(pc).
            let (rc, probed, _) = try run("ffprobe", ["-v", "error", "-show_entries", "stream=pix_fmt,color_range", "-of", "csv=p=0", path])
            #expect(rc == 0 && probed.trimmingCharacters(in: .whitespacesAndNewlines) == "yuvj420p,pc", "ffprobe: \(probed)")
            let yuv = try ffmpegToYUV420([], path, outFmt: "yuvj420p")
            let luma = greyLevels.indices.map { Int(yuv.count > 32 * 256 + 32 * $0 + 16 ? yuv[32 * 256 + 32 * $0 + 16] : 0) }
            line += ", samples \(luma)"
            #expect(zip(luma, greyLevels).allSatisfy { abs($0 - $1) <= 2 }, "JPEG luma \(luma), want \(greyLevels)")
        }
        print(line)
        if source == "limited-bt709" {
            // The matrix matters too: BT.709's conversion is much closer to ffmpeg's BT.709 than to its BT.601.
            let other = rgbPSNR(rgb, try ffmpegRGB(raw: scratchDir + "/colour-\(source).yuv", matrix: "bt601"))
            print("FIGURE \(source) → \(ext): \(String(format: "%.1f", other)) dB against ffmpeg's BT.601 RGB")
            #expect(other < q - 5, "\(ext): \(other) dB against BT.601, \(q) against BT.709")
        }
    }
}
