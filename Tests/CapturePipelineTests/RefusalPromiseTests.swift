// Every refusal the guides and the DocC articles promise is kept (#54): the sentences are found in the text, each
// must be listed in RefusalPromises.swift, and each listed check runs.
import Foundation
import Testing
import TestSupport

/// A sentence of a guide or an article that promises a refusal.
struct PromiseSentence: CustomTestStringConvertible, Sendable {
    var file: String
    var text: String
    var testDescription: String { "\(file): \(text.prefix(60))" }

    /// The files that make promises: the guides (docs/*.md) and the DocC catalogues (Sources/*/*.docc). Not the
    /// journal, the measurements or TESTING.md: they tell what was done and measured, and promise nothing.
    static let files: [String] = {
        let docs = ((try? FileManager.default.contentsOfDirectory(atPath: repositoryRoot + "/docs")) ?? [])
            .filter { $0.hasSuffix(".md") && !["JOURNAL.md", "MEASUREMENTS.md", "TESTING.md"].contains($0) }.sorted().map { "docs/" + $0 }
        let articles = ((try? FileManager.default.subpathsOfDirectory(atPath: repositoryRoot + "/Sources")) ?? [])
            .filter { $0.hasSuffix(".md") && $0.contains(".docc/") }.sorted().map { "Sources/" + $0 }
        return docs + articles
    }()

    /// What marks a promise of a refusal.
    static var marker: Regex<AnyRegexOutput> { try! Regex(#"\b(is|are) refused\b|refused by name|refuses[^.]{0,60}by name"#).ignoresCase() }

    /// The promising sentences of every file.
    static let all: [PromiseSentence] = files.flatMap { file in
        sentences(of: (try? String(contentsOfFile: repositoryRoot + "/" + file, encoding: .utf8)) ?? "")
            .filter { $0.contains(marker) }.map { PromiseSentence(file: file, text: $0) }
    }

    /// The sentences of a Markdown text outside code blocks, whitespace collapsed: paragraphs end at blank lines,
    /// list items, table rows and headings; a sentence ends at ". ", "! " or "? " before a capital, a backtick, an
    /// asterisk or a bracket.
    static func sentences(of text: String) -> [String] {
        var paragraphs: [String] = [], current: [Substring] = [], inCode = false
        func flush() {
            if !current.isEmpty { paragraphs.append(current.joined(separator: " ").split(whereSeparator: \.isWhitespace).joined(separator: " ")) }
            current = []
        }
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            let t = line.trimmingCharacters(in: .whitespaces)
            if t.hasPrefix("```") {
                inCode.toggle()
                flush()
                continue
            }
            if inCode { continue }
            if t.isEmpty || t.hasPrefix("- ") || t.hasPrefix("* ") || t.hasPrefix("|") || t.hasPrefix("#")
                || t.range(of: #"^\d+\. "#, options: .regularExpression) != nil
            {
                flush()
                guard !t.isEmpty else { continue }
                current = [Substring(t.hasPrefix("- ") || t.hasPrefix("* ") ? String(t.dropFirst(2)) : t)]
            } else {
                current.append(Substring(t))
            }
        }
        flush()
        return paragraphs.flatMap { p -> [String] in
            var out: [String] = [], start = p.startIndex, i = p.startIndex
            while i < p.endIndex {
                let next = p.index(after: i)
                if ".!?".contains(p[i]), next < p.endIndex, p[next] == " " {
                    let after = p.index(after: next)
                    if after < p.endIndex, p[after].isUppercase || "`*[".contains(p[after]) {
                        out.append(String(p[start...i]))
                        start = after
                    }
                }
                i = next
            }
            if start < p.endIndex { out.append(String(p[start...])) }
            return out
        }
    }
}

@Suite struct RefusalPromiseTests {
    /// Every promising sentence is in the list (RefusalPromises.swift), and every entry of the list is still a
    /// promising sentence of its file: a new promise fails here until it is listed with what keeps it.
    @Test func everyPromisedRefusalIsListed() {
        let promises = refusalPromises()
        #expect(PromiseSentence.all.count >= 10, "found \(PromiseSentence.all.count) promises: the search broke?")
        for s in PromiseSentence.all {
            #expect(
                promises.contains { $0.file == s.file && s.text.hasPrefix($0.sentence) },
                "\(s.file) promises a refusal that RefusalPromises.swift does not list: \"\(s.text)\"")
        }
        for p in promises {
            #expect(
                PromiseSentence.all.contains { $0.file == p.file && $0.text.hasPrefix(p.sentence) },
                "RefusalPromises.swift lists \"\(p.sentence)\" of \(p.file), which promises no refusal there any more")
        }
    }

    /// Every listed check holds: the API throws an error naming what the guide says, and a refusal kept by another
    /// target's test still has that test.
    @Test func everyPromisedRefusalIsKept() async throws {
        for promise in refusalPromises() {
            for check in promise.checks {
                switch check {
                case .call(let expected, let call):
                    do {
                        try await call()
                        Issue.record("\(promise.file): \"\(promise.sentence)\": the call that should refuse (\(expected)) succeeded")
                    } catch {
                        #expect("\(error)".contains(expected), "\(promise.file): \"\(promise.sentence)\": \(error), expected \"\(expected)\"")
                    }
                case .test(let file, let function):
                    let text = (try? String(contentsOfFile: repositoryRoot + "/" + file, encoding: .utf8)) ?? ""
                    #expect(
                        text.contains("func \(function)("), "\(promise.file): \"\(promise.sentence)\" is kept by \(file) \(function), which is gone")
                }
            }
        }
    }

    /// The sentence splitter keeps a promise whole across lines and stops at the next sentence.
    @Test func sentencesAreFoundAcrossLines() {
        let text =
            "Intro line.\nNonsense is\nrefused by name: a size. Then `x` is fine.\n\n```swift\nlet a = 1 // is refused\n```\n- **Item.** B is refused (403).\n"
        let found = PromiseSentence.sentences(of: text).filter { $0.contains(PromiseSentence.marker) }
        #expect(found == ["Nonsense is refused by name: a size.", "**Item.** B is refused (403)."], "\(found)")
    }
}
