// libFuzzer target: the `v4l2-ctl --list-formats-ext` listing parser, then negotiation over what it accepted.
import CFuzzer
import Glibc
import FixtureCameras
import VideoCapture

func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data else { return 0 }
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    guard let camera = try? CameraDescription.parse(text, file: "fuzz.txt", syntax: .listing) else { return 0 }
    exerciseNegotiation(camera)
    return 0
}

/// Everything downstream of a parsed description must also hold up: negotiation at a few targets and limits.
func exerciseNegotiation(_ camera: CameraDescription) {
    for target in [FrameSize(width: 1, height: 1), FrameSize(width: 1280, height: 720), FrameSize(width: 16384, height: 16384)] {
        for limit in [1, 30, 1000] { _ = FormatSelector.select(from: camera.formats, target: target, fpsLimit: limit) }
    }
    for f in camera.formats { _ = f.intervals?.rateBounds; _ = f.size.description }
}

var argc = CommandLine.argc
var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
exit(LLVMFuzzerRunDriver(&argc, &argv) { data, size in fuzz(data, size) })
