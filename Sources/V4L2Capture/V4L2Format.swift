import CV4L2
import VideoCapture

/// One plane of a stream's format: its stride and the bytes its format needs (1 for a compressed payload).
struct PlaneFormat: Equatable {
    let stride: Int
    let needed: Int
}

/// The format a stream runs with, as the driver applied it: what frames carry, the bytes of all planes together
/// (the size of a private copy) and each memory plane's stride and needed bytes. A single-planar format is a
/// one-plane group, so the buffers and the stream never ask which API described it.
struct V4L2StreamFormat {
    let applied: AppliedFormat
    let sizeImage: Int
    let planes: [PlaneFormat]

    /// The largest plane count a driver may report (`VIDEO_MAX_PLANES`).
    static let maxPlanes = Int(CV4L2_VIDEO_MAX_PLANES)

    /// S_FMT then G_FMT (`fmt.pix` on a single-planar device, `fmt.pix_mp` on a multi-planar one), then S_PARM and
    /// G_PARM: what the driver really applied. A reply that cannot describe the format (another pixel format than
    /// asked, no planes, more than `VIDEO_MAX_PLANES`, another plane count than the format has, a plane's stride or
    /// size too small for its lines) is an error naming the device and the value.
    static func apply(_ node: V4L2Node, _ request: StreamRequest, type: UInt32) throws(CaptureError) -> V4L2StreamFormat {
        let io = node.io, fd = node.fd, path = node.path
        let multiPlanar = type == CV4L2_BUF_TYPE_VIDEO_CAPTURE_MPLANE || type == CV4L2_BUF_TYPE_VIDEO_OUTPUT_MPLANE
        guard let w = UInt32(exactly: request.size.width), let h = UInt32(exactly: request.size.height) else {
            throw CaptureError(.invalidArgument, "size \(request.size) is out of range for V4L2", device: path)
        }
        var fmt = v4l2_format()
        fmt.type = type
        if multiPlanar {
            fmt.fmt.pix_mp.width = w
            fmt.fmt.pix_mp.height = h
            fmt.fmt.pix_mp.pixelformat = request.pixelFormat.rawValue
            fmt.fmt.pix_mp.field = CV4L2_FIELD_ANY
            fmt.fmt.pix_mp.num_planes = UInt8(request.pixelFormat.memoryPlaneCount)
        } else {
            fmt.fmt.pix.width = w
            fmt.fmt.pix.height = h
            fmt.fmt.pix.pixelformat = request.pixelFormat.rawValue
            fmt.fmt.pix.field = CV4L2_FIELD_ANY
        }
        let api = multiPlanar ? " (multi-planar)" : ""
        try io.ioctl(fd, .setFormat, &fmt, "\(request.pixelFormat) \(request.size)\(api)")
        var got = v4l2_format()
        got.type = type
        try io.ioctl(fd, .getFormat, &got, multiPlanar ? "(multi-planar)" : "")
        let reply = Reply(got, multiPlanar: multiPlanar)
        let pf = PixelFormat(rawValue: reply.pixelFormat)
        guard pf == request.pixelFormat else {
            throw CaptureError(.unsupportedFormat, "\(path) applied \(pf) instead of the requested \(request.pixelFormat)", device: path)
        }
        let size = FrameSize(width: Int(reply.width), height: Int(reply.height))
        let n = reply.planes.count
        guard (1...maxPlanes).contains(n) else {
            throw CaptureError(
                .streamFailed, "\(path) reported num_planes \(n) for \(pf) \(size) in VIDIOC_G_FMT (1...\(maxPlanes) expected)", device: path)
        }
        guard n == pf.memoryPlaneCount else {
            throw CaptureError(
                .streamFailed, "\(path) reported num_planes \(n) for \(pf) \(size), a format of \(pf.memoryPlaneCount) plane(s)", device: path)
        }
        var planes: [PlaneFormat] = []
        var total = 0
        for (p, plane) in reply.planes.enumerated() {
            let stride = Int(plane.bytesperline), sizeImage = Int(plane.sizeimage)
            let need = try needed(pf, plane: p, of: n, size: size, stride: stride, path: path)
            guard sizeImage >= need else {
                throw CaptureError(
                    .streamFailed,
                    "\(path) reported sizeimage \(sizeImage) for plane \(p) of \(pf) \(size), smaller than the \(need) bytes of its \(stride)-byte lines",
                    device: path)
            }
            planes.append(PlaneFormat(stride: pf.isCompressed ? 0 : stride, needed: need))
            total += sizeImage
        }
        let color = VideoColorSpace(
            v4l2Colorspace: reply.colorspace, transfer: reply.transfer, encoding: reply.encoding, quantization: reply.quantization,
            pixelFormat: pf)
        let applied = AppliedFormat(
            pixelFormat: pf, size: size, stride: planes[0].stride, fps: applyRate(node, request, type: type), colorSpace: color)
        return V4L2StreamFormat(applied: applied, sizeImage: total, planes: planes)
    }

    /// The bytes plane `p` of `pf` needs with this stride: 1 for a compressed payload or a layout we do not know
    /// (whatever the driver sends is passed on); the whole frame for a one-plane format; else the plane's lines. A
    /// stride below what the plane's lines need is an error naming it.
    private static func needed(_ pf: PixelFormat, plane p: Int, of n: Int, size: FrameSize, stride: Int, path: String) throws(CaptureError) -> Int {
        guard !pf.isCompressed, let geometry = pf.memoryPlane(p, width: size.width, height: size.height) else { return 1 }
        guard stride >= geometry.minimumStride else {
            throw CaptureError(
                .streamFailed,
                "\(path) reported bytesperline \(stride) for plane \(p) of \(pf) \(size), below the \(geometry.minimumStride) its lines need",
                device: path)
        }
        return n == 1 ? (pf.frameSize(width: size.width, height: size.height, stride: stride) ?? 1) : stride * geometry.rows
    }

    /// Frame rate: S_PARM then G_PARM (the driver may round). V4L2 speaks in time per frame, the inverse of
    /// fps: 30 fps is timeperframe 1/30, so numerator and denominator swap in both directions. A driver that
    /// refuses either keeps the rate asked.
    private static func applyRate(_ node: V4L2Node, _ request: StreamRequest, type: UInt32) -> Fraction {
        let io = node.io, fd = node.fd
        var parm = v4l2_streamparm()
        parm.type = type
        parm.parm.capture.timeperframe.numerator = UInt32(clamping: request.fps.denominator)
        parm.parm.capture.timeperframe.denominator = UInt32(clamping: request.fps.numerator)
        guard io.errnoOf(fd, .setParm, &parm) == nil else { return request.fps }
        var g = v4l2_streamparm()
        g.type = type
        guard io.errnoOf(fd, .getParm, &g) == nil else { return request.fps }
        let tpf = g.parm.capture.timeperframe
        return tpf.numerator > 0 && tpf.denominator > 0 ? Fraction(Int64(tpf.denominator), Int64(tpf.numerator)) : request.fps
    }

    /// A G_FMT reply read the same way from either API: the single-planar `fmt.pix` is one plane.
    private struct Reply {
        var width: UInt32, height: UInt32, pixelFormat: UInt32
        var planes: [v4l2_plane_pix_format] = []
        var colorspace: UInt32, transfer: UInt32, encoding: UInt32, quantization: UInt32

        init(_ f: v4l2_format, multiPlanar: Bool) {
            if multiPlanar {
                let mp = f.fmt.pix_mp
                (width, height, pixelFormat) = (mp.width, mp.height, mp.pixelformat)
                (colorspace, transfer, encoding, quantization) = (mp.colorspace, UInt32(mp.xfer_func), UInt32(mp.ycbcr_enc), UInt32(mp.quantization))
                // num_planes is a byte: more than VIDEO_MAX_PLANES is reported as such, not read past the array.
                let count = Int(mp.num_planes)
                if count > maxPlanes {
                    planes = Array(repeating: v4l2_plane_pix_format(), count: count)
                } else {
                    planes = withUnsafeBytes(of: mp.plane_fmt) { raw in
                        (0..<count).map {
                            raw.loadUnaligned(fromByteOffset: $0 * MemoryLayout<v4l2_plane_pix_format>.stride, as: v4l2_plane_pix_format.self)
                        }
                    }
                }
            } else {
                let pix = f.fmt.pix
                (width, height, pixelFormat) = (pix.width, pix.height, pix.pixelformat)
                (colorspace, transfer, encoding, quantization) = (pix.colorspace, pix.xfer_func, pix.ycbcr_enc, pix.quantization)
                var plane = v4l2_plane_pix_format()
                plane.bytesperline = pix.bytesperline
                plane.sizeimage = pix.sizeimage
                planes = [plane]
            }
        }
    }
}
