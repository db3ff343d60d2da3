// libFuzzer target: what arrives on the RTCP/RTP socket. The bytes go to the compound RTCP parser and, split
// into packets at 0xFF bytes, through the RTP header parser and the H.264 depacketizer (STAP-A/FU-A reassembly).
import CFuzzer
import Glibc
import RTP

func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data else { return 0 }
    let bytes = UnsafeRawBufferPointer(start: data, count: size)
    if let packets = try? RTCPPacket.parseCompound(bytes) {
        guard packets.count <= size / 4 + 1 else { fatalError("\(packets.count) RTCP packets from \(size) bytes") }
    }
    var depacketizer = H264Depacketizer()
    var start = 0
    for i in 0...size where i == size || bytes[i] == 0xFF {
        let packet = UnsafeRawBufferPointer(rebasing: bytes[start..<i])
        if let h = RTPHeader(packet) {
            guard h.payloadOffset >= 12, h.payloadOffset + h.payloadLength <= packet.count else { fatalError("header out of bounds: \(h)") }
        }
        if let unit = depacketizer.push(packet) { _ = unit.accessUnit.count }
        start = i + 1
    }
    return 0
}

var argc = CommandLine.argc
var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
exit(LLVMFuzzerRunDriver(&argc, &argv) { data, size in fuzz(data, size) })
