/// A small JSON reader that remembers the line of every value, so fixture errors can name the line.
package indirect enum JSONNode: Sendable {
    case object([(key: String, value: JSONNode)], line: Int)
    case array([JSONNode], line: Int)
    case string(String, line: Int)
    case number(Double, line: Int)
    case bool(Bool, line: Int)
    case null(line: Int)

    package var line: Int {
        switch self {
        case .object(_, let l), .array(_, let l), .string(_, let l), .number(_, let l), .bool(_, let l), .null(let l): l
        }
    }
    package subscript(key: String) -> JSONNode? {
        if case .object(let members, _) = self { return members.first { $0.key == key }?.value }
        return nil
    }
    package var kind: String {
        switch self {
        case .object: "an object"
        case .array: "an array"
        case .string(let s, _): "the string \"\(s)\""
        case .number(let n, _): "the number \(n)"
        case .bool(let b, _): "\(b)"
        case .null: "null"
        }
    }
}

package struct JSONReader {
    private let bytes: [UInt8]
    private var i = 0
    private var line = 1
    private let file: String

    package static func parse(_ text: String, file: String) throws(FixtureParseError) -> JSONNode {
        var r = JSONReader(bytes: Array(text.utf8), file: file)
        r.skipSpace()
        let v = try r.value()
        r.skipSpace()
        if r.i < r.bytes.count { throw r.fail("unexpected \(r.describeHere()) after the top-level value") }
        return v
    }

    private init(bytes: [UInt8], file: String) { self.bytes = bytes; self.file = file }

    private func fail(_ message: String) -> FixtureParseError { FixtureParseError(file: file, line: line, "invalid JSON: \(message)") }
    private func describeHere() -> String {
        i < bytes.count ? "'\(String(decoding: [bytes[i]], as: UTF8.self))'" : "end of file"
    }

    private mutating func skipSpace() {
        while i < bytes.count {
            switch bytes[i] {
            case 0x0a: line += 1; i += 1
            case 0x20, 0x09, 0x0d: i += 1
            default: return
            }
        }
    }

    private mutating func value() throws(FixtureParseError) -> JSONNode {
        guard i < bytes.count else { throw fail("expected a value, found end of file") }
        let here = line
        switch bytes[i] {
        case UInt8(ascii: "{"):
            i += 1; skipSpace()
            var members: [(key: String, value: JSONNode)] = []
            if i < bytes.count, bytes[i] == UInt8(ascii: "}") { i += 1; return .object(members, line: here) }
            while true {
                skipSpace()
                guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else { throw fail("expected a quoted key, found \(describeHere())") }
                let key = try string()
                skipSpace()
                guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else { throw fail("expected ':' after key \"\(key)\", found \(describeHere())") }
                i += 1; skipSpace()
                members.append((key, try value()))
                skipSpace()
                guard i < bytes.count else { throw fail("unterminated object (opened on line \(here))") }
                if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
                if bytes[i] == UInt8(ascii: "}") { i += 1; return .object(members, line: here) }
                throw fail("expected ',' or '}', found \(describeHere())")
            }
        case UInt8(ascii: "["):
            i += 1; skipSpace()
            var items: [JSONNode] = []
            if i < bytes.count, bytes[i] == UInt8(ascii: "]") { i += 1; return .array(items, line: here) }
            while true {
                skipSpace()
                items.append(try value())
                skipSpace()
                guard i < bytes.count else { throw fail("unterminated array (opened on line \(here))") }
                if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
                if bytes[i] == UInt8(ascii: "]") { i += 1; return .array(items, line: here) }
                throw fail("expected ',' or ']', found \(describeHere())")
            }
        case UInt8(ascii: "\""):
            return .string(try string(), line: here)
        case UInt8(ascii: "t"), UInt8(ascii: "f"), UInt8(ascii: "n"):
            for (word, node) in [("true", JSONNode.bool(true, line: here)), ("false", .bool(false, line: here)), ("null", .null(line: here))] {
                let w = Array(word.utf8)
                if bytes.count - i >= w.count, Array(bytes[i..<i + w.count]) == w { i += w.count; return node }
            }
            throw fail("unexpected \(describeHere())")
        default:
            let start = i
            while i < bytes.count, "+-0123456789.eE".utf8.contains(bytes[i]) { i += 1 }
            guard i > start, let n = Double(String(decoding: bytes[start..<i], as: UTF8.self)) else {
                throw fail("unexpected \(describeHere())")
            }
            return .number(n, line: here)
        }
    }

    private mutating func string() throws(FixtureParseError) -> String {
        i += 1
        var out: [UInt8] = []
        while i < bytes.count {
            let c = bytes[i]
            if c == UInt8(ascii: "\"") { i += 1; return String(decoding: out, as: UTF8.self) }
            if c == 0x0a { throw fail("newline inside a string") }
            if c == UInt8(ascii: "\\") {
                i += 1
                guard i < bytes.count else { break }
                switch bytes[i] {
                case UInt8(ascii: "n"): out.append(0x0a)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    guard i + 4 < bytes.count, let v = UInt32(String(decoding: bytes[i + 1...i + 4], as: UTF8.self), radix: 16),
                          let scalar = Unicode.Scalar(v) else { throw fail("bad \\u escape") }
                    out.append(contentsOf: Array(String(Character(scalar)).utf8)); i += 4
                default: out.append(bytes[i])
                }
                i += 1; continue
            }
            out.append(c); i += 1
        }
        throw fail("unterminated string")
    }
}
