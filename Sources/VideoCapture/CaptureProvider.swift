/// A source of cameras: the V4L2 backend, the fixture cameras. The capturer asks each in turn.
public protocol CaptureDeviceProvider: Sendable {
    /// The cameras this provider sees now.
    func devices() -> [CaptureDevice]
    /// The device a user-given spec names (`/dev/video0`, `fixture:vivid`, a fixture file), or nil when the
    /// spec is not this provider's kind. Throws when it is this provider's kind but wrong.
    func device(for spec: String) throws(CaptureError) -> CaptureDevice?
    /// Every format the device offers natively, in the driver's order; throws when the device cannot be opened or
    /// queried.
    func formats(of device: CaptureDevice) throws(CaptureError) -> [CaptureFormat]
    /// Opens and starts streaming; returns once the first buffers are queued and the format is applied.
    func openStream(device: CaptureDevice, request: StreamRequest, sink: FrameSink) throws(CaptureError) -> any CaptureStream
    /// The device's controls with their current values, in the driver's order (control-class entries included,
    /// as section headings). Works while the device streams and while it does not.
    func controls(of device: CaptureDevice) throws(CaptureError) -> [CameraControl]
    /// Sets one control after checking it (`CameraControl.validate`) and returns it read back: the value the
    /// device really applied (drivers clamp and round). Works while streaming and not.
    func setControl(_ id: CameraControlID, to value: CameraControl.Value, on device: CaptureDevice) throws(CaptureError) -> CameraControl
}

public extension CaptureDeviceProvider {
    func controls(of device: CaptureDevice) throws(CaptureError) -> [CameraControl] { [] }
    func setControl(_ id: CameraControlID, to value: CameraControl.Value, on device: CaptureDevice) throws(CaptureError) -> CameraControl {
        throw CaptureError(.unknownControl, "\(device.path) has no controls", device: device.path)
    }
}

/// What to ask the device for.
public struct StreamRequest: Sendable, Hashable, CustomStringConvertible {
    /// The pixel format to set.
    public var pixelFormat: PixelFormat
    /// The exact size to set (one the format entry offers).
    public var size: FrameSize
    /// The frame rate to ask for, in frames per second (the driver may apply another: see ``CaptureStream/applied``).
    public var fps: Fraction
    /// A request for one format, size and rate.
    public init(pixelFormat: PixelFormat, size: FrameSize, fps: Fraction) {
        self.pixelFormat = pixelFormat
        self.size = size
        self.fps = fps
    }
    /// `YUYV 640x480 @ 25 fps`.
    public var description: String { "\(pixelFormat) \(size) @ \(fps) fps" }
}

/// Why a frame did not reach the consumers.
public enum FrameDropReason: String, Sendable, CaseIterable, CustomStringConvertible {
    /// The consumers were still busy with earlier frames; the newest frame won (late-frame policy).
    case consumerBusy = "consumer busy"
    /// The driver skipped sequence numbers (it had no free buffer).
    case driverDropped = "driver dropped"
    /// The driver flagged the buffer as corrupt (`V4L2_BUF_FLAG_ERROR`).
    case corruptBuffer = "corrupt buffer"
    /// The buffer held fewer bytes than the format needs.
    case shortBuffer = "short buffer"
    /// No delegate and no frame stream was subscribed when the frame arrived.
    case noConsumer = "no consumer"
    /// Consumers held every buffer and the copy pool was exhausted (see the frame lifetime contract).
    case buffersHeld = "buffers held by consumers"
    public var description: String { rawValue }
}

/// Where a stream sends what it produces. Called on the stream's own thread.
public struct FrameSink: Sendable {
    /// Called with each frame, in capture order.
    public let frame: @Sendable (VideoFrame) -> Void
    /// Called with a reason and a count when the stream loses frames (driver gaps, corrupt or short buffers,
    /// every buffer held by consumers).
    public let dropped: @Sendable (FrameDropReason, Int) -> Void
    /// A fatal error: the stream has already released its resources when this is called.
    public let failed: @Sendable (CaptureError) -> Void
    /// The next frame was copied out of driver memory because consumers held every other buffer.
    public let copied: @Sendable () -> Void
    /// A sink from its callbacks; `copied` defaults to doing nothing.
    public init(
        frame: @escaping @Sendable (VideoFrame) -> Void,
        dropped: @escaping @Sendable (FrameDropReason, Int) -> Void,
        failed: @escaping @Sendable (CaptureError) -> Void,
        copied: @escaping @Sendable () -> Void = {}
    ) {
        self.frame = frame
        self.dropped = dropped
        self.failed = failed
        self.copied = copied
    }
}

/// A running stream. `stop()` is idempotent, may be called from any thread (also after a failure), and
/// returns once the stream's thread has ended and every resource is released.
public protocol CaptureStream: AnyObject, Sendable {
    /// What the device really applied, read back after the start.
    var applied: AppliedFormat { get }
    /// Stops streaming and releases the device; see the protocol's rules (idempotent, any thread, returns when done).
    func stop()
    /// For a camera that encodes (H.264): asks its next frame to be a key frame (a V4L2 camera's
    /// `V4L2_CID_MPEG_VIDEO_FORCE_KEY_FRAME`). Returns false when the camera has no way to (the default).
    func requestKeyFrame() -> Bool
    /// For a camera that encodes (H.264): asks for a target bitrate in bits per second (a V4L2 camera's
    /// `V4L2_CID_MPEG_VIDEO_BITRATE`, clamped to its range). Returns false when the camera has no way to (the default).
    func requestBitrate(_ bitsPerSecond: Int) -> Bool
}

extension CaptureStream {
    /// False: the stream cannot be asked for a key frame.
    public func requestKeyFrame() -> Bool { false }
    /// False: the stream cannot be asked for a bitrate.
    public func requestBitrate(_ bitsPerSecond: Int) -> Bool { false }
}
