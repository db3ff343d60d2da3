// Issue 50: whole pictures as JPEG (the stills and MJPEG of `camcap serve`), judged by ffmpeg's decoder.
import Foundation
import Testing
import VideoCapture
import MediaTestSupport
@testable import VideoProcessing

@Suite struct JPEGPictureEncoderTests {
    /// The test pattern at odd and even sizes (rows and columns that are no multiple of 16), scaled and turned: ffmpeg
    /// decodes each at its size, close to the picture it was made from (libyuv's scale and rotation of it).
    @Test(arguments: [(162, 90, 162, 90, 0), (162, 90, 80, 44, 0), (320, 180, 320, 180, 90), (320, 180, 90, 160, 270), (640, 360, 16, 16, 180)])
    func encodedPicturesDecodeAtTheirSize(w: Int, h: Int, tw: Int, th: Int, degrees: Int) throws {
        let source = pattern(w, h)
        let rotation = try #require(VideoRotation(degrees: degrees))
        let encoder = JPEGPictureEncoder(quality: 90)
        let jpeg = try encoder.encode(source, size: FrameSize(width: tw, height: th), rotation: rotation)
        #expect(jpeg.starts(with: [0xFF, 0xD8]) && jpeg.suffix(2) == [0xFF, 0xD9])
        let path = scratchDir + "/still-\(w)x\(h)-\(tw)x\(th)-\(degrees).jpg"
        try Data(jpeg).write(to: URL(fileURLWithPath: path))
        let decoded = try ffmpegToYUV420([], path)
        #expect(decoded.count == tw * th + 2 * ((tw + 1) / 2) * ((th + 1) / 2), "\(decoded.count) bytes")
        // The reference: the same rotation and scale by FrameConverter (libyuv), as I420.
        var options = FrameConverter.Options()
        options.rotation = rotation
        options.scale = FrameSize(width: tw, height: th)
        let reference = try FrameConverter().convert(source.buffer, options: options)
        let q = psnr(i420(fromPacked: decoded, width: tw, height: th), reference)
        #expect(q >= 30, "\(w)x\(h) → \(tw)x\(th) at \(degrees)°: PSNR \(q) dB")
    }

    @Test func aSizeOutsideTheRangeIsAnError() throws {
        let encoder = JPEGPictureEncoder()
        #expect(throws: ProcessingError.self) { try encoder.encode(pattern(64, 64), size: FrameSize(width: 1, height: 64)) }
        #expect(throws: ProcessingError.self) { try encoder.encode(pattern(64, 64), size: FrameSize(width: 64, height: 20000)) }
    }
}
