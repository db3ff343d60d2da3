// Helpers for the test targets that handle pictures and cameras (VideoCaptureTests, VideoProcessingTests,
// FixtureCamerasTests): test pictures, raw planes, ffmpeg as the reference, and the shipped fixture files.
import Foundation
import Testing
public import VideoCapture
import VideoProcessing
public import FixtureCameras
@_exported public import TestSupport

public func writeFile(_ path: String, _ bytes: UnsafeRawBufferPointer) {
    _ = FileManager.default.createFile(atPath: path, contents: Data(bytes))
}

/// Loads tightly packed yuv420p bytes into an I420 buffer.
public func i420(fromPacked data: [UInt8], width: Int, height: Int) -> I420Buffer {
    let b = I420Buffer(width: width, height: height)
    let cw = (width + 1) / 2, ch = (height + 1) / 2
    guard data.count >= width * height + 2 * cw * ch else {
        Issue.record("expected \(width * height + 2 * cw * ch) bytes of yuv420p, got \(data.count)")
        return b
    }
    var i = 0
    let w = b.writablePlanes! // our own buffer: writable (a wrapped driver buffer would give nil)
    for r in 0..<height {
        for x in 0..<width {
            w.y[r * b.strideY + x] = data[i]
            i += 1
        }
    }
    for r in 0..<ch {
        for x in 0..<cw {
            w.u[r * b.strideU + x] = data[i]
            i += 1
        }
    }
    for r in 0..<ch {
        for x in 0..<cw {
            w.v[r * b.strideV + x] = data[i]
            i += 1
        }
    }
    return b
}

public func readBytes(_ path: String) -> [UInt8] { [UInt8](FileManager.default.contents(atPath: path) ?? Data()) }

/// ffmpeg decodes/converts `input` (given its ffmpeg input options) to yuv420p (or `outFmt`) raw bytes.
public func ffmpegToYUV420(_ inputArgs: [String], _ input: String, outFmt: String = "yuv420p", filter: String? = nil) throws -> [UInt8] {
    let out = input + ".\(outFmt).\(filter?.hashValue ?? 0).yuv"
    var args = ["-v", "error", "-y"] + inputArgs + ["-i", input]
    if let filter { args += ["-vf", filter] }
    args += ["-f", "rawvideo", "-pix_fmt", outFmt, out]
    let (rc, _, err) = try run("ffmpeg", args)
    #expect(rc == 0, "ffmpeg failed: \(err)")
    return readBytes(out)
}

/// The test picture: the fixture pattern (bars, square, counter), in limited range (what raw Y'CbCr fixture frames
/// carry) or, with `range: .full`, in full range (what the MJPEG fixture cameras' JPEGs carry).
public func pattern(_ w: Int, _ h: Int, frame: UInt64 = 7, range: VideoColorSpace.Range = .limited) -> I420Buffer {
    let b = I420Buffer(width: w, height: h)
    TestPattern.render(frame: frame, into: b, range: range)
    return b
}

/// The repository's Fixtures/cameras folder (the built-in cameras' files).
public let fixturesDir = fixturesRoot + "/cameras"

/// The shipped fixture `name` (Fixtures/cameras/NAME.json or NAME.txt), parsed from its file.
public func fixture(_ name: String) throws -> CameraDescription {
    let files = try FileManager.default.contentsOfDirectory(atPath: fixturesDir)
    let file = try #require(files.first { $0.hasPrefix(name + ".") }, "no fixture \(name)")
    return try CameraDescription.load(path: fixturesDir + "/" + file)
}

/// Frames of the fixture pattern (optionally noisy), rendered once and cycled.
public final class PatternSource {
    public let frames: [I420Buffer]
    public init(width: Int, height: Int, count: Int, noise: Int = 0) {
        frames = (0..<count).map { i in
            let b = I420Buffer(width: width, height: height)
            TestPattern.render(frame: UInt64(i), into: b, noise: noise)
            return b
        }
    }
    public subscript(i: Int) -> I420Buffer { frames[i % frames.count] }
}
