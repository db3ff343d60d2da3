import Foundation
import Testing
import TestSupport

/// The package as SwiftPM reads it: `swift package dump-package` (offline; the manifest is evaluated, nothing is
/// resolved or fetched), in a scratch folder of its own so that it never waits on the lock of the build running us.
enum PackageDump {
    struct Target {
        var name: String
        var type: String
        var path: String?
        /// The package's own targets this one names (dependencies, then plugins used, as "Name (plugin)").
        var dependencies: [String]
        /// The products of other packages this one names (`.product(name:package:)`): modules it may import.
        var products: [String] = []
    }

    static let result: Result<(targets: [Target], products: [(name: String, isLibrary: Bool)]), DumpError> = {
        let scratch = scratchDirectory("dump-package")
        let r: ToolResult
        do {
            r = try runTool("swift", ["package", "--package-path", repositoryRoot, "--scratch-path", scratch, "dump-package"])
        } catch { return .failure(DumpError(message: "cannot run swift package dump-package: \(error)")) }
        guard r.code == 0, let json = try? JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [String: Any] else {
            return .failure(DumpError(message: "swift package dump-package exited \(r.code): \(r.err.suffix(2000))"))
        }
        let rawTargets = json["targets"] as? [[String: Any]] ?? []
        let names = Set(rawTargets.compactMap { $0["name"] as? String })
        func firstName(_ any: Any?) -> String? { (any as? [Any])?.first as? String }
        let targets = rawTargets.map { t in
            var dependencies: [String] = []
            for d in t["dependencies"] as? [[String: Any]] ?? [] {
                // {"byName": [name, condition]} or {"target": [name, condition]}; products of other packages are not ours.
                if let name = firstName(d["byName"]) ?? firstName(d["target"]), names.contains(name) { dependencies.append(name) }
            }
            for p in t["pluginUsages"] as? [[String: Any]] ?? [] {
                if let name = firstName(p["plugin"]), names.contains(name) { dependencies.append(name + " (plugin)") }
            }
            let products = (t["dependencies"] as? [[String: Any]] ?? []).compactMap { firstName($0["product"]) }
            return Target(
                name: t["name"] as? String ?? "", type: t["type"] as? String ?? "", path: t["path"] as? String, dependencies: dependencies,
                products: products)
        }
        let products = (json["products"] as? [[String: Any]] ?? []).map { p in
            (name: p["name"] as? String ?? "", isLibrary: (p["type"] as? [String: Any])?["library"] != nil)
        }
        return .success((targets, products))
    }()

    struct DumpError: Error, CustomStringConvertible {
        var message: String
        var description: String { message }
    }
}

/// Reads a markdown file of the repository ("" when it is missing: the tests then say what they did not find).
func repositoryText(_ path: String) -> String {
    (try? String(contentsOfFile: repositoryRoot + "/" + path, encoding: .utf8)) ?? ""
}

/// The lines of `text` after the line containing `marker`, inside the first fenced block or table that follows.
func linesAfter(marker: String, in text: String) -> [Substring] {
    let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
    guard let start = lines.firstIndex(where: { $0.contains(marker) }) else { return [] }
    var rest = lines[(start + 1)...].drop { $0.trimmingCharacters(in: .whitespaces).isEmpty }
    if rest.first?.hasPrefix("```") == true {
        rest = rest.dropFirst()
        return Array(rest.prefix { !$0.hasPrefix("```") })
    }
    return Array(rest.prefix { $0.hasPrefix("|") })
}

/// The front door and its guides hold what the package really is: the module graph in docs/architecture.md is the
/// manifest's, the README's module table names every product, and every relative link leads somewhere.
@Suite(.timeLimit(.minutes(2))) struct ArchitectureTests {
    /// The edge list of docs/architecture.md ("A -> B, C" per line) against the target dependencies among the package's
    /// own targets (test targets and the support targets under Tests/ left out): no edge missing, none extra.
    @Test func theArchitecturePagesEdgesAreThePackagesDependencies() throws {
        let dump = try PackageDump.result.get()
        var manifest: Set<String> = []
        for t in dump.targets where t.type != "test" && !(t.path ?? "").hasPrefix("Tests/") {
            for d in t.dependencies { manifest.insert("\(t.name) -> \(d)") }
        }
        #expect(manifest.count > 20, "\(manifest.sorted())")

        let block = linesAfter(marker: "<!-- module-edges:", in: repositoryText("docs/architecture.md"))
        var page: [String] = []
        for line in block where !line.trimmingCharacters(in: .whitespaces).isEmpty {
            let parts = line.split(separator: "->", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            try #require(parts.count == 2 && !parts[0].isEmpty, "docs/architecture.md: not an edge line: \(line)")
            for to in parts[1].split(separator: ",") { page.append("\(parts[0]) -> \(to.trimmingCharacters(in: .whitespaces))") }
        }
        #expect(page.count == Set(page).count, "an edge listed twice: \(page.sorted())")
        let missing = manifest.subtracting(page), extra = Set(page).subtracting(manifest)
        #expect(missing.isEmpty, "docs/architecture.md lacks edges Package.swift has: \(missing.sorted())")
        #expect(extra.isEmpty, "docs/architecture.md lists edges Package.swift does not have: \(extra.sorted())")
    }

    /// The README's module table: one row per product (each library, and the camcap executable), nothing else.
    @Test func theREADMEsModuleTableListsEveryProduct() throws {
        let dump = try PackageDump.result.get()
        let rows = linesAfter(marker: "<!-- modules:", in: repositoryText("README.md")).dropFirst(2) // the header and its rule
        let listed = rows.compactMap { $0.firstMatch(of: /^\|\s*`([^`]+)`/).map { String($0.1) } }
        #expect(listed.count == rows.count, "a row without a `Module` first: \(rows)")
        let products = Set(dump.products.map(\.name))
        #expect(
            Set(listed) == products, "missing: \(products.subtracting(listed).sorted()), not products: \(Set(listed).subtracting(products).sorted())")
        #expect(dump.products.contains { $0.isLibrary && $0.name == "WHIPClient" })
    }

    /// Every relative link in the README, the guides, the results page and Fixtures/README.md names a file that exists,
    /// and a link with a #fragment names a heading of that file (GitHub's anchors).
    @Test func everyRelativeLinkResolves() {
        let fm = FileManager.default
        let docs = ((try? fm.contentsOfDirectory(atPath: repositoryRoot + "/docs")) ?? []).filter { $0.hasSuffix(".md") }.map { "docs/" + $0 }
        let pages = ["README.md", "Benchmarks/RESULTS.md", "Fixtures/README.md"] + docs.sorted()
        var checked = 0
        for page in pages {
            let text = repositoryText(page)
            #expect(!text.isEmpty, "\(page) is missing")
            let directory = URL(fileURLWithPath: repositoryRoot + "/" + page).deletingLastPathComponent()
            for (number, line) in MarkdownPage.prose(text) {
                for match in line.matches(of: /\]\(([^)\s]+)\)/) {
                    let target = String(match.1)
                    if target.contains("://") || target.hasPrefix("mailto:") { continue }
                    checked += 1
                    let parts = target.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)
                    // "#heading" is this page; anything else is relative to the page's folder.
                    let file =
                        parts[0].isEmpty
                        ? repositoryRoot + "/" + page : directory.appendingPathComponent(String(parts[0])).standardized.path
                    guard fm.fileExists(atPath: file) else {
                        Issue.record("\(page):\(number): \(target): no such file")
                        continue
                    }
                    if parts.count == 2, file.hasSuffix(".md") {
                        let anchors = MarkdownPage.anchors((try? String(contentsOfFile: file, encoding: .utf8)) ?? "")
                        #expect(anchors.contains(String(parts[1])), "\(page):\(number): \(target): no such heading")
                    }
                }
            }
        }
        #expect(checked > 50)
    }
}

enum MarkdownPage {
    /// The lines outside fenced code blocks, with their line numbers.
    static func prose(_ text: String) -> [(Int, Substring)] {
        var inFence = false
        var lines: [(Int, Substring)] = []
        for (i, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            if line.trimmingCharacters(in: .whitespaces).hasPrefix("```") {
                inFence.toggle()
                continue
            }
            if !inFence { lines.append((i + 1, line)) }
        }
        return lines
    }

    /// GitHub's anchors for the headings: lower case, punctuation but `-` and `_` dropped, spaces as `-`, and `-1`,
    /// `-2` … for repeats.
    static func anchors(_ text: String) -> Set<String> {
        var seen: [String: Int] = [:]
        var anchors: Set<String> = []
        for (_, line) in prose(text) {
            guard let heading = line.firstMatch(of: /^#{1,6}\s+(.*)$/) else { continue }
            let slug = String(
                heading.1.lowercased().unicodeScalars.filter {
                    CharacterSet.alphanumerics.contains($0) || $0 == "-" || $0 == "_" || $0 == " "
                }.map(Character.init)
            ).replacingOccurrences(of: " ", with: "-")
            let n = seen[slug, default: 0]
            seen[slug] = n + 1
            anchors.insert(n == 0 ? slug : "\(slug)-\(n)")
        }
        return anchors
    }
}
