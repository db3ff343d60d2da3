import VideoCapture

/// A conversion, encoding or writing failure, with a code and a message naming the value at fault.
public struct ProcessingError: Error, Sendable, Equatable, CustomStringConvertible {
    public struct Code: Hashable, Sendable, RawRepresentable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }
        public static let shortBuffer = Code(rawValue: "short buffer")
        public static let invalidSize = Code(rawValue: "invalid size")
        public static let unsupportedFormat = Code(rawValue: "unsupported format")
        public static let decodeFailed = Code(rawValue: "decode failed")
        public static let invalidArgument = Code(rawValue: "invalid argument")
        public static let ioFailed = Code(rawValue: "I/O failed")
    }
    public var code: Code
    public var message: String
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }
    public var description: String { message }
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
