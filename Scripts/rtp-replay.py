#!/usr/bin/env python3
"""Replays RTP packets captured in the vivid VM to ffmpeg, which opens them from the sender's own SDP.

    rtp-replay.py SDP PACKETS OUT.h264

SDP is what `camcap stream --sdp` wrote or what `camcap rtsp` answered to DESCRIBE; PACKETS is the VM's capture
(each packet a 16-bit big-endian length and its bytes, nothing parsed). The SDP's address and port are pointed at a
free local UDP port; ffmpeg (-c copy) writes what it depacketized as Annex-B to OUT.h264. Prints "N packets replayed".
"""
import os, re, signal, socket, subprocess, sys, tempfile, time


def free_even_port():
    for _ in range(50):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        if port % 2 == 0 and port < 65000:
            return port
    raise SystemExit("no free port")


def bound(port):
    """Is a UDP socket bound to `port` (ffmpeg listening)? From /proc/net/udp, no sleep guessing."""
    for path in ("/proc/net/udp", "/proc/net/udp6"):
        try:
            for line in open(path).read().splitlines()[1:]:
                local = line.split()[1]
                if int(local.split(":")[1], 16) == port:
                    return True
        except OSError:
            pass
    return False


def main():
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    sdp_path, packets_path, out = sys.argv[1:]
    sdp = open(sdp_path, encoding="utf-8", errors="replace").read().replace("\r\n", "\n")
    port = free_even_port()
    sdp = re.sub(r"^c=IN IP[46] \S+", "c=IN IP4 127.0.0.1", sdp, flags=re.M)
    if not re.search(r"^c=", sdp, flags=re.M):
        sdp = re.sub(r"^(m=video .*)$", r"\1\nc=IN IP4 127.0.0.1", sdp, count=1, flags=re.M)
    sdp = re.sub(r"^m=video \d+", f"m=video {port}", sdp, flags=re.M)
    sdp = "\n".join(l for l in sdp.split("\n") if not l.startswith(("a=control", "a=rtcp:", "a=range"))) + "\n"
    data = open(packets_path, "rb").read()
    packets, i = [], 0
    while i + 2 <= len(data):
        n = data[i] << 8 | data[i + 1]
        packets.append(data[i + 2:i + 2 + n])
        i += 2 + n
    with tempfile.NamedTemporaryFile("w", suffix=".sdp", delete=False) as f:
        f.write(sdp)
    ff = subprocess.Popen(["ffmpeg", "-y", "-v", "error", "-protocol_whitelist", "file,udp,rtp", "-i", f.name, "-c", "copy", "-f", "h264", out],
                          stdin=subprocess.DEVNULL)
    deadline = time.time() + 20
    while not bound(port) and time.time() < deadline and ff.poll() is None:
        time.sleep(0.01)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
    for p in packets:
        s.sendto(p, ("127.0.0.1", port))
        time.sleep(0.0005)  # the receiver's socket buffer is small: no burst of hundreds of packets
    time.sleep(0.5)
    ff.send_signal(signal.SIGINT)
    try:
        ff.wait(20)
    except subprocess.TimeoutExpired:
        ff.kill()
    os.unlink(f.name)
    print(f"{len(packets)} packets replayed")


main()
