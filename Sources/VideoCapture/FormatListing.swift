/// A device's formats as text in `v4l2-ctl --list-formats-ext` style (so the two can be diffed, and a fixture
/// camera can be made from it: the listing parser reads it back) or as JSON (`camcap formats`).
public enum FormatListing {
    /// A negotiation's result in one line (`camcap select`): "YUYV (YUYV 4:2:2) 1280x720 @ 10 fps".
    public static func text(_ selection: FormatSelection) -> String {
        "\(selection.pixelFormat) (\(selection.format.formatDescription)) \(selection.size) @ \(selection.fps) fps"
    }

    /// A negotiation's result as one JSON object: `pixelFormat` (the FourCC), `width`, `height`, `fps`.
    public static func json(_ selection: FormatSelection) -> String {
        jsonObject([
            ("pixelFormat", selection.pixelFormat.fourcc), ("width", selection.size.width), ("height", selection.size.height),
            ("fps", selection.fps),
        ])
    }

    /// Negotiation explained (`camcap select --explain`): one line per format entry, the chosen one marked `*`, the
    /// others with the first rule they lost on (`FormatSelector.explain`).
    public static func text(_ verdicts: [FormatVerdict]) -> String {
        verdicts.map { ($0.chosen ? "* " : "  ") + $0.description }.joined(separator: "\n")
    }

    /// Negotiation explained as one JSON object: `selection` (as `json(_:)` of a selection, or null) and `candidates`,
    /// one object per format entry (`pixelFormat`, `size` as listed, `width`/`height`/`fps` of the mode it would give,
    /// `chosen`, `reason`).
    public static func json(_ verdicts: [FormatVerdict]) -> String {
        let items: [Any] = verdicts.map { v -> [(String, Any)] in
            var pairs: [(String, Any)] = [("pixelFormat", v.format.pixelFormat.fourcc), ("size", "\(v.format.size)")]
            if let m = v.mode { pairs += [("width", m.size.width), ("height", m.size.height), ("fps", m.fps)] }
            return pairs + [("chosen", v.chosen), ("reason", v.reason)]
        }
        let chosen = verdicts.first { $0.chosen }?.mode
        return "{\"selection\": \(chosen.map(json) ?? "null"), \"candidates\": \(jsonValue(items))}"
    }

    /// The listing, one format per `[N]` block with its sizes and frame intervals.
    public static func text(_ formats: [CaptureFormat]) -> String {
        var out = "ioctl: VIDIOC_ENUM_FMT\n\tType: Video Capture\n\n"
        var index = -1
        var last: PixelFormat?
        for f in formats {
            if f.pixelFormat != last {
                index += 1
                last = f.pixelFormat
                let compressed = f.pixelFormat.isCompressed ? ", compressed" : ""
                out += "\t[\(index)]: '\(f.pixelFormat.fourcc)' (\(f.formatDescription)\(compressed))\n"
            }
            out += "\t\tSize: \(f.size)\n"
            switch f.intervals {
            case .discrete(let list)?:
                for iv in list { out += "\t\t\tInterval: Discrete \(secs(iv))s (\(fps(iv.reciprocal)) fps)\n" }
            case .stepwise(let lo, let hi, let step)?:
                out +=
                    "\t\t\tInterval: Stepwise \(secs(lo))s - \(secs(hi))s with step \(secs(step))s (\(fps(hi.reciprocal))-\(fps(lo.reciprocal)) fps)\n"
            case .continuous(let lo, let hi)?:
                out += "\t\t\tInterval: Continuous \(secs(lo))s - \(secs(hi))s (\(fps(hi.reciprocal))-\(fps(lo.reciprocal)) fps)\n"
            case nil: break
            }
        }
        return out
    }

    static func secs(_ f: Fraction) -> String { threeDecimals(f.doubleValue) }
    static func fps(_ f: Fraction) -> String { threeDecimals(f.doubleValue) }

    /// A JSON array: one object per (format, size) with its frame rates.
    public static func json(_ formats: [CaptureFormat]) -> String {
        let items: [String] = formats.map { f in
            var pairs: [(String, Any)] = [
                ("pixelFormat", f.pixelFormat.fourcc), ("description", f.formatDescription),
                ("convertible", f.pixelFormat.isConvertibleToI420),
            ]
            switch f.size {
            case .discrete(let s): pairs += [("size", "discrete"), ("width", s.width), ("height", s.height)]
            case .stepwise(let a, let b, let st):
                pairs += [("size", "stepwise"), ("min", a.description), ("max", b.description), ("step", st.description)]
            case .continuous(let a, let b): pairs += [("size", "continuous"), ("min", a.description), ("max", b.description)]
            }
            switch f.intervals {
            case .discrete(let list)?: pairs.append(("fps", list.map { $0.reciprocal as Any }))
            case .stepwise(let lo, let hi, let st)?:
                pairs.append(("fpsRange", [("min", hi.reciprocal), ("max", lo.reciprocal), ("intervalStep", st.description)] as [(String, Any)]))
            case .continuous(let lo, let hi)?:
                pairs.append(("fpsRange", [("min", hi.reciprocal), ("max", lo.reciprocal)] as [(String, Any)]))
            case nil: break
            }
            return jsonObject(pairs)
        }
        return "[" + items.joined(separator: ",\n ") + "]\n"
    }
}

extension FormatListing {
    /// Policies' picks as text (`camcap select --policy`): for one pick, the line `select` prints and the reason
    /// under it; for several, one row per policy (mode and reason), rows whose mode differs from `reference` (the
    /// default policy's) marked `*`.
    public static func text(_ picks: [PolicyPick], reference: CameraMode? = nil) -> String {
        if picks.count == 1, let p = picks.first {
            return (p.selection.map(text) ?? "no mode: \(p.policy) would fail") + "\n  \(p.policy): \(p.reason)"
        }
        let width = picks.map { $0.policy.rawValue.count }.max() ?? 0
        let modes = picks.map { $0.mode.map { "\($0)" } ?? "fails" }
        let modeWidth = modes.map(\.count).max() ?? 0
        var lines: [String] = []
        for (p, m) in zip(picks, modes) {
            let mark = p.policy != .default && p.mode != reference ? "* " : "  "
            lines.append(
                mark + pad(p.policy.rawValue, width) + "  " + pad(m, modeWidth) + "  " + p.reason)
        }
        if picks.contains(where: { $0.policy != .default && $0.mode != reference }) { lines.append("(* differs from default)") }
        return lines.joined(separator: "\n")
    }

    /// Policies' picks as one JSON object: `request` (`width`, `height`, `fps`, `pixelFormats`, `caps`) and
    /// `policies`, one object per pick (`policy`, `source`, `selection` as `json(_:)` of a selection or null,
    /// `reason`, `differs`: whether its mode differs from `reference`).
    public static func json(_ picks: [PolicyPick], request: PolicyRequest, reference: CameraMode? = nil) -> String {
        let items: [Any] = picks.map { p -> [(String, Any)] in
            let selection: Any = p.selection.map { jsonSelectionPairs($0) as Any } ?? (Int?.none as Any)
            return [
                ("policy", p.policy.rawValue), ("source", p.policy.source), ("selection", selection),
                ("reason", p.reason), ("differs", p.policy != .default && p.mode != reference),
            ]
        }
        let req: [(String, Any)] = [
            ("width", request.size.width), ("height", request.size.height), ("fps", request.fps),
            ("pixelFormats", request.pixelFormats.map { $0.fourcc as Any }), ("caps", request.gstreamerCaps.description),
        ]
        return jsonObject([("request", req), ("policies", items)])
    }

    private static func pad(_ s: String, _ n: Int) -> String { s + String(repeating: " ", count: Swift.max(0, n - s.count)) }

    static func jsonSelectionPairs(_ s: FormatSelection) -> [(String, Any)] {
        [("pixelFormat", s.pixelFormat.fourcc), ("width", s.size.width), ("height", s.size.height), ("fps", s.fps)]
    }
}
