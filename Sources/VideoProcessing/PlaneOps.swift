import CLibYUV

/// Byte-plane operations over libyuv's SIMD rows, for code outside this module that must not see C
/// (the fixture cameras' noise and picture updates). Strides and widths are in bytes.
package enum PlaneOps {
    /// dst = src + add, saturating at 255 (width a multiple of 4).
    package static func addSaturating(
        _ src: UnsafePointer<UInt8>, _ srcStride: Int, _ add: UnsafePointer<UInt8>, _ addStride: Int,
        _ dst: UnsafeMutablePointer<UInt8>, _ dstStride: Int, width: Int, height: Int
    ) {
        _ = ARGBAdd(src, Int32(srcStride), add, Int32(addStride), dst, Int32(dstStride), Int32(width / 4), Int32(height))
    }
    /// dst = src - sub, saturating at 0 (width a multiple of 4).
    package static func subtractSaturating(
        _ src: UnsafePointer<UInt8>, _ srcStride: Int, _ sub: UnsafePointer<UInt8>, _ subStride: Int,
        _ dst: UnsafeMutablePointer<UInt8>, _ dstStride: Int, width: Int, height: Int
    ) {
        _ = ARGBSubtract(src, Int32(srcStride), sub, Int32(subStride), dst, Int32(dstStride), Int32(width / 4), Int32(height))
    }
    package static func copy(
        _ src: UnsafePointer<UInt8>, _ srcStride: Int, _ dst: UnsafeMutablePointer<UInt8>, _ dstStride: Int, width: Int, height: Int
    ) {
        CopyPlane(src, Int32(srcStride), dst, Int32(dstStride), Int32(width), Int32(height))
    }
    /// dst = src mirrored left to right.
    package static func mirror(
        _ src: UnsafePointer<UInt8>, _ srcStride: Int, _ dst: UnsafeMutablePointer<UInt8>, _ dstStride: Int, width: Int, height: Int
    ) {
        MirrorPlane(src, Int32(srcStride), dst, Int32(dstStride), Int32(width), Int32(height))
    }
    /// dst = src upside down (libyuv reads the source bottom-up for a negative height).
    package static func flipVertically(
        _ src: UnsafePointer<UInt8>, _ srcStride: Int, _ dst: UnsafeMutablePointer<UInt8>, _ dstStride: Int, width: Int, height: Int
    ) {
        CopyPlane(src, Int32(srcStride), dst, Int32(dstStride), Int32(width), -Int32(height))
    }
    /// dst = src turned by 180° (mirrored and upside down).
    package static func rotate180(
        _ src: UnsafePointer<UInt8>, _ srcStride: Int, _ dst: UnsafeMutablePointer<UInt8>, _ dstStride: Int, width: Int, height: Int
    ) {
        RotatePlane180(src, Int32(srcStride), dst, Int32(dstStride), Int32(width), Int32(height))
    }
    /// Each byte of the plane replaced in place by `table[byte * 4]`: `table` is 1024 bytes, each entry four
    /// times (libyuv's ARGBColorTable over the plane as 4-byte pixels; `width` a multiple of 4).
    package static func lookUp(_ plane: UnsafeMutablePointer<UInt8>, _ stride: Int, table: UnsafePointer<UInt8>, width: Int, height: Int) {
        _ = ARGBColorTable(plane, Int32(stride), table, 0, 0, Int32(width / 4), Int32(height))
    }
}
