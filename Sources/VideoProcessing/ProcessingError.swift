public import VideoCapture

/// A conversion, encoding or writing failure, with a code and a message naming the value at fault.
public struct ProcessingError: CodedError {
    /// What kind of failure this is, to switch on.
    public var code: Code
    /// A sentence for people, naming the value, size or path at fault; it is the error's `description`.
    public var message: String
    /// An error with `code` and a human-readable `message`.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }
}

/// A rectangle of a frame, in source pixels.
public struct CropRect: Hashable, Sendable, CustomStringConvertible {
    /// Left and top edge, width and height, in pixels of the source frame.
    public var x: Int, y: Int, width: Int, height: Int
    /// A rectangle with its top-left corner at (`x`, `y`), in source pixels.
    public init(x: Int, y: Int, width: Int, height: Int) {
        self.x = x
        self.y = y
        self.width = width
        self.height = height
    }
    /// The rectangle as `WxH+X+Y` (X11 geometry), e.g. `640x360+320+180`.
    public var description: String { "\(width)x\(height)+\(x)+\(y)" }
}

/// The codes of `ProcessingError`.
extension ErrorCode where Domain == ProcessingError {
    /// A buffer or storage holds fewer bytes than its format and size need.
    public static var shortBuffer: Self { Self(rawValue: "short buffer") }
    /// A width or height is zero, negative, too large, or does not match the stream's.
    public static var invalidSize: Self { Self(rawValue: "invalid size") }
    /// The pixel format cannot be converted from or written as asked.
    public static var unsupportedFormat: Self { Self(rawValue: "unsupported format") }
    /// The reader of a pipe went away (EPIPE: `camcap … -o - | head -c 1000`): nothing more can be written there.
    public static var readerGone: Self { Self(rawValue: "reader gone") }
    /// A compressed frame (MJPEG/JPEG) could not be decoded.
    public static var decodeFailed: Self { Self(rawValue: "decode failed") }
    /// An option is out of range: a crop outside the frame, a file name with an unknown extension.
    public static var invalidArgument: Self { Self(rawValue: "invalid argument") }
    /// Writing or encoding failed: the file system, the kernel or libjpeg-turbo refused.
    public static var ioFailed: Self { Self(rawValue: "I/O failed") }
}
