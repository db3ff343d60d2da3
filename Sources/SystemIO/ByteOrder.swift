// Big-endian (network order) reads and writes, the package's one set: RTP, RTCP, STUN, H.264 and the
// writers' containers all use these.

extension UnsafeRawBufferPointer {
    /// The big-endian UInt16 at `offset` (the caller has checked the bounds).
    @inlinable package func bigEndianUInt16(at offset: Int) -> UInt16 { UInt16(self[offset]) << 8 | UInt16(self[offset + 1]) }
    /// The big-endian UInt32 at `offset` (the caller has checked the bounds).
    @inlinable package func bigEndianUInt32(at offset: Int) -> UInt32 {
        UInt32(self[offset]) << 24 | UInt32(self[offset + 1]) << 16 | UInt32(self[offset + 2]) << 8 | UInt32(self[offset + 3])
    }
}

extension UnsafeMutableRawBufferPointer {
    /// Stores `value` big-endian at `offset` (the caller has checked the bounds).
    @inlinable package func storeBigEndian(_ value: UInt16, at offset: Int) {
        self[offset] = UInt8(value >> 8)
        self[offset + 1] = UInt8(value & 0xff)
    }
    /// Stores `value` big-endian at `offset` (the caller has checked the bounds).
    @inlinable package func storeBigEndian(_ value: UInt32, at offset: Int) {
        self[offset] = UInt8(value >> 24)
        self[offset + 1] = UInt8((value >> 16) & 0xff)
        self[offset + 2] = UInt8((value >> 8) & 0xff)
        self[offset + 3] = UInt8(value & 0xff)
    }
}

extension Array where Element == UInt8 {
    /// Appends `value` big-endian.
    @inlinable package mutating func appendBigEndian(_ value: UInt16) {
        append(UInt8(value >> 8))
        append(UInt8(value & 0xff))
    }
    /// Appends `value` big-endian.
    @inlinable package mutating func appendBigEndian(_ value: UInt32) {
        append(UInt8(value >> 24))
        append(UInt8((value >> 16) & 0xff))
        append(UInt8((value >> 8) & 0xff))
        append(UInt8(value & 0xff))
    }
    /// The big-endian UInt16 at `offset` (the caller has checked the bounds).
    @inlinable package func bigEndianUInt16(at offset: Int) -> UInt16 { UInt16(self[offset]) << 8 | UInt16(self[offset + 1]) }
    /// Stores `value` big-endian at `offset` (the caller has checked the bounds).
    @inlinable package mutating func storeBigEndian(_ value: UInt16, at offset: Int) {
        self[offset] = UInt8(value >> 8)
        self[offset + 1] = UInt8(value & 0xff)
    }
    /// Stores `value` big-endian at `offset` (the caller has checked the bounds).
    @inlinable package mutating func storeBigEndian(_ value: UInt32, at offset: Int) {
        self[offset] = UInt8(value >> 24)
        self[offset + 1] = UInt8((value >> 16) & 0xff)
        self[offset + 2] = UInt8((value >> 8) & 0xff)
        self[offset + 3] = UInt8(value & 0xff)
    }
}

/// The four bytes of `value`, big-endian.
@inlinable package func bigEndianBytes(_ value: UInt32) -> [UInt8] {
    [UInt8(value >> 24), UInt8((value >> 16) & 0xff), UInt8((value >> 8) & 0xff), UInt8(value & 0xff)]
}
