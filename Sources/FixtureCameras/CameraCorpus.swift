import Foundation
public import VideoCapture
import SystemIO

/// A folder of fixture files, one camera each (the repository's `Fixtures/corpus`: listings of real cameras taken
/// from public bug reports), and negotiation run over every camera of it: what `camcap select --corpus DIR` prints,
/// one row per camera, and what the corpus tests compare with a checked-in table.
public enum CameraCorpus {
    /// At most this many files are read from one folder (a corpus is tens of files).
    public static let maximumFiles = 4096

    /// One camera of a corpus: its file's name without the extension, the file's path and what it describes.
    public struct Camera: Sendable {
        /// The file's name without `.txt` or `.json`: the camera's name in a corpus table.
        public var name: String
        /// The path the camera was loaded from.
        public var path: String
        /// The formats, sizes and rates the file lists.
        public var camera: CameraDescription
    }

    /// Every `*.txt` and `*.json` file in `directory` (not its subfolders), parsed, in byte order of their names.
    /// A file that does not parse is an error naming it, its line and what was wrong; so is a folder that cannot be
    /// read, one with more than `maximumFiles` fixture files, or one with none.
    public static func load(directory: String) throws(FixtureParseError) -> [Camera] {
        let names: [String]
        do throws(SystemError) {
            names = try FileSystem.entries(directory, limit: maximumFiles * 4)
        } catch { throw FixtureParseError(file: directory, line: 0, "cannot list the folder: \(error)") }
        let files = names.filter { $0.hasSuffix(".txt") || $0.hasSuffix(".json") }.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        guard files.count <= maximumFiles else {
            throw FixtureParseError(file: directory, line: 0, "\(files.count) fixture files; a corpus holds at most \(maximumFiles)")
        }
        guard !files.isEmpty else { throw FixtureParseError(file: directory, line: 0, "no fixture files (*.txt, *.json) in the folder") }
        var cameras: [Camera] = []
        for file in files {
            let path = directory.hasSuffix("/") ? directory + file : directory + "/" + file
            let stem = file.hasSuffix(".json") ? String(file.dropLast(5)) : String(file.dropLast(4))
            cameras.append(Camera(name: stem, path: path, camera: try CameraDescription.load(path: path)))
        }
        return cameras
    }

    /// What negotiation picked on one camera: the mode (nil when nothing could be picked), the conversion the frames
    /// need, and, for constraints with crop-and-scale, the size the frames are scaled to.
    public struct Pick: Sendable, Hashable {
        /// The camera's name in the corpus (its file's name without the extension).
        public var camera: String
        /// The chosen format, size and rate; nil when the camera has nothing negotiation may pick.
        public var selection: FormatSelection?
        /// The size frames are cropped and scaled to (constraints with `resizeMode` crop-and-scale), else nil.
        public var outputSize: FrameSize?
        /// Why nothing was picked (nil when something was).
        public var failure: String?

        /// The chosen mode in one cell: `MJPG 1280x720@30` (`… → 640x360` when scaled), or `-`.
        public var modeText: String {
            guard let s = selection else { return "-" }
            return "\(s.pixelFormat) \(s.size)@\(s.fps)" + (outputSize.map { " → \($0)" } ?? "")
        }

        /// The work the chosen frames need before encoding (`CameraCorpus.conversion(for:)`), or why nothing was picked.
        public var conversionText: String { selection.map { CameraCorpus.conversion(for: $0.pixelFormat) } ?? (failure ?? "-") }
    }

    /// The work frames of `pixelFormat` need on their way to the encoder: `none` (already I420), `decode JPEG`
    /// (MJPEG and JPEG), `passthrough` (the camera's own H.264), `convert YUYV` (any other format the converters take),
    /// `unconvertible` (the rest).
    public static func conversion(for pixelFormat: PixelFormat) -> String {
        switch pixelFormat {
        case .i420, .yuv420m: "none"
        case .mjpeg, .jpeg: "decode JPEG"
        case .h264: "passthrough"
        default: pixelFormat.isConvertibleToI420 ? "convert \(pixelFormat)" : "unconvertible"
        }
    }

    /// Negotiation by the package's rule (`FormatSelector`) for `target` on every camera.
    public static func picks(_ cameras: [Camera], target: FrameSize, fpsLimit: Fraction, pixelFormats: [PixelFormat] = []) -> [Pick] {
        cameras.map { c in
            if let s = FormatSelector.select(from: c.camera.formats, target: target, fpsLimit: fpsLimit, pixelFormats: pixelFormats) {
                return Pick(camera: c.name, selection: s)
            }
            return Pick(camera: c.name, selection: nil, failure: whyNothing(c.camera.formats, pixelFormats))
        }
    }

    /// Negotiation by constraints (`FormatSelector.select(from:constraints:fpsLimit:)`) on every camera; a camera that
    /// cannot meet them gets the `OverconstrainedError`'s message as its failure.
    public static func picks(_ cameras: [Camera], constraints: VideoConstraints, fpsLimit: Fraction) -> [Pick] {
        cameras.map { c in
            do throws(OverconstrainedError) {
                let chosen = try FormatSelector.select(from: c.camera.formats, constraints: constraints, fpsLimit: fpsLimit)
                return Pick(camera: c.name, selection: chosen.selection, outputSize: chosen.outputSize)
            } catch { return Pick(camera: c.name, selection: nil, failure: "overconstrained: \(error.message)") }
        }
    }

    private static func whyNothing(_ formats: [CaptureFormat], _ asked: [PixelFormat]) -> String {
        var listed: [PixelFormat] = []
        for f in formats where !listed.contains(f.pixelFormat) { listed.append(f.pixelFormat) }
        if !asked.isEmpty, !listed.contains(where: asked.contains) {
            return "none of \(asked.map(\.fourcc).joined(separator: ",")) listed"
        }
        return "no convertible format (" + listed.map(\.fourcc).joined(separator: ",") + ")"
    }

    /// The picks as an aligned table: a header, then one row per camera (camera, mode, conversion).
    public static func text(_ picks: [Pick]) -> String {
        let rows = [("CAMERA", "MODE", "CONVERSION")] + picks.map { ($0.camera, $0.modeText, $0.conversionText) }
        let w0 = rows.map(\.0.count).max() ?? 0, w1 = rows.map(\.1.count).max() ?? 0
        func pad(_ s: String, _ w: Int) -> String { s + String(repeating: " ", count: max(0, w - s.count)) }
        return rows.map { pad($0.0, w0) + "  " + pad($0.1, w1) + "  " + $0.2 }.joined(separator: "\n") + "\n"
    }

    /// The picks as a JSON array, one object per camera: `camera`, `pixelFormat`, `width`, `height`, `fps`
    /// (`outputWidth`/`outputHeight` when scaled) and `conversion`; a camera with nothing picked has
    /// `"selection": null` and `reason`.
    public static func json(_ picks: [Pick]) -> String {
        let items = picks.map { p -> String in
            guard let s = p.selection else { return jsonObject([("camera", p.camera), ("selection", NSNull()), ("reason", p.failure ?? "")]) }
            var pairs: [(String, Any)] = [
                ("camera", p.camera), ("pixelFormat", s.pixelFormat.fourcc), ("width", s.size.width), ("height", s.size.height), ("fps", s.fps),
            ]
            if let o = p.outputSize { pairs += [("outputWidth", o.width), ("outputHeight", o.height)] }
            return jsonObject(pairs + [("conversion", conversion(for: s.pixelFormat))])
        }
        return "[" + items.joined(separator: ",\n ") + "]\n"
    }

    /// Every policy's pick on one camera of a corpus (`camcap select --corpus DIR --policy NAME,…|all`), in the order
    /// the policies were asked for, and the `default` policy's mode they are compared with.
    public struct PolicyRow: Sendable, Hashable {
        /// The camera's name in the corpus (its file's name without the extension).
        public var camera: String
        /// One pick per policy asked for.
        public var picks: [PolicyPick]
        /// The `default` policy's mode on this camera (nil: it picks nothing): what the other picks are compared with.
        public var reference: CameraMode?

        /// The policies other than `default` whose mode differs from it on this camera.
        public var differing: [SelectionPolicy] { picks.filter(differs).map(\.policy) }

        /// Whether `pick` is another policy's with a mode other than `default`'s.
        public func differs(_ pick: PolicyPick) -> Bool { pick.policy != .default && pick.mode != reference }
    }

    /// `policies`' picks for `request` on every camera, each row with the `default` policy's mode to compare with.
    public static func policyRows(_ cameras: [Camera], policies: [SelectionPolicy], request: PolicyRequest) -> [PolicyRow] {
        cameras.map { c in
            let picks = policies.map { $0.select(from: c.camera.formats, request: request) }
            let reference =
                picks.first { $0.policy == .default }?.mode ?? SelectionPolicy.default.select(from: c.camera.formats, request: request).mode
            return PolicyRow(camera: c.name, picks: picks, reference: reference)
        }
    }

    /// A pick's mode in one cell: `YUYV 1280x720@10`, or `fails`.
    static func cell(_ pick: PolicyPick) -> String {
        pick.selection.map { "\($0.pixelFormat) \($0.size)@\($0.fps)" } ?? "fails"
    }

    /// The policies side by side: a header (CAMERA and each policy's name), one row per camera, each cell the
    /// policy's mode (`fails` where that stack would not start) marked `*` where it differs from `default`'s; then
    /// how many cameras each policy differs on, and on how many any does.
    public static func text(_ rows: [PolicyRow]) -> String {
        guard let policies = rows.first?.picks.map(\.policy) else { return "" }
        var table = [["CAMERA"] + policies.map(\.rawValue)]
        for r in rows { table.append([r.camera] + r.picks.map { cell($0) + (r.differs($0) ? " *" : "") }) }
        let widths = (0..<table[0].count).map { col in table.map { $0[col].count }.max() ?? 0 }
        func pad(_ s: String, _ w: Int) -> String { s + String(repeating: " ", count: max(0, w - s.count)) }
        var lines = table.map { row in zip(row, widths).map { pad($0, $1) }.joined(separator: "  ").trimmingSuffixSpaces() }
        let counts = policies.filter { $0 != .default }.map { p in "\(p.rawValue) \(rows.filter { $0.differing.contains(p) }.count)" }
        lines.append(
            "(* differs from default) \(rows.filter { !$0.differing.isEmpty }.count) of \(rows.count) cameras differ"
                + (counts.isEmpty ? "" : ": " + counts.joined(separator: ", ")))
        return lines.joined(separator: "\n") + "\n"
    }

    /// The policies side by side as one JSON object: `request` (`width`, `height`, `fps`, `pixelFormats`, `caps`),
    /// `cameras` (one object per camera: `camera`, `differs` (the policies whose mode differs from `default`'s) and
    /// `policies`, each `policy`, `selection` (`pixelFormat`, `width`, `height`, `fps`) or null, `reason`, `differs`),
    /// and `differing`: per policy, on how many cameras it differs.
    public static func json(_ rows: [PolicyRow], request: PolicyRequest) -> String {
        let policies = rows.first?.picks.map(\.policy) ?? []
        let cameras: [Any] = rows.map { r -> [(String, Any)] in
            let picks: [Any] = r.picks.map { p -> [(String, Any)] in
                var selection: Any = NSNull()
                if let s = p.selection {
                    selection =
                        [("pixelFormat", s.pixelFormat.fourcc), ("width", s.size.width), ("height", s.size.height), ("fps", s.fps)] as [(String, Any)]
                }
                return [("policy", p.policy.rawValue), ("selection", selection), ("reason", p.reason), ("differs", r.differs(p))]
            }
            return [("camera", r.camera), ("differs", r.differing.map { $0.rawValue as Any }), ("policies", picks)]
        }
        let req: [(String, Any)] = [
            ("width", request.size.width), ("height", request.size.height), ("fps", request.fps),
            ("pixelFormats", request.pixelFormats.map { $0.fourcc as Any }), ("caps", request.gstreamerCaps.description),
        ]
        let differing: [(String, Any)] = policies.filter { $0 != .default }.map { p in (p.rawValue, rows.filter { $0.differing.contains(p) }.count) }
        return jsonObject([("request", req), ("cameras", cameras), ("differing", differing)]) + "\n"
    }
}

extension String {
    fileprivate func trimmingSuffixSpaces() -> String {
        var s = self
        while s.last == " " { s.removeLast() }
        return s
    }
}
