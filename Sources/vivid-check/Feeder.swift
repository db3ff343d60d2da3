// `vivid-check feed NODE FILE OFFSETS FPS WIDTHxHEIGHT`: the writer side of an H.264 camera made with v4l2loopback.
// Sets the node's output format to H264 at the size (VIDIOC_S_FMT on V4L2_BUF_TYPE_VIDEO_OUTPUT) and its rate
// (VIDIOC_S_PARM), then writes the file's access units, one per write() (OFFSETS: "offset length" per line, made on
// the host), at FPS on an absolute schedule, looping, until killed. v4l2loopback hands each write to its readers
// as one buffer (bytesused = the write's length); it flags no key frames. Units are zero-padded (see below).
import CV4L2
import Foundation

func feedLoopback(_ args: [String]) -> Never {
    guard args.count == 5, let fps = Int(args[3]), fps > 0,
        let size = Optional(args[4].split(separator: "x").compactMap { UInt32($0) }), size.count == 2
    else {
        fputs("usage: vivid-check feed NODE FILE OFFSETS FPS WIDTHxHEIGHT\n", stderr)
        exit(2)
    }
    guard let data = FileManager.default.contents(atPath: args[1]),
        let index = try? String(contentsOfFile: args[2], encoding: .utf8)
    else {
        fputs("feed: cannot read \(args[1]) or \(args[2])\n", stderr)
        exit(1)
    }
    let units: [(Int, Int)] = index.split(separator: "\n").compactMap { line in
        let f = line.split(separator: " ").compactMap { Int($0) }
        return f.count == 2 && f[0] >= 0 && f[1] > 0 && f[0] + f[1] <= data.count ? (f[0], f[1]) : nil
    }
    guard !units.isEmpty else {
        fputs("feed: no access units in \(args[2])\n", stderr)
        exit(1)
    }
    let fd = open(args[0], O_RDWR)
    guard fd >= 0 else {
        fputs("feed: open \(args[0]): \(String(cString: strerror(errno)))\n", stderr)
        exit(1)
    }
    var fmt = v4l2_format()
    fmt.type = CV4L2_BUF_TYPE_VIDEO_OUTPUT
    fmt.fmt.pix.width = size[0]
    fmt.fmt.pix.height = size[1]
    fmt.fmt.pix.pixelformat = 0x3436_3248 // "H264"
    fmt.fmt.pix.field = CV4L2_FIELD_ANY
    guard ioctl(fd, CV4L2_VIDIOC_S_FMT, &fmt) == 0 else {
        fputs("feed: VIDIOC_S_FMT H264 \(args[4]) on the output: \(String(cString: strerror(errno)))\n", stderr)
        exit(1)
    }
    var parm = v4l2_streamparm()
    parm.type = CV4L2_BUF_TYPE_VIDEO_OUTPUT
    parm.parm.output.timeperframe = v4l2_fract(numerator: 1, denominator: UInt32(fps))
    _ = ioctl(fd, CV4L2_VIDIOC_S_PARM, &parm)
    // v4l2loopback resets every buffer's bytesused to the whole sizeimage when a reader calls VIDIOC_REQBUFS, and the
    // reader's first buffer can be one written before: its bytes past the access unit would be stale ones of earlier,
    // longer units. So every buffer is zeroed first, and each unit is written zero-padded to one fixed length (the
    // longest unit, rounded up to 4 KiB): past any unit there are only zeros, which the passthrough strips.
    let bufferBytes = Int(fmt.fmt.pix.sizeimage)
    let padded = (units.map(\.1).max()! + 4095) / 4096 * 4096
    guard padded <= bufferBytes else {
        fputs("feed: an access unit of \(padded) bytes does not fit the \(bufferBytes)-byte buffer\n", stderr)
        exit(1)
    }
    let zeros = [UInt8](repeating: 0, count: bufferBytes)
    for _ in 0..<32 { _ = write(fd, zeros, zeros.count) } // v4l2loopback has at most 32 buffers
    var scratch = [UInt8](repeating: 0, count: padded)
    print("FEED \(args[0]) H264 \(args[4]) @ \(fps): \(units.count) access units, \(data.count) bytes, each written as \(padded) bytes")
    fflush(stdout)
    let period = 1_000_000_000 / fps
    var next = timespec()
    clock_gettime(CLOCK_MONOTONIC, &next)
    var i = 0
    data.withUnsafeBytes { bytes in
        while true {
            let (offset, length) = units[i % units.count]
            let n = scratch.withUnsafeMutableBytes { out in
                out.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + length)]))
                out.baseAddress!.advanced(by: length).initializeMemory(as: UInt8.self, repeating: 0, count: padded - length)
                return write(fd, out.baseAddress!, padded)
            }
            if n != padded {
                fputs("feed: write of access unit \(i % units.count) (\(padded) bytes) returned \(n): \(String(cString: strerror(errno)))\n", stderr)
                exit(1)
            }
            i += 1
            next.tv_nsec += period
            if next.tv_nsec >= 1_000_000_000 {
                next.tv_nsec -= 1_000_000_000
                next.tv_sec += 1
            }
            while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, nil) == EINTR {}
        }
    }
    exit(0)
}
