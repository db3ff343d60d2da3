// libFuzzer target: the SPS parser on one NAL unit (the first byte is forced to an SPS header, so every
// input reaches the Exp-Golomb reader).
import CFuzzer
import Glibc
import H264

func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data else { return 0 }
    var nal = Array(UnsafeBufferPointer(start: data, count: size))
    if nal.isEmpty { return 0 }
    nal[0] = 0x67
    if let sps = try? SequenceParameterSet(nal: nal[...]) {
        guard sps.width > 0, sps.height > 0, sps.width <= 16384, sps.height <= 16384 else { fatalError("implausible SPS accepted: \(sps)") }
        _ = sps.profileName
    }
    return 0
}

var argc = CommandLine.argc
var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
exit(LLVMFuzzerRunDriver(&argc, &argv) { data, size in fuzz(data, size) })
