/// The code of an error, to switch on: each error type of the package has its own (`CaptureError.Code` is
/// `ErrorCode<CaptureError>`), with its values as static members (`.unknownDevice`). A string underneath, so
/// a new code is not a breaking change and a code prints as what it means.
public struct ErrorCode<Domain>: Hashable, Sendable, RawRepresentable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }
}

/// An error with a code and a message: every error type of the package (`CaptureError`, `H264Error`, `RTPError`,
/// the parse errors…). The protocol brings what each used to write out: its `Code` (`ErrorCode<Self>`, whose values
/// are static members in an extension of the type's own) and, unless the type says more (a file and line, an errno),
/// the message as its whole description.
public protocol CodedError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What went wrong, to switch on.
    var code: ErrorCode<Self> { get }
    /// What went wrong, for people (the description, or the heart of it).
    var message: String { get }
}

extension CodedError {
    /// The type's codes: `ErrorCode<Self>` (`CaptureError.Code`, `.unknownDevice`).
    public typealias Code = ErrorCode<Self>
    /// The message.
    public var description: String { message }
}
