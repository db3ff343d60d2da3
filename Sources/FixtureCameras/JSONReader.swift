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
        case .string(let s, _): "the string \(excerpt(s))"
        case .number(let n, _): "the number \(n)"
        case .bool(let b, _): "\(b)"
        case .null: "null"
        }
    }
}

package struct JSONReader {
    /// Objects and arrays nest at most this deep (a camera description needs 5): deeper input is an error,
    /// not a stack overflow.
    package static let maximumDepth = 64

    private let bytes: [UInt8]
    private var i = 0
    private var line = 1
    private var depth = 0
    private let file: String

    package static func parse(_ text: some StringProtocol, file: String) throws(FixtureParseError) -> JSONNode {
        var r = JSONReader(bytes: Array(text.utf8), file: file)
        r.skipSpace()
        let v = try r.value()
        r.skipSpace()
        if r.i < r.bytes.count { throw r.fail("unexpected \(r.describeHere()) after the top-level value") }
        return v
    }

    private init(bytes: [UInt8], file: String) {
        self.bytes = bytes
        self.file = file
    }

    private func fail(_ message: String) -> FixtureParseError { FixtureParseError(file: file, line: line, "invalid JSON: \(message)") }
    private func describeHere() -> String {
        guard i < bytes.count else { return "end of file" }
        let c = bytes[i]
        return c >= 0x20 && c < 0x7f ? "'\(Character(Unicode.Scalar(c)))'" : "byte 0x\(String(c, radix: 16))"
    }

    private mutating func skipSpace() {
        while i < bytes.count {
            switch bytes[i] {
            case 0x0a:
                line += 1
                i += 1
            case 0x20, 0x09, 0x0d: i += 1
            default: return
            }
        }
    }

    private mutating func value() throws(FixtureParseError) -> JSONNode {
        guard i < bytes.count else { throw fail("expected a value, found end of file") }
        let here = line
        switch bytes[i] {
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            guard depth < Self.maximumDepth else { throw fail("objects and arrays nest deeper than \(Self.maximumDepth) levels") }
            depth += 1
            defer { depth -= 1 }
            return bytes[i] == UInt8(ascii: "{") ? try object(line: here) : try array(line: here)
        case UInt8(ascii: "\""):
            return .string(try string(), line: here)
        case UInt8(ascii: "t"), UInt8(ascii: "f"), UInt8(ascii: "n"):
            for (word, node) in [("true", JSONNode.bool(true, line: here)), ("false", .bool(false, line: here)), ("null", .null(line: here))] {
                let w = Array(word.utf8)
                if bytes.count - i >= w.count, Array(bytes[i..<i + w.count]) == w {
                    i += w.count
                    return node
                }
            }
            throw fail("unexpected \(describeHere())")
        default:
            let start = i
            while i < bytes.count, "+-0123456789.eE".utf8.contains(bytes[i]) { i += 1 }
            guard i > start else { throw fail("expected a value, found \(describeHere())") }
            let text = String(decoding: bytes[start..<i], as: UTF8.self)
            guard i - start <= 64, let n = Double(text) else { throw fail("expected a number, found \(excerpt(text))") }
            guard n.isFinite else { throw fail("the number \(excerpt(text)) is out of range") }
            return .number(n, line: here)
        }
    }

    private mutating func object(line here: Int) throws(FixtureParseError) -> JSONNode {
        let close = UInt8(ascii: "}")
        var members: [(key: String, value: JSONNode)] = []
        guard !opensEmpty(closedBy: close) else { return .object(members, line: here) }
        repeat {
            skipSpace()
            guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else { throw fail("expected a quoted key, found \(describeHere())") }
            let key = try string()
            skipSpace()
            guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else {
                throw fail("expected ':' after key \(excerpt(key)), found \(describeHere())")
            }
            i += 1
            skipSpace()
            members.append((key, try value()))
        } while try !endsAfterItem(closedBy: close, of: "object", openedOn: here)
        return .object(members, line: here)
    }

    private mutating func array(line here: Int) throws(FixtureParseError) -> JSONNode {
        let close = UInt8(ascii: "]")
        var items: [JSONNode] = []
        guard !opensEmpty(closedBy: close) else { return .array(items, line: here) }
        repeat {
            skipSpace()
            items.append(try value())
        } while try !endsAfterItem(closedBy: close, of: "array", openedOn: here)
        return .array(items, line: here)
    }

    /// Past an object's or array's opening bracket and the space after it: true, and past `close`, when it is empty.
    private mutating func opensEmpty(closedBy close: UInt8) -> Bool {
        i += 1
        skipSpace()
        guard i < bytes.count, bytes[i] == close else { return false }
        i += 1
        return true
    }

    /// After an item of the `what` (object or array) opened on line `here`: past a ',' (false: another item
    /// follows) or past `close` (true: the end).
    private mutating func endsAfterItem(closedBy close: UInt8, of what: String, openedOn here: Int) throws(FixtureParseError) -> Bool {
        skipSpace()
        guard i < bytes.count else { throw fail("unterminated \(what) (opened on line \(here))") }
        let byte = bytes[i]
        guard byte == UInt8(ascii: ",") || byte == close else {
            throw fail("expected ',' or '\(Character(Unicode.Scalar(close)))', found \(describeHere())")
        }
        i += 1
        return byte == close
    }

    private func hex4(at k: Int) -> UInt32? {
        guard k >= 0, k + 4 <= bytes.count else { return nil }
        var v: UInt32 = 0
        for b in bytes[k..<(k + 4)] {
            switch b {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): v = v << 4 | UInt32(b - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): v = v << 4 | UInt32(b - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): v = v << 4 | UInt32(b - UInt8(ascii: "A") + 10)
            default: return nil
            }
        }
        return v
    }

    private mutating func string() throws(FixtureParseError) -> String {
        i += 1
        var out: [UInt8] = []
        while i < bytes.count {
            let c = bytes[i]
            if c == UInt8(ascii: "\"") {
                i += 1
                return String(decoding: out, as: UTF8.self)
            }
            if c == 0x0a { throw fail("newline inside a string") }
            if c == UInt8(ascii: "\\") {
                i += 1
                guard i < bytes.count else { break }
                switch bytes[i] {
                case UInt8(ascii: "n"): out.append(0x0a)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "r"): out.append(0x0d)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0c)
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(bytes[i])
                case UInt8(ascii: "u"):
                    guard var v = hex4(at: i + 1) else { throw fail("bad \\u escape: expected four hex digits") }
                    i += 4
                    if (0xD800..<0xDC00).contains(v), i + 6 < bytes.count, bytes[i + 1] == UInt8(ascii: "\\"), bytes[i + 2] == UInt8(ascii: "u"),
                        let low = hex4(at: i + 3), (0xDC00..<0xE000).contains(low)
                    {
                        v = 0x10000 + ((v - 0xD800) << 10) + (low - 0xDC00) // a UTF-16 surrogate pair
                        i += 6
                    }
                    guard let scalar = Unicode.Scalar(v) else { throw fail("bad \\u escape: U+\(String(v, radix: 16)) is not a character") }
                    out.append(contentsOf: Array(String(Character(scalar)).utf8))
                default: throw fail("unknown escape \\\(Character(Unicode.Scalar(bytes[i]))) in a string")
                }
                i += 1
                continue
            }
            out.append(c)
            i += 1
        }
        throw fail("unterminated string")
    }
}
