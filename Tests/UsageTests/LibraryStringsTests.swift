import Foundation
import Testing
import TestSupport

/// The libraries speak to apps, not to camcap's users (#47): no code line of a library module names camcap (an error
/// message saying "record one with camcap trace record" reaches an app that has no camcap). Doc comments may name it
/// (they explain what the CLI does with an API); so may the wire names kept stable for readers in other programs.
enum LibraryStrings {
    /// Names that are identifiers on the wire, not advice: the frame tap's shared memory, socket and format (read by
    /// Examples/FrameTap/frametap.py), the MJPEG boundary, and the player page's script names and stored token.
    static var wireNames: Regex<Substring> { /camcap-frame-tap|camcap-tap-|camcap-frametap|camcapframe|camcap-token|window\.camcap\w*/ }

    /// "file:line: text" for every code line (not a comment line) of `text` that names camcap outside the wire names.
    static func mentions(in text: String, file: String) -> [String] {
        text.split(separator: "\n", omittingEmptySubsequences: false).enumerated().compactMap { n, line in
            let code = line.trimmingCharacters(in: .whitespaces)
            guard !code.hasPrefix("//"), !code.hasPrefix("*"), !code.hasPrefix("/*") else { return nil }
            return code.replacing(wireNames, with: "").contains("camcap") ? "\(file):\(n + 1): \(code)" : nil
        }
    }

    /// The Swift sources of the library modules: every folder of Sources but the executables'.
    static func librarySources() throws -> [(file: String, text: String)] {
        let fm = FileManager.default
        let executables: Set = ["camcap", "vivid-check", "embed-fixtures"]
        var sources: [(String, String)] = []
        for module in try fm.contentsOfDirectory(atPath: repositoryRoot + "/Sources").sorted() where !executables.contains(module) {
            let root = repositoryRoot + "/Sources/" + module
            for file in (fm.enumerator(atPath: root)?.allObjects as? [String] ?? []).filter({ $0.hasSuffix(".swift") }).sorted() {
                sources.append(("Sources/\(module)/\(file)", try String(contentsOfFile: root + "/" + file, encoding: .utf8)))
            }
        }
        return sources
    }
}

@Suite struct LibraryStringsTests {
    @Test func noLibraryCodeLineNamesCamcap() throws {
        let sources = try LibraryStrings.librarySources()
        #expect(sources.count > 100 && sources.contains { $0.file == "Sources/CapturePipeline/CaptureSession.swift" }, "\(sources.count) files")
        let found = sources.flatMap { LibraryStrings.mentions(in: $0.text, file: $0.file) }
        #expect(found.isEmpty, "\(found.joined(separator: "\n"))")
    }

    /// The check on planted lines: advice naming camcap is found (with its line), a doc comment and the wire names are not.
    @Test func aPlantedMentionIsFound() {
        let text = """
            /// `camcap trace record` writes one.
            let name = "camcap-tap-\\(n).sock", boundary = "camcapframe"
            throw CaptureError(.unknownDevice, "no trace (record one with camcap trace record)")
            """
        #expect(
            LibraryStrings.mentions(in: text, file: "Planted.swift")
                == [#"Planted.swift:3: throw CaptureError(.unknownDevice, "no trace (record one with camcap trace record)")"#])
    }
}
