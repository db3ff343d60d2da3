// libFuzzer target: Annex-B splitting and the Annex-B ⇄ AVCC conversions (all length sizes), checked for
// consistency: whatever split accepts must convert to AVCC and back to the same units.
import CFuzzer
import Glibc
import H264

func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    for lengthSize in [1, 2, 4] { _ = try? AnnexB.fromAVCC(bytes, lengthSize: lengthSize) }
    guard let units = try? AnnexB.split(bytes) else { return 0 }
    for u in units where u.offset < 0 || u.length <= 0 || u.offset + u.length > bytes.count { fatalError("unit out of bounds: \(u)") }
    if let avcc = try? AnnexB.toAVCC(bytes), let back = try? AnnexB.fromAVCC(avcc) {
        guard let again = try? AnnexB.split(back), again.count == units.count else { fatalError("AVCC round trip lost units") }
    }
    for u in units where u.type == .sps { _ = try? SequenceParameterSet(nal: bytes[u.offset..<(u.offset + u.length)]) }
    return 0
}

var argc = CommandLine.argc
var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
exit(LLVMFuzzerRunDriver(&argc, &argv) { data, size in fuzz(data, size) })
