// embed-fixtures CAMERAS_DIR OUTPUT.swift
//
// Writes the Swift source of `enum BuiltinCameras` (one entry per *.json and *.txt file in CAMERAS_DIR, sorted
// by file name; the text is the file's exact contents) to OUTPUT.swift. Run by the EmbedFixtures build-tool
// plugin for the FixtureCameras target; not installed.
import Foundation

/// `text` with backslashes, quotes and control characters escaped, for a Swift string literal (so no delimiter
/// or interpolation can appear in it). When `multiLine`, line breaks and tabs stay as they are, and a quote is
/// escaped only after another quote (no three in a row).
func escaped(_ text: String, multiLine: Bool) -> String {
    var out = ""
    for scalar in text.unicodeScalars {
        switch scalar {
        case "\\": out += "\\\\"
        case "\"" where !multiLine || out.hasSuffix("\""): out += "\\\""
        case "\n" where multiLine, "\t" where multiLine: out.unicodeScalars.append(scalar)
        default:
            if scalar.value < 0x20 || scalar.value == 0x7f {
                out += "\\u{\(String(scalar.value, radix: 16))}"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
    }
    return out
}

/// A one-line string literal of `text`.
func literal(_ text: String) -> String { "\"" + escaped(text, multiLine: false) + "\"" }

/// A multi-line string literal of `text`. Its value is exactly `text`: the line break after the opening
/// delimiter and the one before the closing delimiter (at the start of a line, so nothing is unindented) are
/// not part of the value.
func multiLineLiteral(_ text: String) -> String { "\"\"\"\n" + escaped(text, multiLine: true) + "\n\"\"\"" }

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("embed-fixtures: \(message)\n".utf8))
    exit(1)
}

let arguments = CommandLine.arguments
guard arguments.count == 3 else { fail("usage: embed-fixtures CAMERAS_DIR OUTPUT.swift") }
let directory = URL(fileURLWithPath: arguments[1]), output = URL(fileURLWithPath: arguments[2])

let names: [String]
do {
    names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        .filter { $0.hasSuffix(".json") || $0.hasSuffix(".txt") }
        .sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) } // byte order, whatever the locale
} catch {
    fail("cannot list \(directory.path): \(error)")
}

var source = """
    // Generated at build time by the EmbedFixtures plugin (Sources/embed-fixtures) from Fixtures/cameras/.
    enum BuiltinCameras {
        /// (name, file name, text) of each built-in fixture, sorted by file name; the text is the file's contents.
        static let files: [(name: String, file: String, text: String)] = [

    """
for file in names {
    let url = directory.appendingPathComponent(file)
    guard let data = FileManager.default.contents(atPath: url.path) else { fail("cannot read \(url.path)") }
    guard let text = String(data: data, encoding: .utf8) else { fail("\(url.path) is not UTF-8") }
    let name = url.deletingPathExtension().lastPathComponent
    source += "        (name: \(literal(name)), file: \(literal(file)), text: \(multiLineLiteral(text))),\n"
}
source += "    ]\n}\n"

do {
    try Data(source.utf8).write(to: output, options: .atomic)
} catch {
    fail("cannot write \(output.path): \(error)")
}
