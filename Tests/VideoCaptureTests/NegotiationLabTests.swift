import Foundation
import Testing
@testable import VideoCapture
import FixtureCameras

/// The differential of issue #49: Fixtures/negotiation/requests.txt holds GStreamer and ffmpeg command lines for vivid
/// with the pick `SelectionPolicy.gstreamer`/`.ffmpeg` predict; run in the VM, their outputs are compared here with
/// the policies' picks on Fixtures/cameras/vivid.txt.
struct LabRequest: Sendable, CustomTestStringConvertible {
    let id: String, tool: SelectionPolicy, request: String, expected: String, command: String
    /// The camera the request is for: vivid's webcam (requests.txt) or the v4l2loopback H.264 camera
    /// (requests-loopback.txt).
    var camera = LabCamera.vivid
    var testDescription: String { "\(id) \(tool) \(request)" }

    /// The camera's listing.
    func formats() throws -> [CaptureFormat] {
        switch camera {
        case .vivid: try vividFormats()
        case .loopback: try CameraDescription.load(path: fixturesRoot + "/negotiation/loopback-h264.txt").formats
        }
    }

    /// The device state the VM sets before each command on vivid (`v4l2-ctl -v width=3840,height=2160,pixelformat=GREY
    /// -p 1`); the loopback camera is in its writer's (H.264 640x360 at 30 fps).
    static let resetState = CameraMode(pixelFormat: .grey, size: FrameSize(width: 3840, height: 2160), fps: 1)

    /// The request as the policy takes it.
    func policyRequest() throws -> PolicyRequest {
        switch tool {
        case .gstreamer:
            let caps = try GStreamerCaps(parsing: request)
            return PolicyRequest(
                size: FrameSize(width: caps.width ?? 640, height: caps.height ?? 480), caps: caps,
                deviceState: camera == .vivid ? Self.resetState : CameraMode(pixelFormat: .h264, size: FrameSize(width: 640, height: 360), fps: 30))
        default:
            var size: FrameSize?, fps: Fraction?, formats: [PixelFormat] = []
            for field in request.split(separator: " ") {
                let kv = field.split(separator: "=", maxSplits: 1).map(String.init)
                guard kv.count == 2 else { throw LabError("\(id): \"\(field)\" is not name=value") }
                switch kv[0] {
                case "size": size = FrameSize(parsing: kv[1])
                case "fps": fps = Fraction(rate: kv[1])
                case "input":
                    let pf = FFmpegModel.table.first { $0.1 == kv[1] }?.0 ?? FFmpegModel.otherNames.first { $0.value == kv[1] }?.key
                    guard let pf else { throw LabError("\(id): ffmpeg input format \(kv[1]) unknown to the model") }
                    formats = [pf]
                default: throw LabError("\(id): unknown field \(kv[0])")
                }
            }
            guard let size, let fps else { throw LabError("\(id): size= and fps= are required") }
            return PolicyRequest(size: size, fps: fps, pixelFormats: formats)
        }
    }
}

struct LabError: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}

enum LabCamera: Sendable { case vivid, loopback }

func labRequests() throws -> [LabRequest] {
    try [("requests.txt", LabCamera.vivid), ("requests-loopback.txt", .loopback)].flatMap { file, camera in
        let text = try String(contentsOfFile: fixturesRoot + "/negotiation/" + file, encoding: .utf8)
        return try text.split(separator: "\n").filter { !$0.hasPrefix("#") && !$0.allSatisfy(\.isWhitespace) }.map { line in
            let f = line.split(separator: "|", maxSplits: 4).map { $0.trimmingCharacters(in: .whitespaces) }
            guard f.count == 5, let tool = SelectionPolicy(rawValue: f[1]) else { throw LabError("bad line: \(line)") }
            return LabRequest(id: f[0], tool: tool, request: f[2], expected: f[3], command: f[4], camera: camera)
        }
    }
}

/// The vivid camera the requests are for.
func vividFormats() throws -> [CaptureFormat] { try fixture("vivid").formats }

@Test func theLabHasThirtyRequestsWithTheirCommands() throws {
    let requests = try labRequests()
    #expect(requests.filter { $0.camera == .vivid }.count >= 30 && requests.contains { $0.camera == .loopback })
    #expect(Set(requests.map(\.id)).count == requests.count)
    #expect(Set(requests.map(\.tool)) == [.gstreamer, .ffmpeg])
    for r in requests {
        let req = try r.policyRequest()
        switch r.tool {
        case .gstreamer:
            #expect(r.command == "gst-launch-1.0 -v v4l2src device=$DEV num-buffers=1 ! '\(r.request)' ! fakesink", "\(r.id)")
        default:
            let size = "-video_size \(req.size) -framerate "
            #expect(
                r.command.hasPrefix("ffmpeg -hide_banner -nostdin -f v4l2 \(size)") && r.command.hasSuffix(" -i $DEV -frames:v 1 -f null -"),
                "\(r.id)")
            if let pf = req.pixelFormats.first { #expect(r.command.contains("-input_format \(FFmpegModel.inputFormat(pf) ?? "?") "), "\(r.id)") }
        }
    }
}

/// The EXPECTED column is what the model says: a change to a policy shows here first.
@Test("the lab's expectations are the policies' picks", arguments: try labRequests())
func labExpectation(_ r: LabRequest) throws {
    let pick = r.tool.select(from: try r.formats(), request: try r.policyRequest())
    #expect(short(pick) == r.expected, "\(pick.reason)")
}

/// What a real run negotiated, read from its output; nil when it negotiated nothing.
struct Negotiated: Equatable, CustomStringConvertible {
    var format: String, width: Int, height: Int, fps: Double
    var description: String { "\(format) \(width)x\(height)@\(fps)" }
}

/// GStreamer `-v`: the caps on v4l2src's source pad.
func negotiatedByGStreamer(_ output: String) -> Negotiated? {
    guard let line = output.split(separator: "\n").first(where: { $0.contains("GstV4l2Src:v4l2src0.GstPad:src: caps = ") }),
        let range = line.range(of: "caps = ")
    else { return nil }
    var fields: [String: String] = [:]
    let parts = line[range.upperBound...].split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
    for p in parts.dropFirst() {
        let kv = p.split(separator: "=", maxSplits: 1).map(String.init)
        guard kv.count == 2 else { continue }
        var v = kv[1]
        if v.hasPrefix("("), let close = v.firstIndex(of: ")") { v = String(v[v.index(after: close)...]) }
        fields[kv[0]] = v
    }
    let media = parts.first ?? ""
    guard let w = fields["width"].flatMap({ Int($0) }), let h = fields["height"].flatMap({ Int($0) }),
        let rate = fields["framerate"].flatMap({ Fraction(rate: $0) })
    else { return nil }
    return Negotiated(format: media == "video/x-raw" ? fields["format"] ?? "?" : media, width: w, height: h, fps: rate.doubleValue)
}

/// ffmpeg: the input stream line, `Stream #0:0: Video: rawvideo (I420 / 0x30323449), yuv420p, 640x480, 25 fps, …`.
func negotiatedByFFmpeg(_ output: String) -> Negotiated? {
    guard let line = output.split(separator: "\n").first(where: { $0.contains("Stream #0:0") && $0.contains("Video: ") }),
        let video = line.range(of: "Video: ")
    else { return nil }
    let rest = String(line[video.upperBound...])
    let codec = String(rest.prefix { $0 != " " && $0 != "," })
    var format = codec == "mjpeg" ? "MJPG" : codec == "h264" ? "H264" : "?"
    if codec == "rawvideo" {
        // The pixel format is the field after the codec's parenthesis; yuv420p is YU12 unless the tag says YV12.
        let fields = rest.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        let pixFmt = fields.count > 1 ? String(fields[1].prefix { $0 != "(" }) : ""
        format = FFmpegModel.table.first { $0.1 == pixFmt && !$0.codec }?.0.fourcc ?? pixFmt
        if rest.contains("(YV12 /") { format = "YV12" }
    }
    let tokens = rest.split(whereSeparator: { $0 == " " || $0 == "," })
    guard let size = tokens.lazy.compactMap({ FrameSize(parsing: $0) }).first,
        let fpsIndex = tokens.firstIndex(of: "fps"), fpsIndex > 0, let fps = Double(tokens[fpsIndex - 1])
    else { return nil }
    return Negotiated(format: format, width: size.width, height: size.height, fps: fps)
}

/// The policy's pick in the terms the tool prints (GStreamer's format names, our FourCCs for ffmpeg).
func asNegotiated(_ pick: PolicyPick) -> Negotiated? {
    guard let m = pick.mode else { return nil }
    var format = m.pixelFormat.fourcc
    if pick.policy == .gstreamer, let g = GStreamerModel.table.first(where: { $0.pixelFormat == m.pixelFormat }) {
        format = g.mediaType == "video/x-raw" ? g.name : g.mediaType
    }
    return Negotiated(format: format, width: m.size.width, height: m.size.height, fps: m.fps.doubleValue)
}

@Test func outputsOfTheRealProgramsAreRead() {
    let gst = """
        Setting pipeline to PAUSED ...
        /GstPipeline:pipeline0/GstV4l2Src:v4l2src0.GstPad:src: caps = video/x-raw, format=(string)YUY2, width=(int)1280, height=(int)720, framerate=(fraction)25/2, interlace-mode=(string)progressive, colorimetry=(string)2:4:5:1
        /GstPipeline:pipeline0/GstCapsFilter:capsfilter0.GstPad:src: caps = video/x-raw, format=(string)I420, width=(int)1, height=(int)1, framerate=(fraction)1/1
        """
    #expect(negotiatedByGStreamer(gst) == Negotiated(format: "YUY2", width: 1280, height: 720, fps: 12.5))
    #expect(negotiatedByGStreamer("ERROR: from element /GstPipeline:pipeline0/GstV4l2Src:v4l2src0: Internal data stream error.") == nil)
    let ff = """
        Input #0, video4linux2,v4l2, from '/dev/video0':
          Duration: N/A, start: 95.712352, bitrate: 36864 kb/s
          Stream #0:0: Video: rawvideo (I420 / 0x30323449), yuv420p, 1280x720, 12.50 fps, 12.50 tbr, 1000k tbn
        """
    #expect(negotiatedByFFmpeg(ff) == Negotiated(format: "YU12", width: 1280, height: 720, fps: 12.5))
    #expect(
        negotiatedByFFmpeg("  Stream #0:0: Video: rawvideo (YUY2 / 0x32595559), yuyv422, 640x360, 30 fps, 30 tbr, 1000k tbn")
            == Negotiated(format: "YUYV", width: 640, height: 360, fps: 30))
    #expect(
        negotiatedByFFmpeg("  Stream #0:0: Video: mjpeg (Baseline), yuvj422p(pc, bt470bg/unknown/unknown), 1280x720, 30 fps, 30 tbr, 1000k tbn")
            == Negotiated(format: "MJPG", width: 1280, height: 720, fps: 30))
    #expect(negotiatedByFFmpeg("[video4linux2,v4l2 @ 0x55] Cannot find a proper format for codec 'mjpeg'") == nil)
}

/// With NEGOTIATION_RESULTS=DIR (DIR/ID.txt: each command's output, captured in the VM), every real run must
/// negotiate what the policy picks, and fail where it fails.
@Test(.enabled(if: ProcessInfo.processInfo.environment["NEGOTIATION_RESULTS"] != nil))
func realProgramsAgreeWithThePolicies() throws {
    let dir = ProcessInfo.processInfo.environment["NEGOTIATION_RESULTS"] ?? ""
    var disagreements: [String] = []
    for r in try labRequests() {
        guard let output = try? String(contentsOfFile: dir + "/" + r.id + ".txt", encoding: .utf8) else {
            disagreements.append("\(r.id): no output file")
            continue
        }
        let real = r.tool == .gstreamer ? negotiatedByGStreamer(output) : negotiatedByFFmpeg(output)
        let ours = asNegotiated(r.tool.select(from: try r.formats(), request: try r.policyRequest()))
        let same =
            real.map { a in ours.map { b in a.format == b.format && a.width == b.width && a.height == b.height && abs(a.fps - b.fps) < 0.01 } ?? false
            }
            ?? (ours == nil)
        if !same { disagreements.append("\(r.id) \(r.request): real \(real.map { "\($0)" } ?? "fails"), policy \(ours.map { "\($0)" } ?? "fails")") }
    }
    #expect(disagreements.isEmpty, "\(disagreements.joined(separator: "\n"))")
}
