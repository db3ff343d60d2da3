import Testing
@testable import VideoCapture

@Test func pixelFormatArithmetic() {
    #expect(PixelFormat(fourcc: "YUYV") == .yuyv)
    #expect(PixelFormat.mjpeg.fourcc == "MJPG")
    #expect(PixelFormat(fourcc: "Y16 -BE")?.fourcc == "Y16-BE")
    #expect(PixelFormat.i420.frameSize(width: 640, height: 480) == 640 * 480 * 3 / 2)
    #expect(PixelFormat.nv12.frameSize(width: 641, height: 481) == 641 * 481 + 321 * 2 * 241)
    #expect(PixelFormat.yuyv.frameSize(width: 640, height: 480, stride: 1536) == 1536 * 480)
    #expect(PixelFormat.yuyv.frameSize(width: 640, height: 480, stride: 1000) == nil) // stride below width × 2
    #expect(PixelFormat.mjpeg.frameSize(width: 640, height: 480) == nil)
    #expect(PixelFormat.abgr32.conversionCost == PixelFormat.rgb32.conversionCost)
}
