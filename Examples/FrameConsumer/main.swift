// An app that consumes frames in its own code: a capturer, a `VideoSource` (one conversion to I420, shared by
// every consumer), and an async sequence of 320x180 frames at 10 fps, of which it prints the mean luma.
//
//   swift run frame-consumer-example [DEVICE] [FRAMES]      (default fixture:vivid, 20 frames)
import CapturePipeline
import FixtureCameras
import Foundation
import V4L2Capture
import VideoCapture
import VideoProcessing

@main struct FrameConsumer {
    static func main() async {
        let args = CommandLine.arguments.dropFirst()
        let count = args.dropFirst().first.flatMap(Int.init) ?? 20
        do {
            var configuration = CaptureSession.Configuration()
            configuration.providers = [V4L2DeviceProvider(), FixtureCameraProvider()] // real cameras, then the built-in ones
            let capturer = CaptureSession.capturer(for: configuration)
            let device = try capturer.device(args.first ?? "fixture:vivid")
            let source = VideoSource(capturer: capturer)
            let frames = source.frames(wants: VideoSinkWants(maxSize: FrameSize(width: 320, height: 180), maxFrameRate: 10))
            let applied = try await capturer.startCapture(device: device, targetSize: FrameSize(width: 1280, height: 720), fpsLimit: 30)
            print("capturing \(device.path) at \(applied.size) @ \(applied.fps) fps")
            var seen = 0
            for try await frame in frames {
                guard let picture = I420Buffer(frame.buffer) else { continue }
                var sum = 0
                for row in 0..<picture.height {
                    let line = picture.dataY + row * picture.strideY
                    for x in 0..<picture.width { sum += Int(line[x]) }
                }
                let mean = Double(sum) / Double(picture.width * picture.height)
                print(
                    "frame \(seen + 1): \(picture.width)x\(picture.height) at \(Double(frame.timestampNs) / 1e9) s, mean luma \(String(format: "%.1f", mean))"
                )
                seen += 1
                if seen == count { break }
            }
            try await capturer.stopCapture()
            source.detach()
        } catch {
            FileHandle.standardError.write(Data("frame-consumer-example: \(error)\n".utf8))
            exit(1)
        }
    }
}
