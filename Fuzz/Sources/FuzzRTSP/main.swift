// libFuzzer target: the RTSP request parser on bytes from a client (requests, interleaved frames, garbage), and
// what the server reads out of a request: the Transport header and Digest credentials.
import CFuzzer
import Glibc
import RTSPServer

let authenticator = DigestAuthenticator(user: "user", password: "password")

func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data else { return 0 }
    var rest = UnsafeRawBufferPointer(start: data, count: size)
    // As the server does: one message after another from the same bytes, until one is incomplete or fails.
    while !rest.isEmpty {
        guard let result = try? RTSPParser.parse(rest) else { break }
        switch result {
        case .incomplete: return 0
        case .interleaved(_, let payload, let consumed):
            precondition(payload.upperBound <= consumed && consumed <= rest.count)
            rest = UnsafeRawBufferPointer(rebasing: rest[consumed...])
        case .request(let request, let consumed):
            precondition(consumed > 0 && consumed <= rest.count)
            _ = request.path
            if let t = request.header("Transport") { _ = RTSPTransportRequest.parse(t) }
            _ = authenticator.verify(request.header("Authorization"), method: request.method, uri: request.uri, client: "127.0.0.1", connection: 1)
            _ = RTSPResponse(status: 200, headers: request.headers).serialized(cseq: request.cseq)
            rest = UnsafeRawBufferPointer(rebasing: rest[consumed...])
        }
    }
    return 0
}

var argc = CommandLine.argc
var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
exit(LLVMFuzzerRunDriver(&argc, &argv) { data, size in fuzz(data, size) })
