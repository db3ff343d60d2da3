public import VideoCapture

/// A conversion, encoding or writing failure, with a code and a message naming the value at fault.
public struct ProcessingError: CodedError {
    public typealias Code = ErrorCode<ProcessingError>
    public var code: Code
    public var message: String
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }
}

/// A rectangle of a frame, in source pixels.
public struct CropRect: Hashable, Sendable, CustomStringConvertible {
    public var x: Int, y: Int, width: Int, height: Int
    public init(x: Int, y: Int, width: Int, height: Int) {
        self.x = x
        self.y = y
        self.width = width
        self.height = height
    }
    public var description: String { "\(width)x\(height)+\(x)+\(y)" }
}

extension ErrorCode where Domain == ProcessingError {
    public static var shortBuffer: Self { Self(rawValue: "short buffer") }
    public static var invalidSize: Self { Self(rawValue: "invalid size") }
    public static var unsupportedFormat: Self { Self(rawValue: "unsupported format") }
    public static var decodeFailed: Self { Self(rawValue: "decode failed") }
    public static var invalidArgument: Self { Self(rawValue: "invalid argument") }
    public static var ioFailed: Self { Self(rawValue: "I/O failed") }
}
