import Testing
import VideoCapture
import VideoProcessing
@testable import FixtureCameras

/// Frames from a fixture camera: the first `count`, as fast as consumed (none dropped).
func fixtureFrames(_ spec: String, _ code: String, _ size: FrameSize, count: Int, noise: Int = 0) async throws -> [VideoFrame] {
    let capturer = CameraVideoCapturer(
        providers: [FixtureCameraProvider(options: .init(pacing: .asFastAsConsumed, bufferCount: count + 1, noise: noise))],
        configuration: .init(maxPendingFrames: count + 1, alwaysDiscardsLateFrames: false))
    let device = try capturer.device(spec)
    let pf = PixelFormat(fourcc: code)!
    let format = try #require(try capturer.supportedFormats(for: device).first { $0.pixelFormat == pf && $0.size == .discrete(size) })
    let stream = capturer.frames(bufferingNewest: count + 1)
    _ = try await capturer.startCapture(device: device, format: format, size: size, fps: Fraction(30))
    var frames: [VideoFrame] = []
    for try await f in stream {
        frames.append(f)
        if frames.count == count { break }
    }
    try await capturer.stopCapture()
    return frames
}

/// The reference picture of frame `n`, written as `pf` and converted back (what a lossless format gives).
func referenceThrough(_ pf: PixelFormat, frame n: UInt64, _ size: FrameSize) throws -> I420Buffer {
    let storage = FrameStorage(capacity: FormatWriter.capacity(for: pf, width: size.width, height: size.height))
    return try FrameConverter().convert(try FormatWriter().write(pattern(size.width, size.height, frame: n), as: pf, into: storage))
}

@Test(
    "fixture frames drawn incrementally are the reference pattern of their sequence number",
    arguments: [
        ("fixture:vivid", "YUYV", 640, 360), ("fixture:vivid", "NV12", 320, 180), ("fixture:uvc-webcam", "MJPG", 1280, 720),
        ("fixture:uvc-webcam", "MJPG", 640, 480),
    ])
func incrementalFixtureFramesMatchTheReference(_ spec: String, _ code: String, _ w: Int, _ h: Int) async throws {
    let size = FrameSize(width: w, height: h)
    let frames = try await fixtureFrames(spec, code, size, count: 14)
    #expect(frames.count == 14)
    let converter = FrameConverter()
    var previous: I420Buffer?
    for f in frames {
        let got = try converter.convert(f.buffer)
        let pf = f.buffer.pixelFormat
        if pf == .mjpeg {
            // Lossy: close to its own frame's pattern (in full range, as JPEG is), and closer to it than to the
            // neighbours' (the counter and the square tell which capture it was).
            let own = psnr(got, pattern(w, h, frame: f.sequence, range: .full))
            let next = psnr(got, pattern(w, h, frame: f.sequence + 1, range: .full))
            #expect(own >= 36, "frame \(f.sequence): PSNR \(own)")
            #expect(own > next + 1, "frame \(f.sequence) looks like frame \(f.sequence + 1) (\(own) vs \(next) dB)")
        } else {
            #expect(psnr(got, try referenceThrough(pf, frame: f.sequence, size)) >= 99, "frame \(f.sequence) differs from the reference")
        }
        if let previous { #expect(psnr(got, previous) < 60, "frame \(f.sequence) repeats the previous picture") }
        previous = I420Buffer(got.buffer.copy())
    }
    if code == "MJPG", let last = frames.last {
        // ffmpeg reads the spliced restart intervals without a complaint, to the same picture.
        let path = scratchDir + "/fixture-\(w)x\(h).jpg"
        writeFile(path, UnsafeRawBufferPointer(rebasing: last.buffer.bytes[...]))
        let (rc, _, err) = try run("ffmpeg", ["-v", "warning", "-i", path, "-f", "null", "-"])
        #expect(rc == 0 && err.isEmpty, "ffmpeg: \(err)")
        let theirs = i420(fromPacked: try ffmpegToYUV420(["-f", "jpeg_pipe"], path, outFmt: "yuvj420p"), width: w, height: h)
        #expect(psnr(theirs, try converter.convert(last.buffer)) >= 45)
    }
}

@Test func noisyFixtureFramesDifferEveryFrameAndStayNearThePattern() async throws {
    let size = FrameSize(width: 640, height: 360)
    let frames = try await fixtureFrames("fixture:vivid", "YUYV", size, count: 4, noise: 8)
    let converter = FrameConverter()
    var seen: [I420Buffer] = []
    for f in frames {
        let got = I420Buffer(try converter.convert(f.buffer).buffer.copy())!
        let clean = try referenceThrough(.yuyv, frame: f.sequence, size)
        let q = psnr(got, clean)
        // Uniform noise in ±8 on luma only: about 30 dB on luma, higher over all planes; never the clean picture.
        #expect(q > 28 && q < 60, "frame \(f.sequence): PSNR \(q) against the clean pattern")
        for s in seen { #expect(psnr(got, s) < 60, "two frames carry the same noise") }
        seen.append(got)
    }
}

@Test func noisyMJPEGFramesReuseTilesPerNoiseFieldAndStayExact() async throws {
    // The writer keeps encoded tiles per noise field and re-encodes only what moved: every frame must still be the
    // JPEG of its own picture (its pattern plus its field's noise), never a stale tile from an earlier frame.
    let (w, h) = (640, 480)
    let frames = try await fixtureFrames("fixture:uvc-webcam", "MJPG", FrameSize(width: w, height: h), count: 24, noise: 6)
    #expect(frames.count == 24)
    let converter = FrameConverter(), fresh = FrameConverter(), writer = FormatWriter()
    let storage = FrameStorage(capacity: FormatWriter.capacity(for: .mjpeg, width: w, height: h))
    var previous: I420Buffer?
    for f in frames {
        let reference = pattern(w, h, frame: f.sequence, range: .full)
        NoiseTable(amplitude: 6, planeBytes: reference.strideY * h).apply(
            frame: f.sequence % UInt64(TiledMJPEGWriter.phases), to: reference, from: reference)
        let got = I420Buffer(try converter.convert(f.buffer).buffer.copy())!
        // The same picture JPEG-encoded from scratch at the fixture's quality decodes to nearly the same pixels
        // (a stale square or digit would cost tens of dB).
        let whole = try fresh.convert(try writer.write(reference, as: .mjpeg, into: storage))
        #expect(psnr(got, whole) >= 40, "frame \(f.sequence): \(psnr(got, whole)) dB against a fresh encode of its picture")
        if let previous { #expect(psnr(got, previous) < 50, "frame \(f.sequence) repeats the previous picture") }
        previous = got
    }
}
