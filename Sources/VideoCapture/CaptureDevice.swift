/// A camera, as `AVCaptureDevice` describes one: a stable unique id, a name and a position.
public struct CaptureDevice: Hashable, Sendable, CustomStringConvertible {
    /// Where a camera faces, as V4L2's `camera_orientation` control (or an override) reports it.
    public enum Position: String, Sendable, Codable, CaseIterable {
        /// Facing the user (a laptop's or phone's front camera).
        case front
        /// Facing away from the user.
        case back
        /// Attached from outside (USB webcams): the default when the driver says nothing.
        case external
        /// Unknown.
        case unspecified
    }

    /// Stable across reboots where the platform allows (`/dev/v4l/by-id/...`, `fixture:NAME`).
    public var uniqueID: String
    /// The name the driver or fixture gives the camera (V4L2's card name, `HD Pro Webcam C920`).
    public var name: String
    /// Where the camera faces; `.external` unless the driver or an override says otherwise.
    public var position: Position
    /// Where to open it: a V4L2 node (`/dev/video0`), `fixture:NAME` or a fixture file path.
    public var path: String
    /// The driver's name, for display (`uvcvideo`, `vivid`; `fixture` for fixture cameras).
    public var driver: String
    /// Where the camera is attached, for display (V4L2's bus info, `usb-0000:00:14.0-1`; `fixture:NAME` for fixtures).
    public var busInfo: String
    /// The provider that made this device (set by the capturer), so opening it needs no lookup.
    public var providerName: String = ""

    /// A device description by hand (providers make these; a hand-made one is matched to a provider by its `path`).
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
    /// The pixel format of this entry.
    public var pixelFormat: PixelFormat
    /// The sizes offered for this pixel format: one, or a stepwise/continuous range.
    public var size: FrameSizeRange
    /// Nil when the device lists no intervals for this size (then the fps limit is assumed reachable).
    public var intervals: FrameIntervals?
    /// The driver's description (`"YUYV 4:2:2"`), if it gave one.
    public var formatDescription: String

    /// A format entry; an empty `formatDescription` becomes the pixel format's ``PixelFormat/name``.
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
    /// The pixel format the driver set.
    public var pixelFormat: PixelFormat
    /// The frame size the driver set.
    public var size: FrameSize
    /// Bytes per line of the first plane (may exceed width × bytes per pixel).
    public var stride: Int
    /// The frame rate the device set, in frames per second (on V4L2 read back with `VIDIOC_G_PARM`).
    public var fps: Fraction
    /// The colour description the driver gives for this format (V4L2 `colorspace`, `xfer_func`, `ycbcr_enc`,
    /// `quantization`), or the fixture's; every frame of the stream carries it.
    public var colorSpace: VideoColorSpace
    /// A format as a stream reports it after a start.
    public init(pixelFormat: PixelFormat, size: FrameSize, stride: Int, fps: Fraction, colorSpace: VideoColorSpace = .unspecified) {
        self.pixelFormat = pixelFormat
        self.size = size
        self.stride = stride
        self.fps = fps
        self.colorSpace = colorSpace
    }
    public var description: String { "\(pixelFormat) \(size) @ \(fps) fps (stride \(stride))" }
}
