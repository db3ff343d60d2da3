/// The code of an error, to switch on: each error type of the package has its own (`CaptureError.Code` is
/// `ErrorCode<CaptureError>`), with its values as static members (`.unknownDevice`). A string underneath, so
/// a new code is not a breaking change and a code prints as what it means.
public struct ErrorCode<Domain>: Hashable, Sendable, RawRepresentable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }
}

/// An error with a code and a message that is its whole description (the package's plain error types).
public protocol CodedError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What went wrong, to switch on.
    var code: ErrorCode<Self> { get }
    /// The whole description, for people.
    var message: String { get }
}

extension CodedError {
    public var description: String { message }
}
