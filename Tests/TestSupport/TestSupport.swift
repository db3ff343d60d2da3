// Helpers the test targets share: a scratch folder and running the real tools (ffmpeg, ffprobe, camcap).
import Foundation
import FixtureFiles
import VideoCaptureCommons

/// A fresh folder under the temporary directory, one per process and name.
public func scratchDirectory(_ name: String) -> String {
    let d = FileManager.default.temporaryDirectory.appendingPathComponent("\(name)-\(getpid())").path
    try? FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true)
    return d
}

public struct ToolResult: Sendable {
    public var code: Int32
    public var out: String
    public var err: String
}

/// Runs `tool` (a path, or a name looked up on PATH) and waits. Both pipes are read at once (a child that
/// fills stderr while we wait on stdout cannot deadlock). With `interruptWhen`, SIGINT is sent once the text
/// the child has written to stderr so far satisfies the condition: tests wait on an event, never a clock
/// (`signal` sends another, e.g. SIGKILL for a crash).
@discardableResult
public func runTool(
    _ tool: String, _ args: [String], in directory: String? = nil, environment: [String: String]? = nil,
    interruptWhen: (@Sendable (String) -> Bool)? = nil, signal: Int32 = SIGINT
) throws -> ToolResult {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: tool.hasPrefix("/") ? tool : "/usr/bin/env")
    p.arguments = tool.hasPrefix("/") ? args : [tool] + args
    if let directory { p.currentDirectoryURL = URL(fileURLWithPath: directory) }
    if let environment { p.environment = environment }
    let out = Pipe(), err = Pipe()
    p.standardOutput = out
    p.standardError = err
    let collected = Collected()
    let group = DispatchGroup()
    for (pipe, isErr) in [(out, false), (err, true)] {
        group.enter()
        let handle = pipe.fileHandleForReading
        DispatchQueue.global().async {
            while true {
                let chunk = handle.availableData // blocks until data or EOF
                if chunk.isEmpty { break }
                let interrupt = collected.append(chunk, toErr: isErr, check: isErr ? interruptWhen : nil)
                if interrupt { kill(p.processIdentifier, signal) }
            }
            group.leave()
        }
    }
    try p.run()
    group.wait()
    p.waitUntilExit()
    let (o, e) = collected.contents
    return ToolResult(code: p.terminationStatus, out: String(decoding: o, as: UTF8.self), err: String(decoding: e, as: UTF8.self))
}

/// What a child wrote, appended from two reader threads.
private final class Collected: @unchecked Sendable {
    // @unchecked: all state behind `lock`.
    private let lock = NSLock()
    private var out = Data(), err = Data()
    private var interrupted = false
    /// Appends; returns true once, when `check` first holds on stderr.
    func append(_ d: Data, toErr: Bool, check: (@Sendable (String) -> Bool)?) -> Bool {
        lock.withLock {
            if toErr { err.append(d) } else { out.append(d) }
            guard let check, !interrupted, check(String(decoding: err, as: UTF8.self)) else { return false }
            interrupted = true
            return true
        }
    }
    var contents: (Data, Data) { lock.withLock { (out, err) } }
}

/// `runTool` as a tuple (exit code, stdout, stderr).
@discardableResult
public func run(_ tool: String, _ args: [String]) throws -> (Int32, String, String) {
    let r = try runTool(tool, args)
    return (r.code, r.out, r.err)
}

/// The repository's root folder (this file is Tests/TestSupport/TestSupport.swift).
public let repositoryRoot: String = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().path

/// The repository's Fixtures folder: the one home of the fixture data (cameras, listings, SDP, RTCP, the fuzzers'
/// seeds and crash inputs; Fixtures/README.md), read from any working directory (FixtureFiles, from #filePath).
public let fixturesRoot: String = fixturesDirectory

/// Writes `contents` to `name` in a scratch folder of this process and returns its path.
public func tempFile(_ name: String, _ contents: String) -> String {
    let path = scratchDirectory("test-files") + "/" + name
    _ = FileManager.default.createFile(atPath: path, contents: Data(contents.utf8))
    return path
}

// MARK: - Waiting for a condition

/// Checks `condition` every `interval` seconds until it holds or `timeout` seconds have passed, then once more;
/// returns whether it held. For conditions no event announces (another process's output, a socket table, a
/// counter on another thread): the timeout bounds a failing test, a passing one returns as soon as it holds.
@discardableResult
public func waitUntil(timeout: Double = 10, every interval: Double = 0.01, _ condition: () throws -> Bool) rethrows -> Bool {
    let end = Date().addingTimeInterval(timeout)
    while Date() < end {
        if try condition() { return true }
        usleep(useconds_t(interval * 1_000_000))
    }
    return try condition()
}

/// `waitUntil` for async tests: sleeps with `Task.sleep`, so the waiting task does not hold a thread.
@discardableResult
public func waitUntil(timeout: Double = 10, every interval: Double = 0.01, _ condition: () throws -> Bool) async rethrows -> Bool {
    let end = Date().addingTimeInterval(timeout)
    while Date() < end {
        if try condition() { return true }
        try? await Task.sleep(nanoseconds: UInt64(interval * 1_000_000_000))
    }
    return try condition()
}

/// Whether a UDP socket (IPv4 or IPv6) is bound to `port`, from the kernel's tables (/proc/net/udp, udp6). Reading
/// the tables never takes the port: a probe by `bind` would, for a moment, and a receiver binding it then fails.
public func udpPortInUse(_ port: Int) -> Bool {
    let hex = String(format: ":%04X ", port)
    return ["/proc/net/udp", "/proc/net/udp6"].contains { table in
        guard let t = try? String(contentsOfFile: table, encoding: .utf8) else { return false }
        return t.split(separator: "\n").dropFirst().contains(where: {
            $0.split(separator: " ").dropFirst().first.map { ($0 + " ").hasSuffix(hex) } ?? false
        })
    }
}

// MARK: - Configurations

/// What `validate` refuses in `base` changed by `change`: the setting a `SettingError` names (its message when it
/// names none, the description of any other error), nil when it passes. For the configurations' refusal tests.
public func refusedSetting<C>(_ base: C, _ change: (inout C) -> Void, validate: (C) throws -> Void) -> String? {
    var c = base
    change(&c)
    do {
        try validate(c)
        return nil
    } catch let error as any SettingError { return error.setting ?? error.message } catch { return "\(error)" }
}

// MARK: - WebRTC

/// The SDP offer Chromium 156 sends for a recvonly H.264 WHEP viewer (Fixtures/sdp/chromium-156-offer.sdp).
public let chromiumOffer: String = {
    let path = fixturesRoot + "/sdp/chromium-156-offer.sdp"
    guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { fatalError("cannot read \(path)") }
    return text
}()

/// The top-level boxes of an MP4 file as written by `FragmentedMP4Writer`: where the header (`ftyp` + `moov`)
/// ends, and where each fragment (`moof` + `mdat`) ends with the frames counted up to it (its `trun`'s
/// sample count, read at the fixed place the writer puts it). Boxes are walked by their sizes, as a demuxer does.
public func mp4Layout(_ bytes: [UInt8]) -> (headerEnd: Int, fragments: [(end: Int, frames: Int)], types: [String]) {
    func u32(_ i: Int) -> Int { Int(bytes[i]) << 24 | Int(bytes[i + 1]) << 16 | Int(bytes[i + 2]) << 8 | Int(bytes[i + 3]) }
    var at = 0, frames = 0, headerEnd = 0
    var fragments: [(end: Int, frames: Int)] = [], types: [String] = []
    while at + 8 <= bytes.count {
        let size = u32(at)
        let type = String(decoding: bytes[(at + 4)..<(at + 8)], as: UTF8.self)
        types.append(type)
        if type == "moov" { headerEnd = at + size }
        // trun's sample_count: moof(8) mfhd(16) traf(8) tfhd(16) tfdt(20), then trun's header (12).
        if type == "moof", at + 84 <= bytes.count { frames += u32(at + 8 + 16 + 8 + 16 + 20 + 12) }
        if type == "mdat" { fragments.append((at + size, frames)) }
        at += max(size, 8)
    }
    return (headerEnd, fragments, types)
}

/// Calls `body` with 127.0.0.1:`port` as a socket address (for bind, connect, sendto in tests that talk to a
/// server over raw sockets).
public func withLoopbackAddress<R>(port: Int, _ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
    var a = sockaddr_in()
    a.sin_family = sa_family_t(AF_INET)
    a.sin_port = in_port_t(UInt16(clamping: port).bigEndian)
    a.sin_addr.s_addr = inet_addr("127.0.0.1")
    return withUnsafePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
}
