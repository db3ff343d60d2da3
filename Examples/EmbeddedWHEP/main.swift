// An app that embeds the WHEP server: its own capture session and encoders, the library's viewers and endpoint,
// and a route of its own (GET /health). Open the printed URL in a browser.
//
//   swift run embedded-whep-example [DEVICE] [SECONDS]      (default fixture:vivid, until Ctrl-C)
//
// From its first import on, this file is the first code block of the WHEPServer article "Serving and streaming"
// (Sources/WHEPServer/WHEPServer.docc/ServingAndStreaming.md): ReadmeTests checks that the two are the same, and
// EmbeddingTests runs this example with Chromium as the viewer, so the article's code is what is built and watched.
import CapturePipeline
import FixtureCameras
import Foundation
import V4L2Capture
import VideoCapture
import WebRTC
import WHEPServer

/// A failure (no such camera, the port taken) is printed with the program's name, and the exit status is 1.
func fail(_ error: any Error) -> Never {
    FileHandle.standardError.write(Data("embedded-whep-example: \(error)\n".utf8))
    exit(1)
}

let arguments = CommandLine.arguments.dropFirst()
var configuration = CaptureSession.Configuration()
configuration.providers = [V4L2DeviceProvider(), FixtureCameraProvider()] // real cameras, then the built-in ones
configuration.device = arguments.first ?? "fixture:vivid" // or "/dev/video0"
configuration.size = FrameSize(width: 1280, height: 720)
configuration.durationNs = arguments.dropFirst().first.flatMap(Double.init).map { Int64($0 * 1e9) } // nil: until stopped
configuration.idleReleaseNs = 10_000_000_000 // release the camera after 10 s without viewers
let session: CaptureSession
do { session = try CaptureSession(configuration) } catch { fail(error) }

// Each viewer's link is measured by the server (transport-wide feedback, with probes above the sent rate) and
// each viewer gets the largest of three encodes (full, half and quarter size) that its link carries. The broadcast
// makes the viewer hub and the encodes and connects them (key-frame requests, each viewer's estimate → its tier
// and that tier's bitrate); a viewer's arrival starts a released camera again, and the rotation goes as metadata
// while every viewer takes it (upright pixels until viewers say otherwise).
var peer = WebRTCPeer.Configuration(bindHost: "127.0.0.1", candidateHosts: ["127.0.0.1"])
peer.useTransportWideCC = true // our own estimate per viewer, with probing
let recipe = EncodeStage.Configuration(bitrateKbps: 1500, sliceMode: .maxNALSize(1200)) // slices that fit one RTP packet
let broadcast: WHEPBroadcast
do {
    broadcast = try WHEPBroadcast(
        session: session, identity: try DTLSIdentity(), peer: peer, configuration: .init(encoder: recipe, tiers: 3))
} catch { fail(error) }
let hub = broadcast.hub

// Only the holder of the token may watch (the page reads it from the URL's fragment and sends it as a bearer
// token); the app's own routes are behind it too.
let token = ServeSecurity.randomToken()
let endpoint = WHEPEndpoint(hub: hub, policy: try ServerPolicy(token: token, hostNames: ["127.0.0.1", "localhost"]))
let server: HTTPServer
do {
    server = try await HTTPServer.start(host: "127.0.0.1", port: 0, endpoint: endpoint, tls: nil) { [hub] request in
        guard request.method == "GET", request.path == "/health" else { return nil } // the rest: WHEP, the page, /stats
        return WHEPResponse(status: 200, headers: [("Content-Type", "application/json")], body: "{\"viewers\": \(hub.viewerCount)}\n")
    }
} catch { fail(error) }
FileHandle.standardOutput.write(Data("open http://127.0.0.1:\(server.port)/#token=\(token)\n".utf8)) // unbuffered

// Ctrl-C stops the session; the viewers are told, the server stops and the report is printed.
let interrupt: StopOnSignals
do { interrupt = try StopOnSignals(onFirst: session.stopAction) } catch { fail(error) }

let report: CaptureSession.Report
do { report = try await session.run(stages: [broadcast.stage]) } catch { fail(error) }
hub.closeAll(reason: "the app stopped")
await server.stop()
print(report.summaryText)
if report.failure != nil { exit(1) }
