import Foundation
import Synchronization
import Testing
import Hummingbird
import NIOCore
import TestSupport
import VideoCapture
import WebRTC
import WHEPServer

/// A Hummingbird request context that keeps the client's address (the endpoint limits viewers per address).
struct WHEPContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    let client: String

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        client = source.channel.remoteAddress?.ipAddress ?? ""
    }
}

/// The glue an app writes to serve WHEP from its own Hummingbird application: Hummingbird's request becomes a
/// `WHEPRequest`, the endpoint answers, and its `WHEPResponse` becomes Hummingbird's response.
final class HummingbirdWHEP: Sendable {
    let endpoint: WHEPEndpoint
    /// Every response the endpoint gave, to compare with what went over the wire.
    let answered = Mutex<[WHEPResponse]>([])

    init(endpoint: WHEPEndpoint) { self.endpoint = endpoint }

    func respond(_ request: Request, _ context: WHEPContext) async throws -> Response {
        var headers = request.headers.map { (name: $0.name.rawName, value: $0.value) }
        // swift-http-types keeps the Host header as the request's authority, not among the fields.
        if let authority = request.head.authority { headers.insert((name: "Host", value: authority), at: 0) }
        let head = WHEPRequest(method: request.method.rawValue, uri: request.uri.description, headers: headers, client: context.client)
        let response: WHEPResponse
        if let refusal = endpoint.check(head) {
            response = refusal // refused from the head alone: the body is not read
        } else {
            var full = head
            do {
                full.body = Array(try await request.body.collect(upTo: WHEPEndpoint.maxBody).readableBytesView)
                response = endpoint.handle(full)
            } catch {
                response = endpoint.tooLarge(full)
            }
        }
        answered.withLock { $0.append(response) }
        var fields = HTTPFields()
        for (name, value) in response.headers { // (HTTPFields.Element is swift-http-types' HTTPField)
            if let name = HTTPFields.Element.Name(name) { fields.append(HTTPFields.Element(name: name, value: value)) }
        }
        return Response(status: .init(code: response.status), headers: fields, body: .init(byteBuffer: ByteBuffer(string: response.body)))
    }

    /// POST /whep, DELETE /whep/:id and GET /stats, each handed to the endpoint.
    func router() -> Router<WHEPContext> {
        let router = Router(context: WHEPContext.self)
        router.post("/whep") { request, context in try await self.respond(request, context) }
        router.delete("/whep/:id") { request, context in try await self.respond(request, context) }
        router.get("/stats") { request, context in try await self.respond(request, context) }
        return router
    }
}

/// An HTTP exchange made with curl, off Swift's cooperative threads (the server's handlers run on them).
struct Exchange {
    var status = 0
    var headers: [(name: String, value: String)] = []
    var body = ""
    func header(_ name: String) -> String? { headers.first { $0.name.lowercased() == name.lowercased() }?.value }

    static func curl(_ args: [String]) async throws -> Exchange {
        let result = try await withCheckedThrowingContinuation { (c: CheckedContinuation<ToolResult, any Error>) in
            DispatchQueue.global().async { c.resume(with: Result { try runTool("curl", ["-sS", "-i", "--max-time", "10"] + args) }) }
        }
        var e = Exchange()
        let parts = result.out.components(separatedBy: "\r\n\r\n")
        let head = parts[0].components(separatedBy: "\r\n")
        e.status = Int(head[0].split(separator: " ").dropFirst().first ?? "") ?? -1
        e.headers = head.dropFirst().compactMap { line in
            line.firstIndex(of: ":").map { (name: String(line[..<$0]), value: line[line.index(after: $0)...].trimmingCharacters(in: .whitespaces)) }
        }
        e.body = parts.dropFirst().joined(separator: "\r\n\r\n")
        if e.status < 0 { Issue.record("curl: \(result.err)") }
        return e
    }
}

@Suite(.serialized, .timeLimit(.minutes(1))) struct HummingbirdWHEPTests {
    /// The test and the server it starts run on a thread of their own: in the parallel suite, synchronous tests
    /// beside it can hold every thread of the cooperative pool (two on a two-core box) for minutes.
    @Test func hummingbirdRoutesDriveTheWHEPEndpoint() async throws {
        let executor = DedicatedTaskExecutor(name: "hummingbird-test")
        defer { executor.shutdown() }
        try await withTaskExecutorPreference(executor) { try await routesDriveTheEndpoint() }
    }

    func routesDriveTheEndpoint() async throws {
        let token = "0123456789abcdef0123"
        let hub = ViewerHub(
            identity: try DTLSIdentity(), configuration: WebRTCPeer.Configuration(bindHost: "127.0.0.1", candidateHosts: ["127.0.0.1"]))
        defer { hub.closeAll(reason: "the test ended") }
        let whep = HummingbirdWHEP(endpoint: WHEPEndpoint(hub: hub, policy: try ServerPolicy(token: token, hostNames: ["127.0.0.1"])))
        let port = Mutex<Int?>(nil)
        let app = Application(
            router: whep.router(), configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in port.withLock { $0 = channel.localAddress?.port } })
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await app.runService(gracefulShutdownSignals: []) }
            defer { group.cancelAll() }
            #expect(await waitUntil(timeout: 20) { port.withLock { $0 } != nil }, "the server started")
            let base = "http://127.0.0.1:\(try #require(port.withLock { $0 }))"
            let auth = ["-H", "Authorization: Bearer \(token)"], sdp = ["-H", "Content-Type: application/sdp"]

            let anonymous = try await Exchange.curl(sdp + ["--data-binary", chromiumOffer, base + "/whep"])
            #expect(anonymous.status == 401 && anonymous.header("WWW-Authenticate")?.hasPrefix("Bearer") == true, "\(anonymous)")

            let bad = try await Exchange.curl(auth + sdp + ["--data-binary", "v=0\r\nthis is not an offer\r\n", base + "/whep"])
            #expect(bad.status == 400 && !bad.body.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty, "\(bad)")

            let offer = try await Exchange.curl(auth + sdp + ["--data-binary", chromiumOffer, base + "/whep"])
            #expect(offer.status == 201, "\(offer)")
            #expect(
                offer.header("Content-Type") == "application/sdp" && offer.body.hasPrefix("v=0\r\n") && offer.body.contains("a=setup:passive"),
                "\(offer)")
            let location = try #require(offer.header("Location"), "\(offer)")
            #expect(location.hasPrefix("/whep/") && location.count >= "/whep/".count + 16, "an unguessable resource: \(location)")
            // Every header the endpoint gave went over the wire unchanged, the ETag of the ICE session among them.
            let given = try #require(whep.answered.withLock { $0.last { $0.status == 201 } })
            for (name, value) in given.headers {
                #expect(offer.header(name) == value, "\(name) over Hummingbird: \(String(describing: offer.header(name)))")
            }
            #expect(offer.header("ETag") == "\"\(location.dropFirst("/whep/".count))\"", "\(offer)")

            func viewers() async throws -> (viewers: Int, left: Int) {
                let stats = try await Exchange.curl(auth + [base + "/stats"])
                #expect(stats.status == 200, "\(stats)")
                let json = try #require(try JSONSerialization.jsonObject(with: Data(stats.body.utf8)) as? [String: Any], "\(stats.body)")
                return ((json["viewers"] as? [Any])?.count ?? -1, (json["left"] as? Int) ?? -1)
            }
            #expect(try await viewers() == (1, 0))
            let deleted = try await Exchange.curl(auth + ["-X", "DELETE", base + location])
            #expect(deleted.status == 200 || deleted.status == 204, "\(deleted)")
            #expect(try await viewers() == (0, 1))
            #expect(try await Exchange.curl(auth + ["-X", "DELETE", base + location]).status == 404, "gone")
            #expect(whep.endpoint.refused.unauthorized == 1 && whep.endpoint.refused.badOffer == 1, "\(whep.endpoint.refused)")
        }
    }
}
