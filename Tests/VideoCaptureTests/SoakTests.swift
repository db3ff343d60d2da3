import Foundation
import Testing
@testable import VideoCapture
import FixtureCameras

/// Resident memory (KiB) and open descriptors of this process.
func residentKiB() -> Int {
    guard let s = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
        let line = s.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") })
    else { return -1 }
    return Int(line.split(separator: " ").dropFirst().first ?? "") ?? -1
}
func openDescriptors() -> Int { (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? -1 }

/// Start/stop and switch cycles through the public API: memory and descriptors stay flat. CI runs a short
/// pass; `Scripts/soak.sh` runs it long (SOAK_START_STOP=500 SOAK_SWITCHES=200) and reports the figures.
/// It measures the whole process, so it runs alone: enabled by SOAK=1 (Scripts/test.sh runs a short pass in its
/// own `swift test` invocation after the suite).
@Suite(.serialized, .timeLimit(.minutes(10)), .enabled(if: ProcessInfo.processInfo.environment["SOAK"] == "1"))
struct SoakTests {
    static let startStops = Int(ProcessInfo.processInfo.environment["SOAK_START_STOP"] ?? "") ?? 40
    static let switches = Int(ProcessInfo.processInfo.environment["SOAK_SWITCHES"] ?? "") ?? 20

    @Test func startStopAndSwitchCyclesKeepMemoryAndDescriptorsFlat() async throws {
        let capturer = CameraVideoCapturer(
            providers: [FixtureCameraProvider(options: .init(pacing: .asFastAsConsumed))],
            configuration: .init(maxPendingFrames: 2, alwaysDiscardsLateFrames: false))
        let a = try capturer.device("fixture:vivid"), b = try capturer.device("fixture:uvc-webcam")
        let size = FrameSize(width: 320, height: 180)
        func cycle() async throws {
            let stream = capturer.frames()
            try await capturer.startCapture(device: a, targetSize: size)
            var it = stream.makeAsyncIterator()
            for _ in 0..<3 { _ = try await it.next() }
            try await capturer.stopCapture()
            while try await it.next() != nil {}
        }
        func switches(_ n: Int) async throws {
            let stream = capturer.frames()
            try await capturer.startCapture(device: a, targetSize: size)
            var it = stream.makeAsyncIterator()
            for i in 0..<n {
                _ = try await it.next()
                try await capturer.switchDevice(to: i % 2 == 0 ? b : a, targetSize: FrameSize(width: 640, height: 480))
            }
            _ = try await it.next()
            try await capturer.stopCapture()
            while try await it.next() != nil {}
        }
        // Warm-up: pools, threads, the JPEG encoder's and the allocator's first arenas for every size used.
        for _ in 0..<5 { try await cycle() }
        try await switches(10)
        let rss0 = residentKiB(), fds0 = openDescriptors()
        for _ in 0..<SoakTests.startStops { try await cycle() }
        let rss1 = residentKiB(), fds1 = openDescriptors()
        try await switches(SoakTests.switches)
        let rss2 = residentKiB(), fds2 = openDescriptors()
        print(
            "soak: after warm-up RSS \(rss0) KiB, fds \(fds0); \(SoakTests.startStops) start/stop cycles: RSS \(rss1) KiB, fds \(fds1); then \(SoakTests.switches) switches: RSS \(rss2) KiB, fds \(fds2)"
        )
        #expect(fds1 == fds0 && fds2 == fds0, "descriptors \(fds0) -> \(fds1) -> \(fds2)")
        // Flat: allow allocator noise, not growth per cycle (one leaked 640x480 frame per switch is 600 KB).
        #expect(rss1 - rss0 < 4096 && rss2 - rss0 < 8192, "RSS \(rss0) -> \(rss1) -> \(rss2) KiB")
    }
}
