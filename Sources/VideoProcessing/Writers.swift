#if canImport(Glibc)
import Glibc
#endif
public import VideoCapture
import CLibYUV

/// A file opened for writing with errors that name the path; writes are checked (a full disk is an error).
public final class OutputFile {
    public let path: String
    private var handle: UnsafeMutablePointer<FILE>?
    public private(set) var bytesWritten: Int64 = 0

    /// Opens (creating or truncating) `path`; fails at once if it cannot be written.
    public init(path: String) throws(ProcessingError) {
        self.path = path
        guard let f = fopen(path, "wb") else {
            throw ProcessingError(.ioFailed, "cannot write \(path): \(String(cString: strerror(errno)))")
        }
        handle = f
    }

    public func write(_ p: UnsafeRawPointer, count: Int) throws(ProcessingError) {
        guard let handle else { throw ProcessingError(.ioFailed, "\(path) is already closed") }
        guard count > 0 else { return }
        if fwrite(p, 1, count, handle) != count {
            throw ProcessingError(.ioFailed, "writing \(path) failed after \(bytesWritten) bytes: \(String(cString: strerror(errno)))")
        }
        bytesWritten += Int64(count)
    }

    public func write(_ bytes: [UInt8]) throws(ProcessingError) { try write(bytes[...]) }

    public func write(_ bytes: ArraySlice<UInt8>) throws(ProcessingError) {
        guard !bytes.isEmpty else { return }
        let r: Result<Void, ProcessingError> = bytes.withUnsafeBytes { b in
            do throws(ProcessingError) { try write(b.baseAddress!, count: b.count); return .success(()) } catch { return .failure(error) }
        }
        try r.get()
    }

    /// Pushes buffered bytes to the kernel, so what was written survives a crash of this process.
    public func flush() throws(ProcessingError) {
        guard let handle else { return }
        if fflush(handle) != 0 { throw ProcessingError(.ioFailed, "flushing \(path) failed: \(String(cString: strerror(errno)))") }
    }

    public func close() throws(ProcessingError) {
        guard let h = handle else { return }
        handle = nil
        if fclose(h) != 0 { throw ProcessingError(.ioFailed, "closing \(path) failed: \(String(cString: strerror(errno)))") }
    }

    deinit { if let handle { fclose(handle) } }
}

/// A YUV4MPEG2 writer (plays in ffplay/mpv, reads in ffmpeg): 4:2:0, frame rate and colour range in the header.
public final class Y4MWriter {
    public let width: Int
    public let height: Int
    public private(set) var framesWritten = 0
    private let file: OutputFile

    public init(path: String, width: Int, height: Int, fps: Fraction, fullRange: Bool = false) throws(ProcessingError) {
        guard width > 0, height > 0 else { throw ProcessingError(.invalidSize, "Y4M size \(width)x\(height) must be positive") }
        self.width = width; self.height = height
        file = try OutputFile(path: path)
        let header = "YUV4MPEG2 W\(width) H\(height) F\(fps.numerator):\(fps.denominator) Ip A1:1 C420jpeg XCOLORRANGE=\(fullRange ? "FULL" : "LIMITED")\n"
        try file.write(Array(header.utf8))
    }

    public var path: String { file.path }

    /// Appends one picture (its size must match the header).
    public func write(_ frame: I420Buffer) throws(ProcessingError) {
        guard frame.width == width, frame.height == height else {
            throw ProcessingError(.invalidSize, "frame \(frame.width)x\(frame.height) does not match the Y4M stream's \(width)x\(height) (\(file.path))")
        }
        try file.write(Self.frameTag, count: 6)
        for r in 0..<height { try file.write(frame.dataY + r * frame.strideY, count: width) }
        for r in 0..<frame.chromaHeight { try file.write(frame.dataU + r * frame.strideU, count: frame.chromaWidth) }
        for r in 0..<frame.chromaHeight { try file.write(frame.dataV + r * frame.strideV, count: frame.chromaWidth) }
        framesWritten += 1
    }

    // Immutable after initialisation; a raw pointer so a frame header costs no allocation.
    nonisolated(unsafe) private static let frameTag: UnsafeRawPointer = {
        let p = UnsafeMutableRawPointer.allocate(byteCount: 6, alignment: 1)
        p.copyMemory(from: Array("FRAME\n".utf8), byteCount: 6)
        return UnsafeRawPointer(p)
    }()

    public func close() throws(ProcessingError) { try file.close() }
}

/// Still pictures of frames: PNG (RGB, stored deflate) or JPEG (4:2:0, libjpeg-turbo), picked by extension.
public enum SnapshotWriter {
    public enum Kind: String, Sendable { case png, jpeg }

    public static func kind(forPath path: String) throws(ProcessingError) -> Kind {
        let lower = path.lowercased()
        if lower.hasSuffix(".png") { return .png }
        if lower.hasSuffix(".jpg") || lower.hasSuffix(".jpeg") { return .jpeg }
        throw ProcessingError(.invalidArgument, "snapshot path \(path) must end in .png, .jpg or .jpeg")
    }

    /// Writes `frame` to `path`.
    public static func write(_ frame: I420Buffer, to path: String) throws(ProcessingError) {
        let data: [UInt8]
        switch try kind(forPath: path) {
        case .png: data = png(frame)
        case .jpeg:
            let writer = FormatWriter()
            let cap = FormatWriter.capacity(for: .mjpeg, width: frame.width, height: frame.height)
            var out = [UInt8](repeating: 0, count: cap)
            let r: Result<Int, ProcessingError> = out.withUnsafeMutableBufferPointer { b in
                do throws(ProcessingError) { return .success(try writer.encodeJPEG(frame, into: b.baseAddress!, capacity: cap)) } catch { return .failure(error) }
            }
            let n = try r.get()
            data = Array(out[0..<n])
        }
        let f = try OutputFile(path: path)
        try f.write(data)
        try f.close()
    }

    /// I420 → RGB (BT.601) → PNG bytes.
    public static func png(_ frame: I420Buffer) -> [UInt8] {
        let w = frame.width, h = frame.height
        var rgb = [UInt8](repeating: 0, count: w * h * 3)
        rgb.withUnsafeMutableBufferPointer { b in
            _ = I420ToRAW(frame.dataY, Int32(frame.strideY), frame.dataU, Int32(frame.strideU), frame.dataV, Int32(frame.strideV),
                          b.baseAddress, Int32(w * 3), Int32(w), Int32(h))
        }
        // Raw scanlines with filter byte 0, in stored (uncompressed) deflate blocks.
        var raw = [UInt8](); raw.reserveCapacity((w * 3 + 1) * h)
        for r in 0..<h { raw.append(0); raw.append(contentsOf: rgb[(r * w * 3)..<((r + 1) * w * 3)]) }
        var z: [UInt8] = [0x78, 0x01]
        var i = 0
        repeat {
            let n = min(65535, raw.count - i)
            let last: UInt8 = i + n == raw.count ? 1 : 0
            z += [last, UInt8(n & 0xff), UInt8(n >> 8), UInt8(~n & 0xff), UInt8((~n >> 8) & 0xff)]
            z += raw[i..<(i + n)]
            i += n
        } while i < raw.count
        z += be32(adler32(raw))
        var out: [UInt8] = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]
        func chunk(_ type: String, _ body: [UInt8]) {
            let t = Array(type.utf8)
            out += be32(UInt32(body.count)); out += t; out += body; out += be32(crc32(t + body))
        }
        chunk("IHDR", be32(UInt32(w)) + be32(UInt32(h)) + [8, 2, 0, 0, 0])
        chunk("IDAT", z)
        chunk("IEND", [])
        return out
    }

    private static func be32(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8(v >> 16 & 0xff), UInt8(v >> 8 & 0xff), UInt8(v & 0xff)] }
    private static func adler32(_ d: [UInt8]) -> UInt32 {
        var a: UInt32 = 1, b: UInt32 = 0
        for x in d { a = (a + UInt32(x)) % 65521; b = (b + a) % 65521 }
        return b << 16 | a
    }
    private static let crcTable: [UInt32] = (0..<256).map { n -> UInt32 in
        var c = UInt32(n)
        for _ in 0..<8 { c = c & 1 != 0 ? 0xedb88320 ^ (c >> 1) : c >> 1 }
        return c
    }
    private static func crc32(_ d: [UInt8]) -> UInt32 {
        var c: UInt32 = 0xffff_ffff
        for x in d { c = crcTable[Int((c ^ UInt32(x)) & 0xff)] ^ (c >> 8) }
        return c ^ 0xffff_ffff
    }
}

/// Picture quality between two I420 pictures of the same size (libyuv's PSNR over all planes, dB).
public func psnr(_ a: I420Buffer, _ b: I420Buffer) -> Double {
    I420Psnr(a.dataY, Int32(a.strideY), a.dataU, Int32(a.strideU), a.dataV, Int32(a.strideV),
             b.dataY, Int32(b.strideY), b.dataU, Int32(b.strideU), b.dataV, Int32(b.strideV), Int32(a.width), Int32(a.height))
}

/// libyuv's CPU feature flags as text (for `camcap --version`).
public var libyuvCPUFlags: String {
    let flags = InitCpuFlags()
    let names: [(Int32, String)] = [(kCpuHasSSE2, "SSE2"), (kCpuHasSSSE3, "SSSE3"), (kCpuHasSSE41, "SSE4.1"), (kCpuHasSSE42, "SSE4.2"),
                                    (kCpuHasAVX, "AVX"), (kCpuHasAVX2, "AVX2"), (kCpuHasAVX512BW, "AVX512BW"), (kCpuHasNEON, "NEON")]
    let on = names.filter { flags & $0.0 != 0 }.map(\.1)
    return "libyuv \(LIBYUV_VERSION) [\(on.isEmpty ? "C only" : on.joined(separator: " "))]"
}
