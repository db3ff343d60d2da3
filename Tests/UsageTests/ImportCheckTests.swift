import Foundation
import Testing
import TestSupport

/// Every `import` of a module the package can name (one of its own targets, or a product of a package it depends
/// on) is declared by the importing target in Package.swift. SwiftPM builds an undeclared import whenever the module
/// happens to be built first, so nothing else notices the graph of docs/architecture.md going wrong.
enum ImportCheck {
    /// The module each `import` line of a Swift source names, with its line number: any access level, attributes
    /// (`@testable`, `@preconcurrency`), and the `import struct M.T` form. Comment lines are not imports.
    static func imports(in text: String) -> [(module: String, line: Int)] {
        let pattern =
            /^\s*(?:@\w+(?:\([^)]*\))?\s+)*(?:(?:public|package|internal|fileprivate|private)\s+)?import\s+(?:(?:struct|class|enum|protocol|typealias|func|var|let)\s+)?(\w+)/
        return text.split(separator: "\n", omittingEmptySubsequences: false).enumerated().compactMap { n, line in
            line.firstMatch(of: pattern).map { (String($0.1), n + 1) }
        }
    }

    /// A target as the check sees it: what it declares and its sources (file name, text).
    struct Target {
        var name: String
        var declared: Set<String>
        var sources: [(file: String, text: String)]
    }

    /// "T imports M (file:line) without declaring it" for every import of one of `modules` that `T` does not declare.
    static func undeclared(_ targets: [Target], modules: Set<String>) -> [String] {
        var found: [String] = []
        for t in targets {
            for (file, text) in t.sources {
                for (module, line) in imports(in: text) where modules.contains(module) && module != t.name && !t.declared.contains(module) {
                    found.append("\(t.name) imports \(module) (\(file):\(line)) without declaring it in Package.swift")
                }
            }
        }
        return found
    }

    /// The package's targets with their Swift sources, from `swift package dump-package`, and the modules they can name.
    static func packageTargets() throws -> (targets: [Target], modules: Set<String>) {
        let dump = try PackageDump.result.get()
        let fm = FileManager.default
        var targets: [Target] = []
        for t in dump.targets where t.type != "plugin" {
            let folder = t.path ?? (t.type == "test" ? "Tests/" : "Sources/") + t.name
            let root = repositoryRoot + "/" + folder
            let files = (fm.enumerator(atPath: root)?.allObjects as? [String] ?? []).filter { $0.hasSuffix(".swift") }.sorted()
            let sources = files.map { (folder + "/" + $0, (try? String(contentsOfFile: root + "/" + $0, encoding: .utf8)) ?? "") }
            let declared = Set(t.dependencies.filter { !$0.hasSuffix(" (plugin)") } + t.products)
            targets.append(Target(name: t.name, declared: declared, sources: sources))
        }
        let modules = Set(dump.targets.filter { $0.type != "test" && $0.type != "plugin" }.map(\.name) + dump.targets.flatMap(\.products))
        return (targets, modules)
    }
}

@Suite(.timeLimit(.minutes(2))) struct ImportCheckTests {
    @Test func everyImportOfAPackageModuleIsDeclared() throws {
        let (targets, modules) = try ImportCheck.packageTargets()
        #expect(targets.count > 30 && modules.isSuperset(of: ["VideoCapture", "NIOCore", "Logging"]), "\(targets.count) \(modules.sorted())")
        #expect(targets.first { $0.name == "WHEPServer" }?.sources.isEmpty == false, "the sources were read")
        let undeclared = ImportCheck.undeclared(targets, modules: modules)
        #expect(undeclared.isEmpty, "\(undeclared.joined(separator: "\n"))")
    }

    /// The check on a planted target: an undeclared import in any spelling is found, with its file and line;
    /// declared imports, modules outside the package and commented-out imports are not.
    @Test func aPlantedUndeclaredImportIsFound() {
        let text = """
            import Foundation
            public import CapturePipeline
            // import H264
            @testable import VideoProcessing
            internal import struct RTP.RTPSender
            """
        let planted = ImportCheck.Target(name: "WHEPServer", declared: ["CapturePipeline"], sources: [("Sources/WHEPServer/Planted.swift", text)])
        let found = ImportCheck.undeclared([planted], modules: ["CapturePipeline", "H264", "VideoProcessing", "RTP"])
        #expect(
            found == [
                "WHEPServer imports VideoProcessing (Sources/WHEPServer/Planted.swift:4) without declaring it in Package.swift",
                "WHEPServer imports RTP (Sources/WHEPServer/Planted.swift:5) without declaring it in Package.swift",
            ], "\(found)")
    }
}
