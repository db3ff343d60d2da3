// Helpers the test targets share: a scratch folder and running the real tools (ffmpeg, ffprobe, camcap).
import Foundation

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

/// Runs `tool` (a path, or a name looked up on PATH) and waits; optionally sends SIGINT after some seconds.
@discardableResult
public func runTool(_ tool: String, _ args: [String], in directory: String? = nil, interruptAfter: Double? = nil) throws -> ToolResult {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: tool.hasPrefix("/") ? tool : "/usr/bin/env")
    p.arguments = tool.hasPrefix("/") ? args : [tool] + args
    if let directory { p.currentDirectoryURL = URL(fileURLWithPath: directory) }
    let out = Pipe(), err = Pipe()
    p.standardOutput = out; p.standardError = err
    try p.run()
    if let t = interruptAfter { DispatchQueue.global().asyncAfter(deadline: .now() + t) { p.interrupt() } }
    let o = out.fileHandleForReading.readDataToEndOfFile(), e = err.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    return ToolResult(code: p.terminationStatus, out: String(decoding: o, as: UTF8.self), err: String(decoding: e, as: UTF8.self))
}

/// `runTool` as a tuple (exit code, stdout, stderr).
@discardableResult
public func run(_ tool: String, _ args: [String]) throws -> (Int32, String, String) {
    let r = try runTool(tool, args)
    return (r.code, r.out, r.err)
}
