import CV4L2
import FixtureCameras
import H264
import Synchronization
import Testing
import V4L2Capture
import VideoCapture

/// A simulated clock: a poll that finds nothing ready moves it on by its timeout (a real poll would wait that long).
final class SimulatedClock: Sendable {
    private let ns = Atomic<Int64>(1_000_000_000)
    var now: Int64 { ns.load(ordering: .relaxed) }
    func advance(_ by: Int64) { ns.add(by, ordering: .relaxed) }
    var reader: @Sendable () -> Int64 { { [self] in now } }
}

func bcm2835(_ query: String = "", clock: SimulatedClock = SimulatedClock()) throws -> FixtureM2MDevice {
    try FixtureM2MDevice(name: "bcm2835", options: .init(query: query)) { ms in clock.advance(Int64(ms) * 1_000_000) }
}

func settings(_ w: Int = 640, _ h: Int = 360, fps: Double = 30, key: Int? = 60, kbps: Int = 1000) -> H264Encoder.Settings {
    var s = H264Encoder.Settings(width: w, height: h)
    s.maxFrameRate = fps
    s.keyFrameInterval = key
    s.targetBitrate = kbps * 1000
    return s
}

func picture(_ n: Int, _ w: Int = 640, _ h: Int = 360) -> I420Buffer {
    let p = I420Buffer(width: w, height: h)
    if let planes = p.writablePlanes {
        for r in 0..<h {
            for x in 0..<w { planes.y[r * p.strideY + x] = UInt8(truncatingIfNeeded: x + r + n * 3) }
        }
        planes.u.update(repeating: 128, count: p.strideU * p.chromaHeight)
        planes.v.update(repeating: UInt8(truncatingIfNeeded: 100 + n), count: p.strideV * p.chromaHeight)
    }
    return p
}

/// Each documented behaviour of bcm2835-codec (`FixtureM2MDevice`, with the public report of each) and what the
/// production `V4L2M2MEncoder` does about it.
@Suite("bcm2835-codec quirks (simulated) and the M2M encoder's reactions")
struct BCM2835EncoderTests {
    @Test("multi-planar, YU12 in, H.264 out: real H.264 with the picture's timestamps, the first frame a key frame with SPS/PPS")
    func formats() throws {
        let device = try bcm2835()
        let e = try device.encoder(settings: settings(1280, 720))
        #expect(e.isMultiPlanar && e.codedFormat == .h264 && e.bufferSize == FrameSize(width: 1280, height: 720))
        var out = EncodedFrame()
        for n in 0..<5 {
            try e.encode(picture(n, 1280, 720), timestampNs: Int64(n) * 33_333_000, into: &out)
            #expect(!out.isSkipped && out.timestampNs == Int64(n) * 33_333_000)
            #expect(Array(out.data.prefix(4)) == [0, 0, 0, 1])
            #expect(out.isKeyFrame == (n == 0))
        }
        #expect(!device.events.contains { $0.hasPrefix("crop") }, "an aligned size needs no crop: \(device.events)")
        // The raw formats it takes: YU12 and NV12 (anything else becomes YU12); single-planar types are not its.
        let k = device.kernel
        let fd = k.open(device.path).fd
        for (asked, kept) in [(PixelFormat.nv12, PixelFormat.nv12), (.yuyv, .i420), (.i420, .i420)] {
            var f = v4l2_format()
            f.type = CV4L2_BUF_TYPE_VIDEO_OUTPUT_MPLANE
            (f.fmt.pix_mp.width, f.fmt.pix_mp.height, f.fmt.pix_mp.pixelformat) = (640, 480, asked.rawValue)
            #expect(withUnsafeMutableBytes(of: &f) { k.ioctl(fd, CV4L2_VIDIOC_S_FMT, $0.baseAddress!) } == 0)
            #expect(f.fmt.pix_mp.pixelformat == kept.rawValue, "\(asked)")
        }
        var single = v4l2_format()
        single.type = CV4L2_BUF_TYPE_VIDEO_OUTPUT
        #expect(withUnsafeMutableBytes(of: &single) { k.ioctl(fd, CV4L2_VIDIOC_S_FMT, $0.baseAddress!) } == EINVAL)
        k.close(fd)
    }

    @Test("sizes are aligned (width 32, height 16): the padded buffer is kept, the picture written into it, the crop set to the real size")
    func alignment() throws {
        let device = try bcm2835()
        let e = try device.encoder(settings: settings(640, 360))
        #expect(e.bufferSize == FrameSize(width: 640, height: 368))
        #expect(device.events.contains("crop 640x360 of 640x368"), "\(device.events)")
        let odd = try device.encoder(settings: settings(784, 450)) // 784 = 24.5 x 32: padded to 800, lines of 832 bytes
        #expect(odd.bufferSize == FrameSize(width: 800, height: 464))
        #expect(device.events.contains("crop 784x450 of 800x464"), "\(device.events)")
        var out = EncodedFrame()
        for n in 0..<3 { try odd.encode(picture(n, 784, 450), timestampNs: Int64(n), into: &out) }
        #expect(!out.isSkipped && out.data.count > 100)
    }

    @Test("controls: CBR, the bitrate, the I-period, constrained baseline, and the level from size x rate")
    func controls() throws {
        let device = try bcm2835()
        let e = try device.encoder(settings: settings(1280, 720, fps: 30, key: 60, kbps: 2000))
        let c = e.controls
        #expect(c.bitrateMode == "CBR" && c.bitrate == 2_000_000 && c.iPeriod == 60 && c.gopSize == nil)
        #expect(c.profile == "constrained baseline" && c.level?.name == "3.1" && c.keyFrames == .control)
        #expect(c.repeatsSequenceHeader && c.notes.isEmpty)
        for expected in ["Bitrate Mode=1", "Video Bitrate=2000000", "H264 I-Frame Period=60", "H264 Profile=1", "H264 Level=9"] {
            #expect(device.events.contains(expected), "\(expected) in \(device.events)")
        }
        // 1080p30 needs 4.0 (8160 macroblocks a frame, 244800 a second); VGA at 30 needs 3 (6by9's figures).
        #expect(try bcm2835().encoder(settings: settings(1920, 1080)).controls.level?.name == "4")
        #expect(try bcm2835().encoder(settings: settings(640, 480)).controls.level?.name == "3")
    }

    @Test("the level must be set: 1920x1200 at 30 fps is refused at STREAMON at the default 4.1, taken at the 5.0 the backend sets")
    func level() throws {
        let device = try bcm2835()
        let e = try device.encoder(settings: settings(1920, 1200))
        #expect(e.controls.level?.name == "5")
        var out = EncodedFrame()
        try e.encode(picture(0, 1920, 1200), timestampNs: 0, into: &out)
        #expect(out.isKeyFrame)
        e.close()
        let old = try bcm2835("no-level") // a device without the level control keeps its default, 4.1
        let error = #expect(throws: CaptureError.self) { try old.encoder(settings: settings(1920, 1200)) }
        #expect(error?.operation?.contains("VIDIOC_STREAMON") == true, "\(String(describing: error))")
        #expect(error?.errno == ESRCH)
        #expect(old.events.contains("STREAMON OUTPUT refused: 1920x1200 at 30.0 fps is above level 4.1"), "\(old.events)")
        #expect(old.leakedBytes == 0 && old.cmaBytes == 0, "the failed start handed its buffers back before closing")
    }

    @Test("an I-period of 1 hangs the device: the backend sets 2 and forces every frame, so all-intra still works")
    func iPeriodOne() throws {
        let device = try bcm2835()
        let e = try device.encoder(settings: settings(key: 1))
        #expect(e.controls.iPeriod == 2 && e.controls.forcesEveryFrame)
        #expect(e.controls.notes == ["I-period 2 instead of 1 (an I-period of 1 hangs some encoders)"])
        #expect(!device.events.contains("H264 I-Frame Period=1"))
        var out = EncodedFrame()
        for n in 0..<6 {
            try e.encode(picture(n), timestampNs: Int64(n), into: &out)
            #expect(out.isKeyFrame, "frame \(n)")
        }
        // Without a force-key-frame control: an I-period of 2 (a key frame every other frame), never 1.
        let bare = try bcm2835("no-force-key-frame")
        let b = try bare.encoder(settings: settings(key: 1))
        #expect(b.controls.iPeriod == 2 && !b.controls.forcesEveryFrame)
        var keys: [Bool] = []
        for n in 0..<6 {
            try b.encode(picture(n), timestampNs: Int64(n), into: &out)
            keys.append(out.isKeyFrame)
        }
        #expect(keys == [true, false, true, false, true, false])
    }

    @Test("a key frame asked for: through FORCE_KEY_FRAME where the device has it, else by an encoder reset on the same open")
    func keyFrames() throws {
        for query in ["", "no-force-key-frame"] {
            let device = try bcm2835(query)
            let e = try device.encoder(settings: settings())
            #expect(e.controls.keyFrames == (query.isEmpty ? .control : .restart))
            var out = EncodedFrame()
            var keys: [Int] = []
            for n in 0..<10 {
                if n == 5 { e.control.requestKeyFrame() }
                try e.encode(picture(n), timestampNs: Int64(n), into: &out)
                if out.isKeyFrame { keys.append(n) }
            }
            #expect(keys == [0, 5], "\(query): \(keys)")
            #expect(device.opens == 1)
            if query.isEmpty {
                #expect(device.events.contains("Force Key Frame"))
            } else {
                #expect(device.events.contains("STREAMOFF CAPTURE") && device.events.last { $0.hasPrefix("STREAMON") } == "STREAMON CAPTURE")
            }
        }
    }

    @Test("bitrate requests (congestion control, REMB) reach the device's bitrate control before the next frame, within its range")
    func bitrateRequests() throws {
        let device = try bcm2835()
        let e = try device.encoder(settings: settings(kbps: 1000))
        var out = EncodedFrame()
        try e.encode(picture(0), timestampNs: 0, into: &out)
        try e.control.setBitrate(500_000)
        try e.encode(picture(1), timestampNs: 1, into: &out)
        #expect(device.events.last { $0.hasPrefix("Video Bitrate") } == "Video Bitrate=500000")
        #expect(e.statistics.targetBitrate == 500_000 && e.control.statistics.targetBitrate == 500_000 && e.settings.targetBitrate == 500_000)
        try e.control.setBitrate(10_000) // below the device's 25 kbps floor
        try e.encode(picture(2), timestampNs: 2, into: &out)
        #expect(e.controls.bitrate == 25_000)
    }

    @Test("CMA is lost when a node is closed without REQBUFS(0); the backend hands its buffers back, open after open")
    func cma() throws {
        let device = try bcm2835()
        var out = EncodedFrame()
        for n in 0..<5 {
            let e = try device.encoder(settings: settings())
            #expect(device.cmaBytes > 0)
            try e.encode(picture(n), timestampNs: 0, into: &out)
            e.close()
        }
        #expect(device.opens == 5 && device.leakedBytes == 0 && device.cmaBytes == 0)
        // What the fake counts: a client that closes with its buffers still requested.
        let k = device.kernel
        let fd = k.open(device.path).fd
        var rb = v4l2_requestbuffers()
        rb.count = 2
        rb.type = CV4L2_BUF_TYPE_VIDEO_OUTPUT_MPLANE
        rb.memory = CV4L2_MEMORY_MMAP
        #expect(withUnsafeMutableBytes(of: &rb) { k.ioctl(fd, CV4L2_VIDIOC_REQBUFS, $0.baseAddress!) } == 0)
        k.close(fd)
        #expect(device.leakedBytes == 2 * 1920 * 1088 * 3 / 2)
    }

    @Test("a stall (no CAPTURE buffer after frame N) ends the encode with a timeout after the encoder's wait")
    func stall() throws {
        let clock = SimulatedClock()
        let device = try bcm2835("stall-after=5", clock: clock)
        let e = try device.encoder(settings: settings(), timeoutMs: 1000)
        var out = EncodedFrame()
        for n in 0..<5 { try e.encode(picture(n), timestampNs: Int64(n), into: &out) }
        let before = clock.now
        let error = #expect(throws: CaptureError.self) { try e.encode(picture(5), timestampNs: 5, into: &out) }
        #expect(error?.code == .timeout)
        #expect(clock.now - before == 1_000_000_000)
        #expect(device.events.contains("stall after 5"))
    }

    @Test("options from a command line's spec, and refusals naming the value")
    func spec() throws {
        let d = try FixtureM2MDevice(spec: "bcm2835?stall-after=100&stalls=3&no-force-key-frame")
        #expect(d.options == .init(stallAfter: 100, stalls: 3, forceKeyFrame: false, levelControl: true))
        #expect(d.summaryName == "v4l2m2m fixture:bcm2835 (/dev/video11)")
        let bad = #expect(throws: CaptureError.self) { try FixtureM2MDevice(spec: "bcm2835?stall=1") }
        #expect(bad?.message.contains("'stall=1'") == true)
        let unknown = #expect(throws: CaptureError.self) { try FixtureM2MDevice(spec: "venus") }
        #expect(unknown?.message == "no fixture encoder 'venus'; there is bcm2835")
    }
}
