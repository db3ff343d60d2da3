// An app that embeds the WHEP server: its own capture session and encoder, the library's viewers and endpoint,
// and a route of its own (GET /health). Open the printed URL in a browser.
//
//   swift run embedded-whep-example [DEVICE] [SECONDS]      (default fixture:vivid, until Ctrl-C)
import CapturePipeline
import Foundation
import VideoCapture
import WebRTC
import WHEPServer

@main struct EmbeddedWHEP {
    static func main() async {
        do { try await run() } catch {
            FileHandle.standardError.write(Data("embedded-whep-example: \(error)\n".utf8))
            exit(1)
        }
    }

    static func run() async throws {
        let args = CommandLine.arguments.dropFirst()
        var configuration = CaptureSession.Configuration()
        configuration.device = args.first ?? "fixture:vivid"
        configuration.size = FrameSize(width: 640, height: 360)
        configuration.durationNs = args.dropFirst().first.flatMap(Double.init).map { Int64($0 * 1e9) } // nil: until stopped
        let session = try CaptureSession(configuration)

        // One encode for every viewer; the hub is the encoder's output and the viewers' list.
        var settings = EncodeStage.baseSettings(for: session.selection, bitrateKbps: 1200, maxBitrateKbps: nil)
        settings.sliceMode = .maxNALSize(1200)
        let hub = ViewerHub(
            identity: try DTLSIdentity(), configuration: WebRTCPeer.Configuration(bindHost: "127.0.0.1", candidateHosts: ["127.0.0.1"]))
        let encode = EncodeStage(settings: settings, keyIntervalSeconds: 2, outputs: [hub])
        hub.connect(encode, adapting: nil)

        // Only the holder of the token may watch (the page reads it from the URL's fragment and sends it as a
        // bearer token); the app's own routes are behind it too.
        let token = ServeSecurity.randomToken()
        let policy = try ServerPolicy(token: token, hostNames: ["127.0.0.1", "localhost"])
        let endpoint = WHEPEndpoint(hub: hub, policy: policy)
        let server = try await HTTPServer.start(host: "127.0.0.1", port: 0, endpoint: endpoint, tls: nil) { request in
            guard request.method == "GET", request.path == "/health" else { return nil } // the rest: WHEP, the page
            return WHEPResponse(status: 200, headers: [("Content-Type", "application/json")], body: "{\"viewers\": \(hub.viewerCount)}\n")
        }
        FileHandle.standardOutput.write(Data("open http://127.0.0.1:\(server.port)/#token=\(token)\n".utf8)) // unbuffered: a test waits for it

        let stop = session.stopAction
        signal(SIGINT, SIG_IGN)
        let sigint = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())
        sigint.setEventHandler { stop() }
        sigint.resume()

        let report = try await session.run(stages: [encode])
        hub.closeAll(reason: "the app stopped")
        await server.stop()
        print(report.summaryText)
        if let failure = report.failure { throw failure }
    }
}
