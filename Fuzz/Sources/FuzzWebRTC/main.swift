// libFuzzer target: what a WebRTC peer reads from the network: a WHEP offer or a WHIP server's answer (SDP text
// starting "v=", parsed as both; an offer is answered), a STUN message (parsed as a request and, if it
// authenticates, answered; and as a response to our checks), or a DTLS datagram (first byte 20...63: fed to an
// association in its handshake and to a connected one, which must stay connected).
import CFuzzer
import Glibc
@_spi(Fuzzing) import WebRTC

nonisolated(unsafe) let dtls = try! DTLSDatagramHarness() // libFuzzer calls in from one thread

func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data else { return 0 }
    let bytes = UnsafeRawBufferPointer(start: data, count: size)
    if size >= 2 && data[0] == UInt8(ascii: "v") && data[1] == UInt8(ascii: "=") {
        let text = String(decoding: bytes, as: UTF8.self)
        if let offer = try? WebRTCOffer(text) {
            _ = offer.answer(
                iceUfrag: "abcd", icePassword: "pppppppppppppppppppppppp", fingerprint: "AA:BB", hosts: ["127.0.0.1"],
                port: 9, ssrc: 1, rtxSSRC: 2, videoOrientation: true, transportWideCC: true)
        }
        _ = try? WebRTCAnswer(text, payloadType: 96, rtxPayloadType: 97)
    } else if size > 0 && (20...63).contains(data[0]) {
        dtls.feed(bytes)
        // A forged record ended a working association: the bug this target looks for.
        if !dtls.isConnected { fatalError("a datagram ended a connected DTLS association") }
    } else {
        if case .request(let r) = STUN.parseRequest(bytes, localUfrag: "evtj", localPassword: "VOkJxbRl1RmTxUk/WvJxBt") {
            _ = STUN.successResponse(to: r, address: [127, 0, 0, 1], port: 9, localPassword: "VOkJxbRl1RmTxUk/WvJxBt")
        }
        _ = STUN.parseResponse(bytes, remotePassword: "VOkJxbRl1RmTxUk/WvJxBt")
    }
    return 0
}

var argc = CommandLine.argc
var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
exit(LLVMFuzzerRunDriver(&argc, &argv) { data, size in fuzz(data, size) })
