import Foundation
import Testing
import VideoCapture
import VideoProcessing
@testable import H264
import Recording

func encodeFile(
    _ path: String, settings: H264Encoder.Settings, source: PatternSource, frames: Int, fps: Int = 30,
    y4m: String? = nil, keyFrameAt: Set<Int> = [], ratesAt: [Int: (Int, Double)] = [:]
) throws -> (encoded: [EncodedFrame], bytesPerFrame: [Int]) {
    let enc = try H264Encoder(settings: settings)
    let writer = try AnnexBWriter(path: path)
    let preview = try y4m.map { try Y4MWriter(path: $0, width: settings.width, height: settings.height, fps: Fraction(Int64(fps))) }
    var out: [EncodedFrame] = []
    var sizes: [Int] = []
    for i in 0..<frames {
        if keyFrameAt.contains(i) { enc.requestKeyFrame() }
        if let r = ratesAt[i] { try enc.setRates(bitrate: r.0, fps: r.1) }
        let f = try enc.encode(source[i], timestampNs: Int64(i) * 1_000_000_000 / Int64(fps))
        try writer.write(f)
        try preview?.write(source[i])
        sizes.append(f.size)
        out.append(f)
    }
    try writer.close()
    try preview?.close()
    return (out, sizes)
}

@Test func everyFrameDecodesAndKeyFramesFallOnTheInterval() throws {
    var s = H264Encoder.Settings(width: 640, height: 480)
    s.keyFrameInterval = 30
    let path = scratch + "/gop.h264"
    let (frames, _) = try encodeFile(path, settings: s, source: PatternSource(width: 640, height: 480, count: 8), frames: 90, keyFrameAt: [45])
    #expect(frames.allSatisfy { !$0.isSkipped })
    let p = try probe(path)
    #expect(p.frames == 90 && p.width == 640 && p.height == 480)
    #expect(p.profile == "Constrained Baseline")
    let keys = try keyFrameFlags(path)
    #expect(keys.count == 90)
    let keyIndexes = keys.enumerated().filter(\.element).map(\.offset)
    // Interval 30, plus the one requested at 45 (the encoder restarts its count there).
    #expect(keyIndexes.first == 0)
    #expect(keyIndexes.contains(30))
    #expect(keyIndexes.contains(45), "requested key frame arrives on the next frame: \(keyIndexes)")
    #expect(frames[45].isKeyFrame && frames[45].containsParameterSets)
    #expect(keyIndexes == frames.enumerated().filter { $0.element.isKeyFrame }.map(\.offset))
    // The timestamp is carried through.
    #expect(frames[10].timestampNs == 10 * 1_000_000_000 / 30)
}

@Test func everyIDRInTheFileIsPrecededBySPSAndPPS() throws {
    var s = H264Encoder.Settings(width: 320, height: 240)
    s.keyFrameInterval = 10
    let path = scratch + "/idr.h264"
    _ = try encodeFile(path, settings: s, source: PatternSource(width: 320, height: 240, count: 4), frames: 40)
    let data = [UInt8](FileManager.default.contents(atPath: path)!)
    let units = try AnnexB.split(data)
    var idrCount = 0
    for (i, u) in units.enumerated() where u.type == .idr && (i == 0 || units[i - 1].type != .idr) {
        idrCount += 1
        #expect(i >= 2 && units[i - 2].type == .sps && units[i - 1].type == .pps, "IDR at unit \(i) lacks SPS/PPS before it")
    }
    #expect(idrCount == 4)
    let sps = try SequenceParameterSet(nal: data[units[0].offset..<(units[0].offset + units[0].length)])
    #expect(sps.width == 320 && sps.height == 240 && sps.profileIdc == 66 && sps.profileName == "Constrained Baseline")
}

@Test func writerInsertsParameterSetsWhenAnIDRLacksThem() throws {
    var s = H264Encoder.Settings(width: 320, height: 240)
    s.keyFrameInterval = 5
    let enc = try H264Encoder(settings: s)
    let src = PatternSource(width: 320, height: 240, count: 2)
    let path = scratch + "/stripped.h264"
    let w = try AnnexBWriter(path: path)
    for i in 0..<10 {
        var f = try enc.encode(src[i], timestampNs: Int64(i))
        if i == 5 { f.nalUnits.removeAll { $0.type == .sps || $0.type == .pps } } // an encoder that leaves them out
        try w.write(f)
    }
    try w.close()
    let units = try AnnexB.split([UInt8](FileManager.default.contents(atPath: path)!))
    let idrs = units.indices.filter { units[$0].type == .idr }
    #expect(idrs.count == 2)
    for i in idrs { #expect(units[i - 2].type == .sps && units[i - 1].type == .pps) }
    #expect(try probe(path).frames == 10)
}

@Test func qualityAt720pIsAtLeast35dB() throws {
    var s = H264Encoder.Settings(width: 1280, height: 720)
    s.targetBitrate = 1_500_000
    let path = scratch + "/q.h264", ref = scratch + "/q.y4m"
    _ = try encodeFile(path, settings: s, source: PatternSource(width: 1280, height: 720, count: 60), frames: 60, y4m: ref)
    let (rc, _, err) = try run(
        "ffmpeg",
        [
            "-v", "info", "-f", "h264", "-i", path, "-i", ref, "-lavfi", "[0:v]setpts=N/(30*TB)[a];[1:v]setpts=N/(30*TB)[b];[a][b]psnr", "-f", "null",
            "-",
        ])
    #expect(rc == 0)
    let line = try #require(err.split(separator: "\n").first { $0.contains("PSNR") && $0.contains("average:") })
    let avg = try #require(line.split(separator: " ").first { $0.hasPrefix("average:") }.flatMap { Double($0.dropFirst("average:".count)) })
    #expect(avg >= 35, "PSNR \(avg) dB")
}

@Test func rateControlFollowsTheTargetAndALiveChange() throws {
    // Noisy frames (sensor-like) give the encoder more detail than it can afford: rate control must bind.
    var s = H264Encoder.Settings(width: 640, height: 480)
    s.targetBitrate = 1_000_000
    let src = PatternSource(width: 640, height: 480, count: 24, noise: 6)
    let (_, sizes) = try encodeFile(scratch + "/rc.h264", settings: s, source: src, frames: 450, ratesAt: [300: (500_000, 30)])
    let first10s = Double(sizes[0..<300].reduce(0, +)) * 8 / 10
    let next5s = Double(sizes[300..<450].reduce(0, +)) * 8 / 5
    #expect(abs(first10s - 1_000_000) / 1_000_000 <= 0.15, "first 10 s: \(Int(first10s)) bps")
    #expect(abs(next5s - 500_000) / 500_000 <= 0.15, "after halving: \(Int(next5s)) bps")
}

@Test func frameSkippingIsReportedNotEmpty() throws {
    var s = H264Encoder.Settings(width: 640, height: 480)
    s.targetBitrate = 50_000
    s.maxBitrate = 60_000
    s.frameSkipping = true
    let (frames, _) = try encodeFile(
        scratch + "/skip.h264", settings: s, source: PatternSource(width: 640, height: 480, count: 8, noise: 20), frames: 60)
    let skipped = frames.filter(\.isSkipped)
    #expect(!skipped.isEmpty, "a 50 kbps budget for noisy VGA must skip frames")
    #expect(skipped.allSatisfy { $0.data.isEmpty && $0.nalUnits.isEmpty })
    #expect(frames.filter { !$0.isSkipped }.allSatisfy { !$0.data.isEmpty })
}

@Test func slicesRespectTheMaxNALSize() throws {
    var s = H264Encoder.Settings(width: 640, height: 480)
    s.sliceMode = .maxNALSize(1200)
    let (frames, _) = try encodeFile(
        scratch + "/slices.h264", settings: s, source: PatternSource(width: 640, height: 480, count: 4, noise: 4), frames: 5)
    let slices = frames.flatMap { $0.nalUnits.filter { $0.type == .idr || $0.type == .slice } }
    #expect(slices.count > 5)
    #expect(slices.allSatisfy { $0.length <= 1200 }, "largest \(slices.map(\.length).max() ?? 0)")
    #expect(try probe(scratch + "/slices.h264").frames == 5)
}

@Test func twoThreadsEncode() throws {
    var s = H264Encoder.Settings(width: 640, height: 480)
    s.threads = 2
    _ = try encodeFile(scratch + "/mt.h264", settings: s, source: PatternSource(width: 640, height: 480, count: 4), frames: 20)
    #expect(try probe(scratch + "/mt.h264").frames == 20)
}

@Test func invalidSettingsNameTheValidRange() {
    func error(_ f: (inout H264Encoder.Settings) -> Void) -> String {
        var s = H264Encoder.Settings(width: 640, height: 480)
        f(&s)
        do {
            _ = try H264Encoder(settings: s)
            return "accepted"
        } catch { return error.message }
    }
    #expect(error { $0.width = 641 }.contains("even"))
    #expect(error { $0.width = 8 }.contains("16...4096"))
    #expect(error { $0.targetBitrate = 0 }.contains("10...100000 kbps"))
    #expect(error { $0.targetBitrate = 1_000_000_000 }.contains("10...100000 kbps"))
    #expect(error { $0.maxFrameRate = 0 }.contains("1...240"))
    #expect(error { $0.maxFrameRate = 1000 }.contains("1...240"))
    #expect(error { $0.keyFrameInterval = 0 }.contains("1...100000"))
    #expect(error { $0.threads = 9 }.contains("1...4"))
    #expect(error { $0.sliceMode = .maxNALSize(10) }.contains("420...65535"))
    #expect(error { $0.maxBitrate = 100_000 }.contains("at least the target"))
    let enc = try? H264Encoder(settings: .init(width: 320, height: 240))
    #expect(throws: EncoderError.self) { try enc?.setRates(bitrate: 0, fps: 30) }
    // Another size is followed (a reconfiguration), a size OpenH264 cannot take is an error.
    #expect((try? enc?.encode(I420Buffer(width: 64, height: 64), timestampNs: 0))??.isKeyFrame == true)
    #expect(throws: EncoderError.self) { try enc?.encode(I420Buffer(width: 64, height: 10), timestampNs: 0) }
    enc?.close()
    #expect(throws: EncoderError.self) { try enc?.encode(I420Buffer(width: 320, height: 240), timestampNs: 0) }
}

/// Noise does not compress to the raw picture's size at a fine quantiser, and OpenH264's bitstream buffer is
/// that size: it fails such a frame as a memory error and uninitialises itself. The encoder sets itself up
/// again coarser and encodes the frame as an IDR; a second later the floor is lifted without another IDR.
@Test func noiseThatOverflowsTheBitstreamBufferIsEncodedCoarser() throws {
    var generator = SystemRandomNumberGenerator()
    func noise(_ w: Int, _ h: Int) -> I420Buffer {
        let b = I420Buffer(width: w, height: h)
        let p = b.writablePlanes!
        for i in 0..<(w * h) { p.y[i] = UInt8.random(in: 0...255, using: &generator) }
        for i in 0..<(w * h / 4) {
            p.u[i] = .random(in: 0...255, using: &generator)
            p.v[i] = .random(in: 0...255, using: &generator)
        }
        return b
    }
    for (w, h) in [(64, 64), (320, 240)] {
        var s = H264Encoder.Settings(width: w, height: h)
        s.maxFrameRate = 10
        s.keyFrameInterval = 1000
        let enc = try H264Encoder(settings: s)
        let path = scratch + "/noise-\(w).h264"
        let writer = try AnnexBWriter(path: path)
        let pattern = PatternSource(width: w, height: h, count: 4)
        var keys: [Int] = []
        for i in 0..<40 {
            let f = try enc.encode(i < 3 ? noise(w, h) : pattern[i], timestampNs: Int64(i) * 100_000_000)
            if f.isKeyFrame { keys.append(i) }
            try writer.write(f)
        }
        try writer.close()
        #expect(enc.statistics.recoveries >= 1, "\(w)x\(h): \(enc.statistics)")
        // The noise frames are IDRs after recovery; lifting the floor (frame 13 on) adds none.
        #expect(keys.allSatisfy { $0 < 3 }, "key frames at \(keys)")
        let p = try probe(path)
        #expect(p.frames == 40 && p.width == w && p.height == h, "\(p)")
    }
}
