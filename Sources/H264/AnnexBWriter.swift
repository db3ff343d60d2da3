public import VideoProcessing

/// Writes an Annex-B `.h264` elementary stream that `ffplay -f h264` plays from any IDR: every IDR access
/// unit is preceded by SPS and PPS (the last ones seen are inserted when an encoder leaves them out).
public final class AnnexBWriter {
    private let file: OutputFile
    private var sps: [UInt8]?
    private var pps: [UInt8]?
    public private(set) var framesWritten = 0
    public private(set) var keyFramesWritten = 0
    private static let startCode: [UInt8] = [0, 0, 0, 1]

    /// Opens `path` for writing at once, so an unwritable path fails before capture starts.
    public init(path: String) throws(ProcessingError) { file = try OutputFile(path: path) }
    public var path: String { file.path }
    public var bytesWritten: Int64 { file.bytesWritten }

    public func write(_ frame: EncodedFrame) throws(ProcessingError) {
        guard !frame.isSkipped, !frame.nalUnits.isEmpty else { return }
        let hasIDR = frame.nalUnits.contains { $0.type == .idr }
        var sawSPS = false, sawPPS = false
        for u in frame.nalUnits {
            let bytes = frame.data[u.offset..<(u.offset + u.length)]
            switch u.type {
            case .sps: sps = Array(bytes); sawSPS = true
            case .pps: pps = Array(bytes); sawPPS = true
            case .idr where !(sawSPS && sawPPS):
                guard let sps, let pps else {
                    throw ProcessingError(.invalidArgument, "IDR frame without SPS/PPS and none seen before: the stream would not be decodable (\(file.path))")
                }
                try unit(sps[...]); try unit(pps[...])
                sawSPS = true; sawPPS = true
            default: break
            }
            try unit(bytes)
        }
        framesWritten += 1
        if hasIDR { keyFramesWritten += 1 }
    }

    private func unit(_ bytes: ArraySlice<UInt8>) throws(ProcessingError) {
        try file.write(Self.startCode)
        try file.write(bytes)
    }

    /// Flushes to the kernel (called periodically, so an interrupted recording keeps what it wrote).
    public func flush() throws(ProcessingError) { try file.flush() }
    public func close() throws(ProcessingError) { try file.close() }
}
