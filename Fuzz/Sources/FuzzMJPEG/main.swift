// libFuzzer target: MJPEG frames through FrameConverter (the persistent libjpeg decoder of CJPEGCodec, its
// reduced-DCT path and libyuv's fallback). The first byte picks the size the stream claims and what is asked
// (full size, a half, a quarter, an eighth, a size in between, with a crop, turned); the rest is the JPEG. A frame
// either converts to exactly the asked size or is a ProcessingError: never a crash, a read past the end or a leak.
import CFuzzer
import Glibc
import VideoCapture
import VideoProcessing

let sizes = [
    FrameSize(width: 320, height: 240), FrameSize(width: 64, height: 48), FrameSize(width: 640, height: 480), FrameSize(width: 250, height: 142),
]
nonisolated(unsafe) let converter = FrameConverter() // one decoder across inputs, as a stream uses it (libFuzzer calls from one thread)

func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data, size > 1 else { return 0 }
    let selector = Int(data[0])
    let claimed = sizes[selector % sizes.count]
    var options = FrameConverter.Options()
    switch (selector / sizes.count) % 6 {
    case 1: options.scale = FrameSize(width: claimed.width / 2, height: claimed.height / 2)
    case 2: options.scale = FrameSize(width: claimed.width / 4, height: claimed.height / 4)
    case 3: options.scale = FrameSize(width: max(2, claimed.width / 8), height: max(2, claimed.height / 8))
    case 4:
        options.crop = CropRect(x: 0, y: claimed.height / 8 * 2, width: claimed.width, height: claimed.height / 2)
        options.scale = FrameSize(width: claimed.width / 4, height: claimed.height / 8)
    case 5:
        options.rotation = .rotation90
        options.scale = FrameSize(width: claimed.height / 3 & ~1, height: claimed.width / 3 & ~1)
    default: break
    }
    let bytes = size - 1
    let storage = FrameStorage(capacity: bytes)
    storage.writableBaseAddress!.copyMemory(from: data + 1, byteCount: bytes) // our own memory: writable
    let frame = VideoFrameBuffer(pixelFormat: .mjpeg, width: claimed.width, height: claimed.height, stride: 0, bytesUsed: bytes, storage: storage)
    if let picture = try? converter.convert(frame, options: options) {
        let want = options.scale ?? (options.crop.map { FrameSize(width: $0.width, height: $0.height) } ?? claimed)
        guard picture.width == want.width, picture.height == want.height else {
            fatalError("asked for \(want), got \(picture.width)x\(picture.height) (options \(options))")
        }
    }
    return 0
}

var argc = CommandLine.argc
var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
exit(LLVMFuzzerRunDriver(&argc, &argv) { data, size in fuzz(data, size) })
