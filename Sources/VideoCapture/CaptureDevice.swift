/// A camera, as `AVCaptureDevice` describes one: a stable unique id, a name and a position.
public struct CaptureDevice: Hashable, Sendable, CustomStringConvertible {
    public enum Position: String, Sendable, Codable, CaseIterable { case front, back, external, unspecified }

    /// Stable across reboots where the platform allows (`/dev/v4l/by-id/...`, `fixture:NAME`).
    public var uniqueID: String
    public var name: String
    public var position: Position
    /// Where to open it: a V4L2 node (`/dev/video0`), `fixture:NAME` or a fixture file path.
    public var path: String
    /// The driver and bus, for display (`uvcvideo`, `usb-0000:00:14.0-1`).
    public var driver: String
    public var busInfo: String
    /// The provider that made this device (set by the capturer), so opening it needs no lookup.
    public var providerName: String = ""

    public init(
        uniqueID: String, name: String, position: Position = .external, path: String,
        driver: String = "", busInfo: String = ""
    ) {
        self.uniqueID = uniqueID
        self.name = name
        self.position = position
        self.path = path
        self.driver = driver
        self.busInfo = busInfo
    }
    public var description: String { "\(name) (\(path))" }
}

/// One (pixel format, size range, frame intervals) the device offers.
public struct CaptureFormat: Hashable, Sendable, CustomStringConvertible {
    public var pixelFormat: PixelFormat
    public var size: FrameSizeRange
    /// Nil when the device lists no intervals for this size (then the fps limit is assumed reachable).
    public var intervals: FrameIntervals?
    /// The driver's description (`"YUYV 4:2:2"`), if it gave one.
    public var formatDescription: String

    public init(pixelFormat: PixelFormat, size: FrameSizeRange, intervals: FrameIntervals?, formatDescription: String = "") {
        self.pixelFormat = pixelFormat
        self.size = size
        self.intervals = intervals
        self.formatDescription = formatDescription.isEmpty ? pixelFormat.name : formatDescription
    }
    public var description: String { "\(pixelFormat) \(size)" }
}

/// What the device really applied after a start (read back from the driver, not what was asked).
public struct AppliedFormat: Hashable, Sendable, CustomStringConvertible {
    public var pixelFormat: PixelFormat
    public var size: FrameSize
    /// Bytes per line of the first plane (may exceed width × bytes per pixel).
    public var stride: Int
    public var fps: Fraction
    /// The colour description the driver gives for this format (V4L2 `colorspace`, `xfer_func`, `ycbcr_enc`,
    /// `quantization`), or the fixture's; every frame of the stream carries it.
    public var colorSpace: VideoColorSpace
    public init(pixelFormat: PixelFormat, size: FrameSize, stride: Int, fps: Fraction, colorSpace: VideoColorSpace = .unspecified) {
        self.pixelFormat = pixelFormat
        self.size = size
        self.stride = stride
        self.fps = fps
        self.colorSpace = colorSpace
    }
    public var description: String { "\(pixelFormat) \(size) @ \(fps) fps (stride \(stride))" }
}
