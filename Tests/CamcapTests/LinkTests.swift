import Foundation
import Testing
import TestSupport

/// Real links (#21): each Chromium viewer in its own network namespace behind its own veth pair, its rate limited
/// with `tc … tbf` (Scripts/cc-link.py creates and removes them). Needs root, ip and tc: CI runs as root.
let linksAvailable =
    chromiumAvailable && getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/sbin/ip")
    && FileManager.default.isExecutableFile(atPath: "/usr/sbin/tc")

/// One second of one viewer, as cc-link.py records it: the server's send rate and the viewer's tier (/stats), the
/// browser's picture (getStats).
struct LinkRow {
    var t: Double, limit: Int, sendKbps: Int?, tier: Int, width: Int, height: Int, fps: Double, freezes: Int, freezeSeconds: Double
    /// The server's estimate of the viewer's link, and the rate its tier's encoder is asked for (kbit/s).
    var estimateKbps: Int?, tierRateKbps: Int?
    /// The longest single freeze so far (the browser's getStats read every 100 ms).
    var longestFreeze: Double
    /// Frames the server sent the viewer in the last second, and how busy the whole machine was then (percent of
    /// both cores): a viewer's frame rate that falls while the server sent 30 and the box was saturated is the
    /// box's, not the link's.
    var sentFps: Double?, boxBusyPercent: Int?

    init(_ d: [String: Any]) {
        t = (d["t"] as? Double) ?? 0
        limit = int(d, "limit")
        sendKbps = (d["sendKbps"] as? NSNumber)?.intValue
        estimateKbps = (d["estimateKbps"] as? NSNumber)?.intValue
        tierRateKbps = (d["tierRateKbps"] as? NSNumber)?.intValue
        tier = int(d, "tier")
        width = int(d, "width")
        height = int(d, "height")
        fps = (d["fps"] as? NSNumber)?.doubleValue ?? 0
        freezes = int(d, "freezes")
        freezeSeconds = (d["freezeSeconds"] as? NSNumber)?.doubleValue ?? 0
        longestFreeze = (d["longestFreeze"] as? NSNumber)?.doubleValue ?? 0
        sentFps = (d["sentFps"] as? NSNumber)?.doubleValue
        boxBusyPercent = (d["boxBusyPercent"] as? NSNumber)?.intValue
    }
    var text: String {
        String(
            format: "%.0f s %@ %@ kbit/s tier %d %dx%d %.0f fps (sent %@, box %@ %% busy) freezes %d", t, limit > 0 ? "\(limit)k" : "open",
            sendKbps.map(String.init) ?? "-", tier, width, height, fps, sentFps.map { String(format: "%.0f", $0) } ?? "-",
            boxBusyPercent.map(String.init) ?? "-", freezes)
    }
}

/// The issue's own bounds (A at ≥ 28 fps in every second; B: at most 2 freezes a minute; the step: no freeze over
/// 1 s, the send rate back within 5 s) are asserted when LINKS_STRICT=1 (`Scripts/links.sh` runs them so,
/// repeatedly, and prints the figures). By default (CI) the run asserts what does not depend on the machine's load:
/// each viewer's tier, A's picture and rate (≥ 28 fps in 90 % of the seconds), B at ≥ 20 fps and back on the full
/// tier within 15 s, the step followed both ways; freezes and times are printed.
/// Measured on the 2-core CI box, a run's freezes and its step-up time swing with the load: B 1-5 freezes in a
/// limited minute, the step up 2.1-5.1 s, its longest freeze 0.59-1.37 s before the further probing of 2026-11-26;
/// since, on an otherwise idle machine, B 0-3 freezes, the step up 3.1-4.1 s, the freeze 0.52-0.85 s; since a probe
/// that lost packets makes the next wait 8 s, 15 strict runs: B 0-2, the step up 2.1-4.1 s, the freeze 0.40-0.81 s;
/// on #39's link (5 kB bucket, both ways) with the cleared-queue probe, 10 strict runs: B 0-1 (4 once), the step up
/// 3.1-4.1 s, A at 25-27 fps in single seconds in 3 of 20 tiers runs; 5 more: A ≥ 29 fps throughout, B 0 freezes in
/// 4 runs and 4 (each after a probe) in one (docs/JOURNAL.md; the latest set: docs/MEASUREMENTS.md).
let linksStrict = ProcessInfo.processInfo.environment["LINKS_STRICT"] == "1"
/// The server under test: `LINKS_CAMCAP` (Scripts/links.sh gives the release build, what a user runs: 90-100 ms of
/// CPU a second at two viewers and three tiers instead of the debug build's 340-390), else the debug build beside
/// the tests.
let linkCamcap = ProcessInfo.processInfo.environment["LINKS_CAMCAP"] ?? camcap

/// Runs cc-link.py with `viewers` for `seconds` and returns each viewer's rows by name.
func linkRun(_ viewers: [String], seconds: Int, name: String, bucket: [String] = []) throws -> [String: [LinkRow]] {
    let json = work + "/\(name).json"
    var args = [repo + "/Scripts/cc-link.py", "--seconds", "\(seconds)", "--json", json, "--camcap", linkCamcap] + bucket
    for v in viewers { args += ["--viewer", v] }
    let r = try runTool("/usr/bin/python3", args)
    print(r.out.split(separator: "\n").filter { !$0.hasPrefix("{") }.joined(separator: "\n"))
    guard r.code == 0, let data = FileManager.default.contents(atPath: json),
        let d = try JSONSerialization.jsonObject(with: data) as? [String: Any], let vs = d["viewers"] as? [String: Any]
    else {
        Issue.record("cc-link.py failed (\(r.code)): \(r.err.suffix(2000))")
        return [:]
    }
    var out: [String: [LinkRow]] = [:]
    for (k, v) in vs { out[k] = ((v as? [String: Any])?["rows"] as? [[String: Any]] ?? []).map(LinkRow.init) }
    return out
}

@Suite(.serialized, .timeLimit(.minutes(6))) struct LinkTests {
    /// Viewer A on an open link keeps the full tier while viewer B, behind 400 kbit/s (#39's link: a 5 kB bucket,
    /// 200 ms of queue, both directions), gets a smaller one; when B's limit is lifted it is back on the full tier
    /// within 15 s. (With one shared encode, `--tiers 1`, the same run drags A down to B's rate: 190-290 kbit/s
    /// measured.)
    @Test(.enabled(if: linksAvailable)) func eachViewerGetsTheTierItsLinkCarries() throws {
        try tiersBehind(bucket: [], name: "link-tiers")
    }

    /// The same behind a bucket deep enough to pass a whole probe at line rate (64 kB) and 400 ms of queue: the
    /// delivered rate must take back what the bucket's burst let through. Run by `Scripts/links.sh` (strict).
    @Test(.enabled(if: linksAvailable && linksStrict)) func aDeepBucketDoesNotFoolTheEstimate() throws {
        try tiersBehind(bucket: ["--burst", "64kb", "--latency", "400ms"], name: "link-tiers-64k")
    }

    func tiersBehind(bucket: [String], name: String) throws {
        let lift = 60.0
        let rows = try linkRun(["A", "B=0:400,\(Int(lift)):0"], seconds: Int(lift) + 18, name: name, bucket: bucket)
        let a = rows["A"] ?? [], b = rows["B"] ?? []
        #expect(a.count >= 60 && b.count >= 60, "rows: A \(a.count), B \(b.count)")
        guard a.count > 3, b.count > 3 else { return }
        // A: 1280x720, at ≥ 28 fps (Chromium's per-second figure) in every second (strict; by default in at least
        // 90 % of them), and at ≥ 80 % of the full tier's target (1500 kbit/s) in every second.
        // A starts as every viewer does, on the tier its first estimate allows, and climbs (2-3 s, the tier's dwell
        // included); from 5 s, as B, it is judged: then on the full tier in every second.
        let aStart = a.first { $0.width == 1280 && $0.height == 720 }
        #expect(aStart != nil && aStart!.t <= 5, "A on 1280x720 from \(aStart.map { String(format: "%.1f", $0.t) } ?? "never") s")
        let aJudged = a.filter { $0.t >= 5 }
        let aSmall = aJudged.filter { $0.width != 1280 || $0.height != 720 }
        #expect(aSmall.isEmpty, "A not at 1280x720: \(aSmall.map(\.text))")
        let aSlow = aJudged.filter { $0.fps < 28 }
        #expect(
            linksStrict ? aSlow.isEmpty : aSlow.count * 10 <= aJudged.count,
            "A under 28 fps in \(aSlow.count) of \(aJudged.count) s: \(aSlow.map(\.text))")
        let aLow = aJudged.filter { ($0.sendKbps ?? 0) < 1200 }
        #expect(aLow.isEmpty, "A under 80 % of 1500 kbit/s: \(aLow.map(\.text))")
        // A's tier never pulled down by B: the rate its encoder is asked for stays at ≥ 90 % (strict; 80 % by
        // default) of what it was while B was limited, also when B moves back up onto it.
        let aBefore = a.filter { $0.t >= 5 && $0.t < lift }.compactMap(\.tierRateKbps).sorted()
        let aReference = aBefore.isEmpty ? 0 : aBefore[aBefore.count / 2]
        let aRates = a.filter { $0.t >= 5 }.compactMap(\.tierRateKbps)
        let aShare = Double(aRates.min() ?? 0) / Double(max(aReference, 1))
        // What A was sent (content makes it swing ±15 % a second around the tier's rate): its lowest 2 s average
        // from the lift on against its median while B was limited, printed.
        let aSentBefore = a.filter { $0.t >= 5 && $0.t < lift }.compactMap(\.sendKbps).sorted()
        let aSentAfter = a.filter { $0.t >= lift }.compactMap(\.sendKbps)
        let aSentLowest = zip(aSentAfter, aSentAfter.dropFirst()).map { ($0 + $1) / 2 }.min() ?? 0
        let aSentShare = aSentBefore.isEmpty ? 0 : Double(aSentLowest) / Double(max(aSentBefore[aSentBefore.count / 2], 1))
        #expect(
            aShare >= (linksStrict ? 0.9 : 0.8),
            "A's tier at \(aRates.min() ?? 0) kbit/s against \(aReference) while B was limited: \(a.map { "\(Int($0.t)) s \($0.tierRateKbps ?? -1)" })"
        )
        // B while limited, from when it plays its lower tier (it starts, as every viewer, on the tier of its start
        // estimate; it must have found its own within 10 s, and within 5 s it is not judged either): a smaller tier
        // at ≥ 20 fps, at most 2 freezes per minute.
        let settled = b.first { $0.t < lift && $0.width < 1280 }
        #expect(settled != nil && settled!.t <= 10, "B on a lower tier from \(settled.map { String(format: "%.1f", $0.t) } ?? "never") s")
        let judgedFrom = max(5, settled?.t ?? 5)
        let limited = b.filter { $0.t >= judgedFrom && $0.t < lift }
        let bFull = limited.filter { $0.width >= 1280 || $0.tier == 0 }
        #expect(bFull.isEmpty, "B on the full tier behind 400 kbit/s: \(bFull.map(\.text))")
        let bSlow = limited.filter { $0.fps < 20 }
        #expect(bSlow.isEmpty, "B under 20 fps: \(bSlow.map(\.text))")
        // No estimate above twice the link (800 kbit/s) for more than a second: never two readings in a row.
        var over = 0, longestOver = 0
        for r in limited {
            over = (r.estimateKbps ?? 0) > 800 ? over + 1 : 0
            longestOver = max(longestOver, over)
        }
        #expect(
            longestOver <= 1,
            "B's estimate over 800 kbit/s in \(longestOver) readings in a row: \(limited.map { "\(Int($0.t)) s \($0.estimateKbps ?? -1)" })")
        // Every freeze of B's limited minute, its start included (B starts on the full tier until its first estimate;
        // the freezes before it plays its lower tier are also reported on their own).
        let limitedAll = b.filter { $0.t < lift }
        let startFreezes = settled?.freezes ?? 0
        let freezes = limitedAll.last?.freezes ?? 0
        let minutes = max(1.0, lift / 60)
        #expect(!linksStrict || Double(freezes) <= 2 * minutes, "B froze \(freezes) times in its limited minute: \(limitedAll.map(\.text))")
        // Lifted: the full tier within 15 s.
        let back = b.first { $0.t >= lift && $0.width == 1280 && $0.tier == 0 }
        #expect(back != nil && back!.t - lift <= 15, "B back on 1280x720 at \(back.map { String(format: "%.1f", $0.t - lift) } ?? "never") s")
        let aKbps = a.compactMap(\.sendKbps), bKbps = limited.compactMap(\.sendKbps)
        print(
            "tiers\(bucket.isEmpty ? "" : " (" + bucket.joined(separator: " ") + ")"): A \(aKbps.min() ?? 0)...\(aKbps.max() ?? 0) kbit/s at 1280x720, min \(a.map(\.fps).min() ?? 0) fps, freezes \(a.last?.freezes ?? -1); "
                + "A's tier at ≥ \(Int(aShare * 100)) % of \(aReference) kbit/s, sent ≥ \(Int(aSentShare * 100)) % (2 s) after the lift; "
                + "B limited \(bKbps.min() ?? 0)...\(bKbps.max() ?? 0) kbit/s (estimate ≤ \(limited.compactMap(\.estimateKbps).max() ?? 0)) at \(limited.last.map { "\($0.width)x\($0.height)" } ?? "-"), min \(limited.map(\.fps).min() ?? 0) fps, "
                + "\(freezes) freezes in its limited minute (\(startFreezes) of them while finding its tier); back on the full tier \(back.map { String(format: "%.1f", $0.t - lift) } ?? "never") s after the lift"
        )
    }

    /// One viewer whose link steps 5 Mbit/s → 500 kbit/s → 5 Mbit/s: the send rate follows within 5 s each way, and
    /// no freeze lasts longer than 1 s.
    @Test(.enabled(if: linksAvailable)) func theSendRateFollowsALinkThatSteps() throws {
        let rows = try linkRun(["A=0:5000,10:500,25:5000"], seconds: 36, name: "link-step")["A"] ?? []
        #expect(rows.count >= 30, "rows: \(rows.count)")
        let down = rows.first { $0.t > 10 && ($0.sendKbps ?? .max) <= 500 }
        #expect(
            down != nil && down!.t - 10 <= 5, "under 500 kbit/s \(down.map { String(format: "%.1f", $0.t - 10) } ?? "never") s after the step down")
        let held = rows.filter { $0.t >= 16 && $0.t < 25 && ($0.sendKbps ?? 0) > 550 }
        #expect(held.isEmpty, "over the 500 kbit/s link: \(held.map(\.text))")
        let overTwice = zip(rows, rows.dropFirst()).filter {
            $0.0.t >= 12 && $0.1.t < 25 && ($0.0.estimateKbps ?? 0) > 1000 && ($0.1.estimateKbps ?? 0) > 1000
        }
        #expect(overTwice.isEmpty, "the estimate over twice the 500 kbit/s link for more than a second: \(overTwice.map(\.0.text))")
        let up = rows.first { $0.t > 25 && ($0.sendKbps ?? 0) >= 1200 }
        #expect(
            up != nil && up!.t - 25 <= (linksStrict ? 5 : 10),
            "back over 1200 kbit/s \(up.map { String(format: "%.1f", $0.t - 25) } ?? "never") s after the step up")
        let longest = rows.map(\.longestFreeze).max() ?? 0
        #expect(longest <= (linksStrict ? 1.0 : 3.5), "a freeze of up to \(longest) s: \(rows.map(\.text))")
        print(
            "step: down in \(down.map { String(format: "%.1f", $0.t - 10) } ?? "-") s, up in \(up.map { String(format: "%.1f", $0.t - 25) } ?? "-") s, "
                + "freezes \(rows.last?.freezes ?? -1) (longest \(String(format: "%.2f", longest)) s)")
    }
}
