public import VideoCapture

/// The codec's one error type: settings the encoder refuses (with the valid range), OpenH264 failing a call, a
/// malformed bitstream (with the byte offset), or a recording (module `Recording`) that cannot be written.
public struct H264Error: CodedError {
    /// What kind of failure this is, to switch on.
    public var code: Code
    /// A sentence for people, with the value at fault and the valid range.
    public var message: String
    /// Byte offset in the bitstream, for `.malformedBitstream`.
    public var offset: Int?
    /// The setting refused, for `.invalidSettings` (`\H264Encoder.Settings` member name: "sliceMode",
    /// "keyFrameInterval", …), so that a caller can name its own option without reading the message.
    public var setting: String?

    /// An error with every field given.
    public init(_ code: Code, _ message: String, offset: Int? = nil, setting: String? = nil) {
        self.code = code
        self.message = message
        self.offset = offset
        self.setting = setting
    }
    /// An encoder error (`EncoderError("…")`).
    public init(_ message: String) { self.init(.encoderFailed, message) }
    /// A bitstream error at `offset` (`BitstreamError("…", offset:)`).
    public init(_ message: String, offset: Int) { self.init(.malformedBitstream, message, offset: offset) }

    /// The message, followed by ` (at byte N)` when there is an offset.
    public var description: String { offset.map { "\(message) (at byte \($0))" } ?? message }
}

/// The name for an encoder error (code `encoderFailed` or `invalidSettings`): an `H264Error`, kept from the
/// first release. Check `code` to tell the kinds apart.
public typealias EncoderError = H264Error
/// The name for a malformed-bitstream error (code `malformedBitstream`).
public typealias BitstreamError = H264Error

/// The codes of `H264Error`.
extension ErrorCode where Domain == H264Error {
    /// Settings or a frame the encoder cannot take; the message gives the valid range.
    public static var invalidSettings: Self { Self(rawValue: "invalid settings") }
    /// OpenH264 refused a call (or the encoder was closed).
    public static var encoderFailed: Self { Self(rawValue: "encoder failed") }
    /// Annex-B/AVCC/SPS input that is not what it claims; `offset` says where.
    public static var malformedBitstream: Self { Self(rawValue: "malformed bitstream") }
    /// Writing the output failed (disk full, I/O error) or would give an undecodable stream.
    public static var writeFailed: Self { Self(rawValue: "write failed") }
    /// The reader of the pipe a recording was written to went away (EPIPE).
    public static var readerGone: Self { Self(rawValue: "reader gone") }
}
