import Testing
import VideoCapture

// V4L2's enum values, as the kernel header defines them.
private let srgb: UInt32 = 8, jpeg: UInt32 = 7, rec709: UInt32 = 3, smpte170m: UInt32 = 1, bt2020: UInt32 = 10, oprgb: UInt32 = 9

struct V4L2ColorCase: CustomTestStringConvertible, Sendable {
    var colorspace: UInt32, transfer: UInt32 = 0, encoding: UInt32 = 0, quantization: UInt32 = 0
    var format: PixelFormat
    var expected: VideoColorSpace
    var testDescription: String { "colorspace \(colorspace) xfer \(transfer) enc \(encoding) quant \(quantization) \(format)" }
}

let v4l2ColorCases: [V4L2ColorCase] = [
    // vivid's and uvcvideo's default for a webcam: sRGB; DEFAULT encoding → 601, DEFAULT quantization → limited.
    V4L2ColorCase(colorspace: srgb, format: .yuyv, expected: .webcam),
    // The JPEG colour space: DEFAULT quantization is full.
    V4L2ColorCase(colorspace: jpeg, format: .mjpeg, expected: .jpeg),
    V4L2ColorCase(colorspace: jpeg, format: .yuyv, expected: .jpeg),
    V4L2ColorCase(colorspace: rec709, format: .nv12, expected: .bt709),
    V4L2ColorCase(colorspace: smpte170m, format: .uyvy, expected: .bt601),
    // Explicit values win over the defaults.
    V4L2ColorCase(
        colorspace: srgb, transfer: 1, encoding: 2, quantization: 1, format: .yuyv,
        expected: VideoColorSpace(primaries: .bt709, transfer: .bt709, matrix: .bt709, range: .full)),
    V4L2ColorCase(
        colorspace: bt2020, format: .i420,
        expected: VideoColorSpace(primaries: .bt2020, transfer: .bt709, matrix: .bt2020NonConstant, range: .limited)),
    // RGB formats: no Y'CbCr matrix, full range by default.
    V4L2ColorCase(colorspace: srgb, format: .rgb24, expected: VideoColorSpace(primaries: .bt709, transfer: .srgb, matrix: .rgb, range: .full)),
    // What the kernel leaves undefined is unspecified, never an error.
    V4L2ColorCase(
        colorspace: oprgb, format: .yuyv,
        expected: VideoColorSpace(primaries: .unspecified, transfer: .unspecified, matrix: .smpte170m, range: .limited)),
    V4L2ColorCase(colorspace: 0, format: .yuyv, expected: .unspecified),
    V4L2ColorCase(
        colorspace: 999, transfer: 999, encoding: 999, quantization: 999, format: .yuyv,
        expected: VideoColorSpace(primaries: .unspecified, transfer: .unspecified, matrix: .unspecified, range: .limited)),
]

@Test("V4L2 colour descriptions map with the kernel's default rules", arguments: v4l2ColorCases)
func v4l2ColorMapping(_ c: V4L2ColorCase) {
    let got = VideoColorSpace(
        v4l2Colorspace: c.colorspace, transfer: c.transfer, encoding: c.encoding, quantization: c.quantization, pixelFormat: c.format)
    #expect(got == c.expected, "got \(got), expected \(c.expected)")
}

@Test func conversionToI420KeepsYCbCrAndSetsItsOwnForJPEGAndRGB() {
    let hd = VideoColorSpace.bt709
    #expect(hd.convertedToI420(from: .nv12) == hd)
    #expect(hd.convertedToI420(from: .yuyv) == hd)
    // A JPEG decodes to its own full-range BT.601 samples, keeping the stated primaries and transfer.
    #expect(hd.convertedToI420(from: .mjpeg) == VideoColorSpace(primaries: .bt709, transfer: .bt709, matrix: .smpte170m, range: .full))
    #expect(VideoColorSpace.unspecified.convertedToI420(from: .mjpeg) == .jpeg)
    // libyuv's RGB → I420 is the BT.601 matrix at limited range.
    let rgb = VideoColorSpace(primaries: .bt709, transfer: .srgb, matrix: .rgb, range: .full)
    #expect(rgb.convertedToI420(from: .rgb24) == .webcam)
    #expect(VideoColorSpace.webcam.description == "bt709/iec61966-2-1/smpte170m/limited")
}
