import CV4L2
import Foundation
public import H264
import SystemIO
public import V4L2Capture
public import VideoCapture
#if canImport(Glibc)
    import Glibc
#endif

/// A simulated Raspberry Pi `bcm2835-codec` H.264 encoder node (`/dev/video11`), played to the real
/// `V4L2M2MEncoder` through the backend's kernel seam, with the documented behaviours of the real one. Each
/// behaviour comes from a public report:
///
/// - multi-planar only; H.264 on CAPTURE, `YU12` or `NV12` on OUTPUT (ffmpeg's log on a Pi: "driver 'bcm2835-codec'
///   on card 'bcm2835-codec-encode' in mplane mode … output=YU12/yuv420p capture=H264",
///   https://github.com/raspberrypi/linux/issues/5423);
/// - OUTPUT sizes aligned, width to 32 and height to 16 ("YUV images are always padded to a multiple of 32 pixels on
///   width, 16 pixels on height", https://github.com/raspberrypi/userland/issues/329), lines of 64-byte multiples
///   ("bytesperline for YUV420/YVU420 needs to be 64", https://github.com/raspberrypi/linux/pull/4746), and the crop
///   selection on OUTPUT for the real size;
/// - the level is checked against size × frame rate at STREAMON, which fails (ESRCH, "Failed enabling i/p port,
///   ret -3") when it does not fit; the default level is 4.1, so sizes above 1080p30-class need the level set
///   (https://github.com/raspberrypi/linux/issues/3467, https://github.com/raspberrypi/linux/pull/6283 for 5.0 and
///   5.1, https://github.com/raspberrypi/linux/issues/4938 for the errno);
/// - an I-period of 1 hangs: no coded frame ever comes (https://github.com/raspberrypi/linux/issues/4740), and there
///   is no GOP-size control (ffmpeg's "Failed to set gop size: Invalid argument", same report);
/// - `V4L2_CID_MPEG_VIDEO_FORCE_KEY_FRAME` is there, with a switch to remove it (older drivers lacked it:
///   https://github.com/raspberrypi/linux/issues/3171);
/// - a stall switch: no CAPTURE buffer after frame N ("The first frame gets process normally and then it stops
///   sending more frames", https://github.com/raspberrypi/linux/issues/4906);
/// - buffers are CMA memory that leaks when the node is closed without `REQBUFS(0)` first: `leakedBytes` counts it
///   ("close and open the h264 encoder multiple times without eventually running out of CMA",
///   https://github.com/raspberrypi/rpicam-apps/pull/182).
///
/// The coded frames are real H.264 (OpenH264 plays the firmware, with the device's bitrate, I-period and
/// force-key-frame controls), so every output downstream takes them.
///
/// ```swift
/// import FixtureCameras
///
/// let device = try FixtureM2MDevice(name: "bcm2835", options: .init(query: "stall-after=100"))
/// let factory = device.factory() // for EncodeStage.makeEncoder or ResilientEncoder's primary
/// ```
public final class FixtureM2MDevice: @unchecked Sendable {
    // @unchecked: every mutable member is guarded by `lock`.

    /// The simulated behaviours that can be switched.
    public struct Options: Sendable, Equatable {
        /// Each stalling open gives no CAPTURE buffer after this many coded frames (nil: never stalls).
        public var stallAfter: Int?
        /// How many opens stall (1: the first; a restarted encoder then runs on). Ignored without `stallAfter`.
        public var stalls: Int
        /// The device has `V4L2_CID_MPEG_VIDEO_FORCE_KEY_FRAME`.
        public var forceKeyFrame: Bool
        /// The device has `V4L2_CID_MPEG_VIDEO_H264_LEVEL` (without it the level stays the default, 4.1).
        public var levelControl: Bool
        /// Everything as the real device has it, and no stall.
        public init(stallAfter: Int? = nil, stalls: Int = 1, forceKeyFrame: Bool = true, levelControl: Bool = true) {
            self.stallAfter = stallAfter
            self.stalls = stalls
            self.forceKeyFrame = forceKeyFrame
            self.levelControl = levelControl
        }
        /// Options from a query string, as a command line gives them: `stall-after=N`, `stalls=N`,
        /// `no-force-key-frame`, `no-level`, joined by `&` ("stall-after=100&stalls=3"). Anything else is an error
        /// naming it.
        public init(query: String) throws(CaptureError) {
            self.init()
            for item in query.split(separator: "&") where !item.isEmpty {
                let kv = item.split(separator: "=", maxSplits: 1).map(String.init)
                switch (kv[0], kv.count == 2 ? Int(kv[1]) : nil) {
                case ("stall-after", let n?) where n >= 0: stallAfter = n
                case ("stalls", let n?) where n >= 1: stalls = n
                case ("no-force-key-frame", nil) where kv.count == 1: forceKeyFrame = false
                case ("no-level", nil) where kv.count == 1: levelControl = false
                default:
                    throw CaptureError(
                        .invalidArgument,
                        "fixture encoder option '\(item)' is not one of stall-after=N, stalls=N (N >= 1), no-force-key-frame, no-level")
                }
            }
        }
    }

    /// The simulated devices' names.
    public static let names = ["bcm2835"]
    /// The device's name ("bcm2835").
    public let name: String
    /// The node the device pretends to be (`/dev/video11`, the Pi's encoder).
    public let path = "/dev/video11"
    /// The switches it was made with.
    public let options: Options

    let lock = NSLock()
    /// Called (without the lock) when a poll finds nothing ready, with its timeout: sleeps that long by default, as
    /// a real poll on a stalled device would; tests advance a simulated clock instead.
    let pollWait: @Sendable (Int32) -> Void
    var contexts: [Int32: Context] = [:]
    private var nextFd: Int32 = 100
    private var stallsLeft: Int
    private var leaked = 0, opened = 0, coded = 0
    private var log: [String] = []

    /// A simulated device. An unknown name is an error listing the known ones.
    public convenience init(name: String, options: Options = Options()) throws(CaptureError) {
        try self.init(name: name, options: options) { ms in
            Sleep.until(monotonicNs: SystemClock.monotonicNanoseconds() + Int64(ms) * 1_000_000)
        }
    }

    /// A simulated device from a command line's spec: a name, then options after `?` ("bcm2835?stall-after=100&stalls=3";
    /// `Options.init(query:)`), as in `--encoder v4l2m2m:fixture:bcm2835?stall-after=100`.
    public convenience init(spec: String) throws(CaptureError) {
        let parts = spec.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
        try self.init(name: parts[0], options: try Options(query: parts.count > 1 ? parts[1] : ""))
    }

    /// A simulated device whose polls call `pollWait` with their timeout when nothing is ready (a test's clock).
    package init(name: String, options: Options, pollWait: @escaping @Sendable (Int32) -> Void) throws(CaptureError) {
        guard Self.names.contains(name) else {
            throw CaptureError(.unknownDevice, "no fixture encoder '\(name)'; there is \(Self.names.joined(separator: ", "))")
        }
        self.name = name
        self.options = options
        self.pollWait = pollWait
        stallsLeft = options.stallAfter == nil ? 0 : options.stalls
    }

    /// CMA bytes the device's buffers hold now.
    public var cmaBytes: Int { lock.withLock { contexts.values.reduce(0) { $0 + $1.heldBytes } } }
    /// CMA bytes lost: buffers of opens that were closed without `REQBUFS(0)`.
    public var leakedBytes: Int { lock.withLock { leaked } }
    /// Times the node was opened.
    public var opens: Int { lock.withLock { opened } }
    /// Coded frames given, over every open.
    public var framesCoded: Int { lock.withLock { coded } }
    /// The controls set and the stream events, in order ("H264 Level=11", "STREAMON OUTPUT", "stall after 100").
    public var events: [String] { lock.withLock { log } }

    func note(_ s: String) { log.append(s) }

    /// Opens the simulated node as a `V4L2M2MEncoder` (H.264) for `settings`, waiting up to `timeoutMs` for each
    /// coded frame.
    public func encoder(settings: H264Encoder.Settings, control: EncoderControl = EncoderControl(), timeoutMs: Int32 = 1000)
        throws(CaptureError) -> V4L2M2MEncoder
    {
        let e = try V4L2M2MEncoder(path: path, codedFormat: .h264, settings: settings, control: control, buffers: 4, kernel: Kernel(device: self))
        e.timeoutMs = timeoutMs
        return e
    }

    /// A factory for `EncodeStage.makeEncoder` or `ResilientEncoder`'s primary: each call opens the node again.
    public func factory(timeoutMs: Int32 = 1000) -> ResilientEncoder.Factory {
        { [self] settings, control in try encoder(settings: settings, control: control, timeoutMs: timeoutMs) }
    }

    /// The name a summary gives it: "v4l2m2m fixture:bcm2835 (/dev/video11)".
    public var summaryName: String { "v4l2m2m fixture:\(name) (\(path))" }

    /// The device's side of the kernel seam.
    package var kernel: any V4L2Kernel { Kernel(device: self) }

    struct Kernel: V4L2Kernel {
        let device: FixtureM2MDevice
        func open(_ path: String) -> (fd: Int32, errno: Int32) { device.open() }
        func close(_ fd: Int32) { device.close(fd) }
        func ioctl(_ fd: Int32, _ request: UInt, _ arg: UnsafeMutableRawPointer) -> Int32 { device.ioctl(fd, request, arg) }
        func mmap(_ fd: Int32, length: Int, offset: Int64) -> (pointer: UnsafeMutableRawPointer?, errno: Int32) {
            device.mmap(fd, length: length, offset: offset)
        }
        func munmap(_ pointer: UnsafeMutableRawPointer, length: Int) {}
        func poll(_ fd: Int32, timeoutMs: Int32) -> Int32 { device.poll(fd, timeoutMs: timeoutMs) }
    }

    private func open() -> (fd: Int32, errno: Int32) {
        lock.withLock {
            let fd = nextFd
            nextFd += 1
            opened += 1
            contexts[fd] = Context(forceKeyFrame: options.forceKeyFrame, levelControl: options.levelControl)
            return (fd, 0)
        }
    }

    private func close(_ fd: Int32) {
        lock.withLock {
            guard let c = contexts.removeValue(forKey: fd) else { return }
            let held = c.heldBytes
            if held > 0 {
                leaked += held // the firmware keeps what was never handed back
                note("close with \(held) bytes of buffers: leaked")
            }
            c.freeAll()
        }
    }

    private func mmap(_ fd: Int32, length: Int, offset: Int64) -> (pointer: UnsafeMutableRawPointer?, errno: Int32) {
        lock.withLock {
            guard let c = contexts[fd] else { return (nil, EBADF) }
            let q = offset >= Context.captureOffset ? c.capture : c.output
            let i = Int(offset % Context.captureOffset) / 4096
            guard i < q.memory.count, length <= q.length else { return (nil, EINVAL) }
            return (q.memory[i], 0)
        }
    }

    private func poll(_ fd: Int32, timeoutMs: Int32) -> Int32 {
        let ready = lock.withLock { contexts[fd].map { !$0.capture.done.isEmpty || !$0.output.done.isEmpty } ?? false }
        if ready { return Int32(POLLIN) }
        if timeoutMs > 0 { pollWait(timeoutMs) }
        return lock.withLock { contexts[fd].map { !$0.capture.done.isEmpty } ?? false } ? Int32(POLLIN) : 0
    }

    private func ioctl(_ fd: Int32, _ request: UInt, _ arg: UnsafeMutableRawPointer) -> Int32 {
        lock.withLock {
            guard let c = contexts[fd] else { return EBADF }
            let r = c.handle(request, arg, device: self)
            if let stallAt = options.stallAfter, c.armed == nil {
                c.armed = stallsLeft > 0 ? stallAt : Int.max
                if stallsLeft > 0 { stallsLeft -= 1 }
            }
            coded += c.codedSinceLast
            c.codedSinceLast = 0
            return r
        }
    }
}
