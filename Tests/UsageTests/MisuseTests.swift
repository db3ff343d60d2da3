import Testing

/// Misuse of the encoder thread does not compile (Swift 6 language mode): each snippet is compiled against the built
/// modules and must fail with exactly the errors its `// expected-error: …` comments name, on their lines (and the
/// notes of `// expected-note: …`). The correct uses compile without a diagnostic, so the harness is proven both ways.
struct Snippet: CustomTestStringConvertible, Sendable {
    var name: String
    var source: String
    var testDescription: String { name }

    /// The expected diagnostics: (line, kind, text) from the comments.
    var expected: [(line: Int, kind: String, text: String)] {
        source.split(separator: "\n", omittingEmptySubsequences: false).enumerated().flatMap { i, line in
            ["error", "note"].compactMap { kind -> (Int, String, String)? in
                guard let r = line.range(of: "// expected-\(kind): ") else { return nil }
                return (i + 1, kind, String(line[r.upperBound...]).trimmingCharacters(in: .whitespaces))
            }
        }
    }
}

let misuse: [Snippet] = [
    Snippet(
        name: "an output closure that mutates main-actor state",
        source: """
            import H264
            @MainActor final class Model { var frames = 0 }
            @MainActor func start(_ model: Model) throws -> EncoderThread {
                EncoderThread(encoder: try H264Encoder(settings: .init(width: 64, height: 64))) { _ in
                    model.frames += 1 // expected-error: main actor-isolated property 'frames' can not be mutated from a Sendable closure
                }
            }
            """),
    Snippet(
        name: "a non-Sendable closure value as the output",
        source: """
            import H264
            func start(output: @escaping (EncodedFrame) throws -> Void) throws -> EncoderThread {
                let encoder = try H264Encoder(settings: .init(width: 64, height: 64))
                return EncoderThread(encoder: encoder, output: output) // expected-error: passing non-Sendable parameter 'output' to function expecting a '@Sendable' closure
            }
            """),
    Snippet(
        name: "an output that captures a non-Sendable object the caller keeps",
        source: """
            import H264
            final class Counter { var frames = 0 }
            func start(_ counter: Counter) throws -> EncoderThread {
                EncoderThread(encoder: try H264Encoder(settings: .init(width: 64, height: 64))) { _ in
                    counter.frames += 1 // expected-error: capture of 'counter' with non-Sendable type 'Counter' in a '@Sendable' closure
                }
            }
            """),
    Snippet(
        name: "the encoder used after it was handed to the thread",
        source: """
            import H264
            import VideoCapture
            func run(_ picture: I420Buffer) throws {
                let encoder = try H264Encoder(settings: .init(width: 64, height: 64))
                let thread = EncoderThread(encoder: encoder) { _ in } // expected-error: sending 'encoder' risks causing data races
                try thread.submit(picture, timestampNs: 0)
                _ = try encoder.encode(picture, timestampNs: 1) // expected-note: access can happen concurrently
            }
            """),
    Snippet(
        name: "an encoder the caller does not own (a parameter) handed to the thread",
        source: """
            import H264
            func start(_ encoder: H264Encoder) -> EncoderThread {
                EncoderThread(encoder: encoder) { _ in } // expected-error: sending 'encoder' risks causing data races
            }
            """),
]

let correctUse: [Snippet] = [
    Snippet(
        name: "a fresh encoder handed over, a Sendable output, the control and the output's state used afterwards",
        source: """
            import H264
            import VideoCapture
            import Synchronization

            final class Tally: Sendable {
                let frames = Mutex(0)
            }
            func run(_ pictures: [I420Buffer]) throws -> Int {
                let tally = Tally()
                let encoder = try H264Encoder(settings: .init(width: 64, height: 64))
                let control = encoder.control
                let thread = EncoderThread(encoder: encoder) { _ in tally.frames.withLock { $0 += 1 } }
                for (i, p) in pictures.enumerated() { try thread.submit(p, timestampNs: Int64(i) * 33_333_333) }
                control.requestKeyFrame()
                try thread.finish()
                return tally.frames.withLock { $0 } + thread.control.statistics.frames
            }
            """),
    Snippet(
        name: "an actor-isolated count updated from the output through a Task",
        source: """
            import H264

            @MainActor final class Model { var frames = 0 }
            @MainActor func start(_ model: Model) throws -> EncoderThread {
                EncoderThread(encoder: try H264Encoder(settings: .init(width: 64, height: 64))) { _ in
                    Task { @MainActor in model.frames += 1 }
                }
            }
            """),
]

@Suite(.timeLimit(.minutes(2))) struct MisuseTests {
    @Test(arguments: misuse) func misuseDoesNotCompile(_ snippet: Snippet) throws {
        let r = try Compiler.check(snippet.source, named: "misuse-\(misuse.firstIndex { $0.name == snippet.name }!)")
        #expect(r.exitCode != 0, "compiled, but must not:\n\(snippet.source)")
        let expected = snippet.expected
        #expect(expected.contains { $0.kind == "error" }, "the snippet names no expected error")
        for e in expected {
            #expect(
                r.diagnostics.contains { $0.line == e.line && $0.kind == e.kind && $0.message.contains(e.text) },
                "no \(e.kind) '\(e.text)' on line \(e.line); swiftc said:\n\(r.output)")
        }
        let unexpected = r.errors.filter { d in !expected.contains { $0.line == d.line && $0.kind == "error" && d.message.contains($0.text) } }
        #expect(unexpected.isEmpty, "unexpected errors: \(unexpected)\n\(r.output)")
    }

    @Test(arguments: correctUse) func theCorrectUseCompiles(_ snippet: Snippet) throws {
        let r = try Compiler.check(snippet.source, named: "correct-\(correctUse.firstIndex { $0.name == snippet.name }!)")
        #expect(r.exitCode == 0 && r.diagnostics.filter { $0.kind != "note" }.isEmpty, "swiftc said:\n\(r.output)")
    }
}
