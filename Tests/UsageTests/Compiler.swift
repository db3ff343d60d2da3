// Compiles Swift source the way a user's package would: swiftc against the modules this build made (their
// .swiftmodule files and the C module maps behind them), in the Swift 6 language mode, through SIL diagnostics
// (where `sending` and region-isolation errors are reported). No linking, so each file takes well under a second.
import Foundation
import TestSupport

/// One diagnostic swiftc reported.
struct Diagnostic: CustomStringConvertible, Equatable {
    var line: Int
    var column: Int
    var kind: String // "error", "warning" or "note"
    var message: String
    var description: String { "\(line):\(column): \(kind): \(message)" }
}

struct Compilation {
    var exitCode: Int32
    var diagnostics: [Diagnostic]
    /// Everything swiftc printed, for failure messages.
    var output: String
    var errors: [Diagnostic] { diagnostics.filter { $0.kind == "error" } }
}

enum Compiler {
    /// The build folder holding `Modules/` (the test binary lives in it).
    static let buildDirectory: URL = {
        let binary = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        if FileManager.default.fileExists(atPath: binary.appendingPathComponent("Modules").path) { return binary }
        return URL(fileURLWithPath: repositoryRoot).appendingPathComponent(".build/debug").resolvingSymlinksInPath()
    }()

    /// The scratch folder (`.build`): the nearest folder above the build folder holding the dependencies' checkouts.
    static let scratchPath: URL? = {
        var d = buildDirectory
        for _ in 0..<4 {
            d = d.deletingLastPathComponent()
            if FileManager.default.fileExists(atPath: d.appendingPathComponent("checkouts").path) { return d }
        }
        return nil
    }()

    /// Where the modules and their C module maps are: the built Swift modules; the module maps SwiftPM wrote for C
    /// targets; the dependencies' own `include/module.modulemap`s; this package's system-library targets.
    static let searchFlags: [String] = {
        let fm = FileManager.default
        func children(_ dir: URL) -> [URL] {
            ((try? fm.contentsOfDirectory(atPath: dir.path)) ?? []).sorted().map { dir.appendingPathComponent($0) }
        }
        var flags = ["-I", buildDirectory.appendingPathComponent("Modules").path]
        var maps = children(buildDirectory).map { $0.appendingPathComponent("module.modulemap") }
        if let scratch = scratchPath {
            for checkout in children(scratch.appendingPathComponent("checkouts")) {
                maps += children(checkout.appendingPathComponent("Sources")).map { $0.appendingPathComponent("include/module.modulemap") }
            }
        }
        for map in maps where fm.fileExists(atPath: map.path) { flags += ["-Xcc", "-fmodule-map-file=" + map.path] }
        for target in children(URL(fileURLWithPath: repositoryRoot).appendingPathComponent("Sources"))
        where fm.fileExists(atPath: target.appendingPathComponent("module.modulemap").path) {
            flags += ["-I", target.path]
        }
        return flags
    }()

    /// The toolchain's `swiftc` (the one on PATH, as for `swift build`).
    static let swiftc: String = {
        for dir in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin").split(separator: ":") {
            let path = "\(dir)/swiftc"
            if FileManager.default.isExecutableFile(atPath: path) { return path } // not resolved: swiftc is a link to the driver
        }
        return "/usr/bin/swiftc"
    }()

    /// PackageDescription's module, next to the toolchain's `swiftc` (`usr/bin/swiftc` → `usr/lib/swift/pm/ManifestAPI`).
    static var manifestAPI: String {
        URL(fileURLWithPath: swiftc).resolvingSymlinksInPath().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("lib/swift/pm/ManifestAPI").path
    }

    /// Where the compiled files are written (one folder per test process).
    private static let folder = scratchDirectory("usage-tests")

    /// Compiles `source` (a whole file; top-level code is allowed) against the built modules and returns what swiftc said.
    static func check(_ source: String, named name: String) throws -> Compilation {
        let file = folder + "/" + name + ".swift"
        try source.write(toFile: file, atomically: true, encoding: .utf8)
        let args = ["-emit-sil", "-o", "/dev/null", "-swift-version", "6", "-diagnostic-style", "llvm"] + searchFlags + [file]
        return parse(try runTool(swiftc, args), file: file)
    }

    /// Type-checks a `Package.swift` against PackageDescription, as SwiftPM does before it runs a manifest.
    static func checkManifest(_ source: String, named name: String, toolsVersion: String) throws -> Compilation {
        let dir = folder + "/" + name
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let file = dir + "/Package.swift"
        try source.write(toFile: file, atomically: true, encoding: .utf8)
        let args = [
            "-typecheck", "-swift-version", "6", "-diagnostic-style", "llvm", "-I", manifestAPI,
            "-package-description-version", toolsVersion, file,
        ]
        return parse(try runTool(swiftc, args), file: file)
    }

    private static func parse(_ r: ToolResult, file: String) -> Compilation {
        let output = r.out + r.err
        var diagnostics: [Diagnostic] = []
        for line in output.split(separator: "\n") where line.hasPrefix(file + ":") {
            // FILE:LINE:COLUMN: KIND: MESSAGE
            let rest = line.dropFirst(file.count + 1).split(separator: ":", maxSplits: 3, omittingEmptySubsequences: false)
            guard rest.count == 4, let l = Int(rest[0]), let c = Int(rest[1]) else { continue }
            let kind = rest[2].trimmingCharacters(in: .whitespaces)
            guard ["error", "warning", "note"].contains(kind) else { continue }
            diagnostics.append(Diagnostic(line: l, column: c, kind: kind, message: rest[3].trimmingCharacters(in: .whitespaces)))
        }
        return Compilation(exitCode: r.code, diagnostics: diagnostics, output: output)
    }
}
