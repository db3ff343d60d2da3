import Foundation
import Testing
import Synchronization
import VideoCapture
import VideoProcessing
import FixtureCameras
import V4L2Capture
import H264
import Recording

@Suite struct EncoderControlTests {
    /// A busy encode loop on one thread, key-frame requests from another: each request gives an IDR at the
    /// first or second frame after it (a request that lands during an encode is taken at the next one).
    @Test func keyFrameRequestsFromAnotherTaskGiveAnIDRWithinOneFrame() async throws {
        var s = H264Encoder.Settings(width: 640, height: 360)
        s.keyFrameInterval = 100_000 // no periodic IDRs: every later IDR was requested
        let encoder = try H264Encoder(settings: s)
        let control = encoder.control
        let source = PatternSource(width: 640, height: 360, count: 8, noise: 6)
        let done = Atomic<Int>(0) // frames finished by the encode thread
        let requestedAt = Mutex<[Int]>([]) // frames finished when each request was made
        // The requester is a thread of its own (the network thread of an RTC stack), not a cooperative task that
        // a busy pool might not run until the loop ends.
        let finished = Atomic<Bool>(false)
        let requester = Thread {
            var last = -10
            while done.load(ordering: .acquiring) < 280 {
                let n = done.load(ordering: .acquiring)
                if n >= last + 25 {
                    requestedAt.withLock { $0.append(n) }
                    control.requestKeyFrame()
                    last = n
                }
                usleep(100)
            }
            finished.store(true, ordering: .releasing)
        }
        requester.start()
        var keys: [Int] = []
        var out = EncodedFrame()
        for i in 0..<300 {
            try encoder.encode(source[i], timestampNs: Int64(i) * 33_333_333, into: &out)
            if out.isKeyFrame && i > 0 { keys.append(i) }
            done.store(i + 1, ordering: .releasing)
        }
        while !finished.load(ordering: .acquiring) { usleep(1000) }
        let requests = requestedAt.withLock { $0 }
        #expect(requests.count >= 8)
        for r in requests where r < 299 {
            // Frame index r is the first encoded after the request (or r + 1 if an encode was under way).
            #expect(keys.contains { $0 == r || $0 == r + 1 }, "request after frame \(r): IDRs at \(keys)")
        }
        #expect(keys.count <= requests.count, "IDRs nobody asked for: \(keys) for requests \(requests)")
        #expect(encoder.statistics.keyFrames == keys.count + 1)
    }

    @Test func ratesSetFromAnotherTaskApplyAtTheNextFrameAndBadOnesAreRefusedAtOnce() async throws {
        let encoder = try H264Encoder(settings: .init(width: 320, height: 180))
        let control = encoder.control
        try await Task.detached { try control.setRates(bitrate: 400_000, fps: 15) }.value
        #expect(encoder.settings.targetBitrate == 1_500_000) // not yet: taken at the next frame
        _ = try encoder.encode(I420Buffer(width: 320, height: 180), timestampNs: 0)
        #expect(encoder.settings.targetBitrate == 400_000 && encoder.settings.maxFrameRate == 15)
        #expect(control.statistics.targetBitrate == 400_000 && control.statistics.frames == 1)
        let tiny = #expect(throws: EncoderError.self) { try control.setBitrate(5) }
        #expect(tiny?.message.hasPrefix("bitrate 5 bit/s is out of range") == true, "\(String(describing: tiny))")
        // The refusals name the setting, as the same refusal at creation does (#38).
        #expect(tiny?.setting == "targetBitrate")
        let low = #expect(throws: EncoderError.self) { try control.setRates(bitrate: 5, fps: 30) }
        let fast = #expect(throws: EncoderError.self) { try control.setRates(bitrate: 500_000, fps: .infinity) }
        #expect(low?.setting == "targetBitrate" && fast?.setting == "maxFrameRate", "\(String(describing: low)) \(String(describing: fast))")
        #expect(throws: EncoderError.self) { try control.setBitrate(Int.max) }
    }

    /// A source that adapts its output: the encoder reconfigures (new SPS/PPS, an IDR) at each new size, and
    /// ffprobe decodes every frame at its size. The encoder encodes the size it is given (scaling is the
    /// source's: `VideoSource`).
    @Test func theEncoderFollowsTheInputSize() throws {
        let path = scratch + "/follow.h264"
        let encoder = try H264Encoder(settings: .init(width: 640, height: 360))
        let writer = try AnnexBWriter(path: path)
        let sizes = [(640, 360), (320, 180), (640, 360)]
        var expected: [(Int, Int)] = []
        for (n, (w, h)) in sizes.enumerated() {
            let src = PatternSource(width: w, height: h, count: 4)
            for i in 0..<10 {
                let f = try encoder.encode(src[i], timestampNs: Int64(n * 10 + i) * 33_333_333)
                if i == 0 { #expect(f.isKeyFrame && f.containsParameterSets, "size \(w)x\(h) starts with SPS/PPS + IDR") }
                try writer.write(f)
                expected.append((w, h))
            }
        }
        try writer.close()
        #expect(encoder.statistics.reconfigurations == 2)
        let (rc, out, err) = try run("ffprobe", ["-v", "error", "-f", "h264", "-show_entries", "frame=width,height", "-of", "csv=p=0", path])
        #expect(rc == 0, "\(err)")
        let got = out.split(separator: "\n").map { $0.split(separator: ",").compactMap { Int($0) } }
        #expect(got.count == expected.count)
        #expect(zip(got, expected).allSatisfy { $0.0 == [$0.1.0, $0.1.1] }, "\(got)")
        // A size the encoder cannot take is a clear error, not a crash.
        #expect(throws: EncoderError.self) { try encoder.encode(I420Buffer(width: 8, height: 8), timestampNs: 0) }
    }
}

// MARK: - The RTC-source example of docs/library.md, compiled and run (the test below checks the guide holds this text).

func readmeRTCSourceExample() async throws -> (VideoSource.Statistics, EncoderStatistics) {
    // docs/library.md: rtc-source begin
    let capturer = CameraVideoCapturer(providers: [V4L2DeviceProvider(), FixtureCameraProvider()])
    let camera = try capturer.device("fixture:uvc-webcam") // or "/dev/video0"
    let source = VideoSource(capturer: capturer) // one I420 conversion per frame, shared by all sinks
    source.addSink { frame in _ = frame } // a local preview: full size, every frame
    let toEncoder = source.frames(wants: VideoSinkWants(maxSize: FrameSize(width: 1280, height: 720), maxFrameRate: 30))
    _ = try await capturer.startCapture(device: camera, targetSize: FrameSize(width: 1280, height: 720), fpsLimit: 30)

    let encoder = try H264Encoder(settings: .init(width: 1280, height: 720))
    let control = encoder.control // Sendable: usable from any task or thread
    var congestion: Task<Void, any Error>?
    var encoded = EncodedFrame()
    for try await frame in toEncoder { // I420, adapted; the encoder follows size changes
        try encoder.encode(I420Buffer(frame.buffer)!, timestampNs: frame.timestampNs, into: &encoded)
        if encoder.statistics.frames == 30 {
            congestion = Task.detached { // e.g. the network thread after a REMB and a PLI
                source.requestOutputFormat(maxSize: FrameSize(width: 640, height: 360), maxFps: 15) // no camera restart
                try control.setRates(bitrate: 500_000, fps: 15)
                control.requestKeyFrame()
            }
        }
        if encoder.statistics.frames == 75 { try await capturer.stopCapture() }
    }
    try await congestion?.value
    // source.statistics: input/output fps, drops by reason, output size, conversion p50/p95
    // encoder.statistics: frames, key frames, reconfigurations, bitrate against target, encode p50/p95
    // docs/library.md: rtc-source end
    return (source.statistics, encoder.statistics)
}

@Suite struct ReadmeExampleTests {
    @Test func theRTCSourceExampleRunsAndAdapts() async throws {
        let (source, encoder) = try await readmeRTCSourceExample()
        #expect(source.outputSize == FrameSize(width: 640, height: 360))
        #expect(encoder.reconfigurations == 1 && encoder.size == FrameSize(width: 640, height: 360) && encoder.targetBitrate == 500_000)
        #expect(encoder.keyFrames >= 2 && encoder.frames >= 75)
        #expect(source.dropped[.adaptation, default: 0] > 0) // 30 → 15 fps for the encoder's stream
    }

    @Test func theLibraryGuideShowsTheCompiledExample() throws {
        let here = URL(fileURLWithPath: #filePath)
        let test = try String(contentsOf: here, encoding: .utf8)
        let readme = try String(
            contentsOf: here.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent(
                "docs/library.md"),
            encoding: .utf8)
        func lines(_ s: Substring) -> [String] { s.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty } }
        let begin = try #require(test.range(of: "// docs/library.md: rtc-source begin\n"))
        let end = try #require(test.range(of: "    // docs/library.md: rtc-source end"))
        let code = lines(test[begin.upperBound..<end.lowerBound])
        let start = try #require(readme.range(of: "<!-- rtc-source: compiled in Tests/H264Tests/EncoderControlTests.swift -->\n```swift\n"))
        let block = readme[start.upperBound...]
        let stop = try #require(block.range(of: "```"))
        let shown = lines(block[..<stop.lowerBound]).filter { !$0.hasPrefix("import ") }
        #expect(shown == code, "docs/library.md's block and the compiled example differ")
    }
}

/// One error type for the codec, with a code a caller can switch on.
@Test func theCodecHasOneErrorTypeWithCodes() throws {
    var s = H264Encoder.Settings(width: 640, height: 480)
    s.threads = 9
    do {
        _ = try H264Encoder(settings: s)
        Issue.record("accepted 9 threads")
    } catch { #expect(error.code == .invalidSettings && error.offset == nil && error.message.contains("1...4")) }
    do {
        _ = try AnnexB.split([0, 0, 1])
        Issue.record("accepted a bare start code")
    } catch { #expect(error.code == .malformedBitstream && error.offset != nil && error.description.contains("at byte")) }
    // (Not /dev/full: another suite's full-disk test holds its lock; a file in a missing folder fails as surely.)
    do {
        _ = try AnnexBWriter(path: scratch + "/no-such-folder/out.h264")
        Issue.record("wrote into a missing folder")
    } catch { #expect(error.code == .writeFailed && error.message.contains("no-such-folder"), "\(error)") }
}
