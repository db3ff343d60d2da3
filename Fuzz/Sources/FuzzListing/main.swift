// libFuzzer target: the `v4l2-ctl --list-formats-ext` listing parser, then negotiation over what it accepted.
import CFuzzer
import Glibc
import FixtureCameras
import VideoCapture

func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data else { return 0 }
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    guard let camera = try? CameraDescription.parse(text, file: "fuzz.txt", syntax: .listing) else { return 0 }
    exerciseNegotiation(camera, seed: Int(size > 4 ? data[size - 1] ^ data[size / 2] : 0) * 4099 + size)
    return 0
}

/// Everything downstream of a parsed description must also hold up: negotiation (a target and a limit taken
/// from the input, so the fuzzer explores them too) and what `formats` prints.
func exerciseNegotiation(_ camera: CameraDescription, seed: Int) {
    let target = FrameSize(width: 1 + seed % 16384, height: 1 + (seed / 16384) % 16384)
    _ = FormatSelector.select(from: camera.formats, target: target, fpsLimit: 1 + seed % 1000)
    for f in camera.formats {
        _ = f.intervals?.rateBounds
        _ = f.size.description
    }
    // Declared controls: the checks and rounding a set goes through, with values from the input and the extremes.
    for c in camera.controls {
        for v in [Int64(seed), .min, .max, c.minimum, c.maximum, c.defaultValue] {
            _ = try? c.validate(.integer(v), device: "fuzz")
            _ = c.rounded(v)
        }
        _ = try? c.parseValue(String(seed), device: "fuzz")
        _ = c.currentMenuItem
        _ = c.flags.names
    }
}

var argc = CommandLine.argc
var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
exit(LLVMFuzzerRunDriver(&argc, &argv) { data, size in fuzz(data, size) })
