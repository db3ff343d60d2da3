// JSON text for the command-line tool and the servers' /stats (keys in the order given; no Foundation encoder,
// so numbers print as they are and nothing is reordered).

/// A value that prints as a JSON number of its own making (a frame rate as `30000/1001` is a string's job;
/// `Fraction` prints its decimal form).
package protocol JSONNumber {
    /// The JSON text of the value.
    var jsonNumber: String { get }
}

/// Prints a JSON object with keys in the given order.
package func jsonObject(_ pairs: [(String, Any)]) -> String {
    "{" + pairs.map { "\"\($0.0)\": \(jsonValue($0.1))" }.joined(separator: ", ") + "}"
}
package func jsonValue(_ v: Any) -> String {
    switch v {
    case let s as String: return jsonString(s)
    case let n as JSONNumber: return n.jsonNumber
    case let i as Int: return String(i)
    case let d as Double: return d.isFinite ? String(d) : "null" // JSON has no inf/nan
    case let b as Bool: return b ? "true" : "false"
    case let o as [(String, Any)]: return jsonObject(o)
    case let a as [Any]: return "[" + a.map(jsonValue).joined(separator: ", ") + "]"
    default: return "null"
    }
}

/// A JSON string literal: quotes, backslashes and every control character escaped (RFC 8259), so names and
/// descriptions from fixture files or drivers can never break the output.
package func jsonString(_ s: String) -> String {
    var out = "\""
    for scalar in s.unicodeScalars {
        switch scalar {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case "\n": out += "\\n"
        case "\r": out += "\\r"
        case "\t": out += "\\t"
        case _
        where scalar.value < 0x20 || scalar.value == 0x7f || (0x80..<0xa0).contains(scalar.value) || scalar == "\u{2028}" || scalar == "\u{2029}":
            let hex = String(scalar.value, radix: 16)
            out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
        default: out.unicodeScalars.append(scalar)
        }
    }
    return out + "\""
}
