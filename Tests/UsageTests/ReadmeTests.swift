import Foundation
import Testing
import TestSupport

/// One ```swift block of the README, of a guide in docs/ or of a DocC article, with the line its code starts on.
struct ReadmeBlock: CustomTestStringConvertible, Sendable {
    var file = "README.md"
    var line: Int
    var code: String
    /// For an article block that imports none of our modules: the blocks before it in the same article (a reader
    /// follows an article from block to block).
    var prelude = ""
    var testDescription: String { "\(file):\(line)" }
    var isManifest: Bool { code.contains("import PackageDescription") }

    /// The README's blocks, then the guides' (docs/*.md): a snippet moved from the README into a guide stays compiled.
    static let all: [ReadmeBlock] = (["README.md"] + guides).flatMap { blocks(of: $0) }

    /// The guides in docs/, by name.
    static let guides: [String] = ((try? FileManager.default.contentsOfDirectory(atPath: repositoryRoot + "/docs")) ?? [])
        .filter { $0.hasSuffix(".md") }.sorted().map { "docs/" + $0 }

    /// A name for the compiled file, unique across the README, the guides and the articles.
    var fileName: String { file.replacingOccurrences(of: "/", with: "-").replacingOccurrences(of: ".md", with: "") + "-\(line)" }

    /// The ```swift blocks of the DocC articles and landing pages (Sources/<Module>/<Module>.docc/*.md).
    static let articles: [ReadmeBlock] = {
        let sources = repositoryRoot + "/Sources"
        let files = ((try? FileManager.default.subpathsOfDirectory(atPath: sources)) ?? [])
            .filter { $0.hasSuffix(".md") && $0.contains(".docc/") }.sorted()
        // Package.swift lines are checked with the README's manifest; the rest compiles.
        return files.flatMap { file in
            var chain = ""
            return blocks(of: "Sources/" + file).filter { !$0.code.contains(".package(url:") }.map { block in
                var b = block
                let importsOurs = ThisPackage.libraries.contains { block.code.contains("import \($0)\n") }
                if !importsOurs { b.prelude = chain }
                chain += block.code
                return b
            }
        }
    }()

    static func blocks(of file: String) -> [ReadmeBlock] {
        let readme = (try? String(contentsOfFile: repositoryRoot + "/" + file, encoding: .utf8)) ?? ""
        var blocks: [ReadmeBlock] = []
        var current: (line: Int, lines: [Substring])?
        for (i, line) in readme.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            if var c = current {
                if line.trimmingCharacters(in: .whitespaces) == "```" {
                    blocks.append(ReadmeBlock(file: file, line: c.line, code: c.lines.joined(separator: "\n") + "\n"))
                    current = nil
                } else {
                    c.lines.append(line)
                    current = c
                }
            } else if line.trimmingCharacters(in: .whitespaces) == "```swift" {
                current = (i + 2, [])
            }
        }
        return blocks
    }
    static var code: [ReadmeBlock] { all.filter { !$0.isManifest } }
    static var manifests: [ReadmeBlock] { all.filter(\.isManifest) }
}

/// This package's name and library products, read from its Package.swift.
enum ThisPackage {
    static let manifest = (try? String(contentsOfFile: repositoryRoot + "/Package.swift", encoding: .utf8)) ?? ""
    static var name: String? { manifest.firstMatch(of: /let package = Package\(\s*name: "([^"]+)"/).map { String($0.1) } }
    static var libraries: Set<String> { Set(manifest.matches(of: /\.library\(name: "([^"]+)"/).map { String($0.1) }) }
}

/// Every Swift block in the README and in the guides (docs/*.md) is a complete file that compiles against the built
/// modules (imports included, no undefined names, no pseudo-code), and the README's Package.swift lines are a manifest
/// SwiftPM accepts that names this package and its real products.
@Suite(.timeLimit(.minutes(2))) struct ReadmeTests {
    @Test func theREADMEHasSwiftBlocksAndAManifest() {
        let readme = ReadmeBlock.all.filter { $0.file == "README.md" }
        #expect(readme.contains { !$0.isManifest }, "the README shows code, not only the manifest")
        #expect(readme.filter(\.isManifest).count == 1)
        // The guides keep the examples that moved out of the README; the manifest stays in the README alone.
        let guides = ReadmeBlock.all.filter { $0.file.hasPrefix("docs/") }
        #expect(guides.count >= 5 && !guides.contains(where: \.isManifest), "\(guides.map(\.testDescription))")
    }

    @Test(arguments: ReadmeBlock.code) func theBlockCompiles(_ block: ReadmeBlock) throws {
        let r = try Compiler.check(block.code, named: block.fileName)
        // Diagnostics on the file's own lines: the block starts at `block.line`.
        let shown = r.diagnostics.filter { $0.kind != "note" }.map { "\(block.file):\(block.line + $0.line - 1): \($0.kind): \($0.message)" }
        #expect(r.exitCode == 0 && shown.isEmpty, "\(shown.joined(separator: "\n"))\n\(r.exitCode != 0 && shown.isEmpty ? r.output : "")")
    }

    /// The DocC articles' examples are whole files too: what a reader pastes compiles.
    @Test func everyModuleHasACatalogueWithSwiftExamples() {
        let modules = Set(ReadmeBlock.articles.map { String($0.file.split(separator: "/")[1]) })
        #expect(ThisPackage.libraries.isSubset(of: modules), "no Swift example in the catalogue of \(ThisPackage.libraries.subtracting(modules))")
    }

    @Test(arguments: ReadmeBlock.articles) func theArticleBlockCompiles(_ block: ReadmeBlock) throws {
        let r = try Compiler.check(block.prelude + block.code, named: "docc-\(block.file.split(separator: "/").last!.dropLast(3))-\(block.line)")
        let before = block.prelude.split(separator: "\n", omittingEmptySubsequences: false).count - 1
        let shown = r.diagnostics.filter { $0.kind != "note" }.map {
            $0.line > before
                ? "\(block.file):\(block.line + $0.line - before - 1): \($0.kind): \($0.message)"
                : "\(block.file), an earlier block (line \($0.line) of the chain): \($0.kind): \($0.message)"
        }
        #expect(r.exitCode == 0 && shown.isEmpty, "\(shown.joined(separator: "\n"))\n\(r.exitCode != 0 && shown.isEmpty ? r.output : "")")
    }

    /// The WHEP article's first block is `Examples/EmbeddedWHEP/main.swift` from its first import on: what the
    /// article shows is what is built and what EmbeddingTests runs with Chromium as the viewer (#39).
    @Test func theServingArticlesFirstBlockIsTheEmbeddingExample() throws {
        let article = "Sources/WHEPServer/WHEPServer.docc/ServingAndStreaming.md"
        let block = try #require(ReadmeBlock.blocks(of: article).first, "no Swift block in \(article)")
        let example = try String(contentsOfFile: repositoryRoot + "/Examples/EmbeddedWHEP/main.swift", encoding: .utf8)
        let lines = example.split(separator: "\n", omittingEmptySubsequences: false)
        let start = try #require(lines.firstIndex { $0.hasPrefix("import ") }, "the example imports something")
        let code = lines[start...].joined(separator: "\n")
        let shown = block.code.split(separator: "\n", omittingEmptySubsequences: false)
        let built = code.split(separator: "\n", omittingEmptySubsequences: false)
        let first = zip(shown, built).enumerated().first { $0.element.0 != $0.element.1 }
        #expect(
            block.code == code,
            first.map { "\(article):\(block.line + $0.offset) differs from the example: \"\($0.element.0)\" against \"\($0.element.1)\"" }
                ?? "\(article):\(block.line): \(shown.count) lines against the example's \(built.count)")
    }

    @Test func thePackageManifestCompilesAndNamesThisPackageAndItsProducts() throws {
        let block = try #require(ReadmeBlock.manifests.first)
        let tools = try #require(block.code.firstMatch(of: /^\/\/ swift-tools-version:\s*([0-9.]+)/), "the manifest starts with its tools version")
        let r = try Compiler.checkManifest(block.code, named: "readme-manifest", toolsVersion: String(tools.1))
        #expect(r.exitCode == 0 && r.errors.isEmpty, "\(r.output)")

        // The dependency: its identity (the URL's or path's last component, as SwiftPM derives it) is this package's name.
        let name = try #require(ThisPackage.name)
        #expect(name == "swift-video-capture")
        let dependencies = block.code.matches(of: /\.package\((?:url|path): "([^"]+)"/).map { String($0.1) }
        #expect(!dependencies.isEmpty)
        for d in dependencies {
            var identity = String(d.split(separator: "/").last ?? "")
            if identity.hasSuffix(".git") { identity.removeLast(4) }
            #expect(identity == name, "\(d) is the package \(identity), not \(name)")
        }
        // The products: real library products of this package.
        let products = block.code.matches(of: /\.product\(name: "([^"]+)", package: "([^"]+)"\)/).map { (String($0.1), String($0.2)) }
        #expect(!products.isEmpty)
        for (product, package) in products {
            #expect(package == name, ".product(name: \"\(product)\", package: \"\(package)\")")
            #expect(ThisPackage.libraries.contains(product), "\(product) is not a library product of \(name): \(ThisPackage.libraries.sorted())")
        }
    }
}
