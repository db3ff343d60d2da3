import Testing
import WebRTC
import WHEPServer

/// The framework-neutral core any HTTP server can call, driven directly: requests in, responses out.
@Suite struct EndpointTests {
    /// The endpoint with no HTTP server at all: requests in, responses out, with the policy applied.
    @Test func theEndpointIsDrivenWithoutAnHTTPServer() throws {
        let hub = ViewerHub(
            identity: try DTLSIdentity(), configuration: WebRTCPeer.Configuration(bindHost: "127.0.0.1", candidateHosts: ["127.0.0.1"]))
        let endpoint = WHEPEndpoint(hub: hub, policy: try ServerPolicy(token: "0123456789abcdef0123", hostNames: ["127.0.0.1"]))
        func req(_ method: String, _ uri: String, _ headers: [(String, String)] = [], body: String = "") -> WHEPResponse {
            endpoint.handle(
                WHEPRequest(
                    method: method, uri: uri, headers: [("Host", "127.0.0.1:8080")] + headers.map { (name: $0.0, value: $0.1) },
                    body: Array(body.utf8), client: "127.0.0.1"),
                routes: { $0.path == "/mine" ? WHEPResponse(status: 200, headers: [], body: "mine") : nil })
        }
        let auth = [("Authorization", "Bearer 0123456789abcdef0123")]
        #expect(req("GET", "/").status == 200)
        // An embedding app's 401 names neither camcap nor its URL (#38): the realm is the policy's, "WHEP" by default.
        let refused = req("GET", "/stats")
        let challenge = refused.headers.first { $0.name == "WWW-Authenticate" }?.value
        #expect(refused.status == 401 && challenge == "Bearer realm=\"WHEP\"" && !refused.body.contains("camcap"), "\(refused)")
        #expect(req("GET", "/mine").status == 401, "the app's routes are behind the same token")
        #expect(req("GET", "/mine", auth).body == "mine")
        #expect(req("GET", "/metrics", auth).status == 404, "no registry given")
        let offer = req("POST", "/whep", auth + [("Content-Type", "application/sdp")], body: "v=0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\n")
        #expect(offer.status == 400 || offer.status == 406, "\(offer.status) \(offer.body)")
        let foreign = endpoint.handle(WHEPRequest(method: "GET", uri: "/", headers: [("Host", "evil.example")], client: "127.0.0.1"))
        #expect(foreign.status == 403)
        var named = try ServerPolicy(token: "0123456789abcdef0123", hostNames: ["127.0.0.1"])
        named.realm = "Porch \"cam\"\n"
        named.tokenHint = "see the app's settings"
        let porch = WHEPEndpoint(hub: hub, policy: named).handle(
            WHEPRequest(method: "GET", uri: "/stats", headers: [("Host", "127.0.0.1")], client: "127.0.0.1"))
        #expect(porch.headers.contains { $0.name == "WWW-Authenticate" && $0.value == "Bearer realm=\"Porch cam\"" }, "\(porch)")
        #expect(porch.body == "this server needs Authorization: Bearer TOKEN (see the app's settings)\n")
        #expect(endpoint.refused.unauthorized == 2 && endpoint.refused.foreignHost == 1 && endpoint.refused.badOffer == 1, "\(endpoint.refused)")
    }
}
