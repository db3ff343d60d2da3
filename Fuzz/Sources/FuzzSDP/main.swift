// libFuzzer target: the SDP parser on an answer (or a browser's offer) from the network.
import CFuzzer
import Glibc
import RTP

func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data else { return 0 }
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    if let d = try? SDP.parse(text) {
        for m in d.media {
            _ = m.values("rtpmap")
            _ = m.values("fmtp")
        }
    }
    return 0
}

var argc = CommandLine.argc
var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
exit(LLVMFuzzerRunDriver(&argc, &argv) { data, size in fuzz(data, size) })
