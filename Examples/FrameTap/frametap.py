#!/usr/bin/python3
"""A reader of camcap's frame tap (`camcap ... --tap NAME`): the converted I420 frames from shared memory, as numpy
arrays, with no compiled extension (the standard library's socket.recv_fds and mmap, and numpy).

    from frametap import FrameTap
    with FrameTap("lab") as tap:                 # $XDG_RUNTIME_DIR/camcap-tap-lab.sock (else /tmp), or a path
        for y, u, v, h in tap.frames():          # y: height x width, u and v: (height+1)//2 x (width+1)//2, uint8
            print(h["sequence"], h["timestamp_ns"], h["missed"], y.mean())

Each frame is copied once out of the ring (copy=True, the default) and checked against its slot's seqlock after the
copy, so a frame the writer overwrote meanwhile is never returned: it counts in `missed` with the frames a slow
reader let the writer overwrite. With copy=False the arrays are views of the ring (no copy at all): check
`tap.still_valid(h)` after using them. The format is Examples/FrameTap/frametap.h; docs/processing.md tells more.
Python has no memory fences: the seqlock's two loads and the copy between them are separate calls into C, which
x86-64 keeps in order; a reader on a weakly ordered CPU (arm64) that must never take a torn frame uses the C header's
acquire loads and fence.

As a program it hashes every frame it gets (SHA-256 of Y, U and V, the bytes a Y4M frame holds):
    python3 frametap.py NAME [--frames N] [--out FILE] [--timeout SECONDS] [--views]
one line per frame, "sequence timestamp_ns width height missed sha256 camera_sequence", and a summary on standard error. It waits up
to --timeout seconds (default 10) for the tap's socket, and ends when the tap stops.
"""

import argparse
import hashlib
import json
import mmap
import os
import socket
import struct
import sys
import time

import numpy as np

MAGIC = 0x50415443
VERSION = 1
FLAG_RETIRED = 1
SLOT_FULL_RANGE = 1
_HEADER = struct.Struct("<IIIIQIIQIIQQ")  # frametap_header up to max_data_size
_SLOT = struct.Struct("<QQqQIIIIIIIIIIQ")  # frametap_slot up to data_size


def socket_path(name):
    """The socket of tap `name`, as camcap finds it."""
    if "/" in name:
        return name
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    directory = runtime if runtime.startswith("/") else "/tmp"
    return os.path.join(directory, "camcap-tap-%s.sock" % name)


class FrameTapError(Exception):
    pass


class FrameTap:
    """One connection to a tap: the ring mapped read-only. Keep it open while reading (the tap counts readers)."""

    def __init__(self, name):
        self.path = socket_path(name)
        self.last_sequence = None
        self.missed_total = 0
        self._connect()

    def _connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.path)
        message, fds, _, _ = socket.recv_fds(self.sock, 4096, 4)
        if not fds:
            raise FrameTapError("%s: the hello came without the ring's descriptor" % self.path)
        for extra in fds[1:]:
            os.close(extra)
        self.hello = json.loads(message.decode())
        fd = fds[0]
        try:
            size = os.fstat(fd).st_size
            if size < 4096 or size > 1 << 36:
                raise FrameTapError("%s: a ring of %d bytes" % (self.path, size))
            self.mm = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ)
        finally:
            os.close(fd)
        (magic, version, self.header_size, self.slots, self.slot_size, _, self.generation, _, _, _, total, _) = \
            _HEADER.unpack_from(self.mm, 0)
        if magic != MAGIC or version != VERSION:
            raise FrameTapError("%s: not a version-1 frame tap (magic %#x, version %d)" % (self.path, magic, version))
        if not (128 <= self.header_size and 1 <= self.slots <= 1024 and self.slot_size > 128
                and self.header_size + self.slots * self.slot_size <= size):
            raise FrameTapError("%s: a ring header that does not fit its %d bytes" % (self.path, size))
        self.size = size

    def _release_map(self):
        try:
            self.mm.close()
        except BufferError:
            pass  # views (copy=False) still use it: it is unmapped when the last one goes

    def close(self):
        self._release_map()
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def latest_sequence(self):
        return struct.unpack_from("<Q", self.mm, 32)[0]

    @property
    def retired(self):
        return struct.unpack_from("<I", self.mm, 40)[0] & FLAG_RETIRED != 0

    def _slot(self, sequence):
        return self.header_size + (sequence % self.slots) * self.slot_size

    def read(self, sequence, copy=True):
        """Frame `sequence`: (y, u, v, header), or None when it is not there whole (overwritten, being written, torn,
        or not written yet)."""
        base = self._slot(sequence)
        (lock, seq, ts, cam, width, height, sy, su, sv, rotation, oy, ou, ov, flags, data_size) = \
            _SLOT.unpack_from(self.mm, base)
        if lock & 1 or seq != sequence:
            return None
        cw, ch = (width + 1) // 2, (height + 1) // 2
        # Every number from the ring is checked before it is used.
        if not (0 < width <= 16384 and 0 < height <= 16384 and oy >= 128 and data_size == width * height + 2 * cw * ch
                and ou == oy + width * height and ov == ou + cw * ch and oy + data_size <= self.slot_size):
            return None
        data = np.frombuffer(self.mm, dtype=np.uint8, count=data_size, offset=base + oy)
        if copy:
            data = data.copy()  # the one copy
        if struct.unpack_from("<Q", self.mm, base)[0] != lock:
            return None  # torn: the writer started on this slot while we copied
        y = data[:width * height].reshape(height, width)
        u = data[width * height:width * height + cw * ch].reshape(ch, cw)
        v = data[width * height + cw * ch:].reshape(ch, cw)
        header = dict(sequence=seq, timestamp_ns=ts, camera_sequence=cam, width=width, height=height,
                      stride_y=sy, stride_u=su, stride_v=sv, rotation=rotation, full_range=bool(flags & SLOT_FULL_RANGE),
                      generation=self.generation, _lock=lock, _slot=base)
        return y, u, v, header

    def still_valid(self, header):
        """For views (copy=False): True while the frame's slot has not been rewritten since it was read."""
        return struct.unpack_from("<Q", self.mm, header["_slot"])[0] == header["_lock"]

    def frames(self, copy=True, poll_interval=0.002, reconnect=True):
        """Yields (y, u, v, header) for every frame from the latest one on; header["missed"] counts the frames before
        it that were lost (overwritten before they were read, or torn). Ends when the tap stops."""
        if self.last_sequence is None:
            latest = self.latest_sequence
            self.last_sequence = latest - 1 if latest > 0 else 0
        missed = 0
        while True:
            latest = self.latest_sequence
            if latest <= self.last_sequence:
                if self.retired:
                    if reconnect and self._reconnect():
                        continue
                    return
                time.sleep(poll_interval)
                continue
            want = self.last_sequence + 1
            self.last_sequence = want
            frame = self.read(want, copy)
            if frame is None:
                missed += 1
                self.missed_total += 1
                continue
            frame[3]["missed"] = missed
            missed = 0
            yield frame

    def _reconnect(self):
        """After the ring retired: the tap's next ring (a larger picture), if the tap still runs."""
        old = self.generation
        try:
            self._release_map()
            self.sock.close()
            self._connect()
        except (OSError, FrameTapError, ValueError):
            return False
        if self.generation <= old:
            return False
        latest = self.latest_sequence  # a new ring numbers on: read it from its oldest frame still there
        self.last_sequence = max(0, latest - self.slots + 1)
        return True


def main():
    parser = argparse.ArgumentParser(description="Hash every frame a camcap frame tap publishes.")
    parser.add_argument("name", help="the tap's NAME (camcap --tap NAME) or its socket path")
    parser.add_argument("--frames", type=int, help="stop after this many frames")
    parser.add_argument("--out", help="write the lines here (default: standard output)")
    parser.add_argument("--timeout", type=float, default=10, help="seconds to wait for the tap's socket")
    parser.add_argument("--views", action="store_true",
                        help="hash views of the ring (no copy at all), checking after each hash that the frame was not overwritten")
    args = parser.parse_args()
    path = socket_path(args.name)
    deadline = time.monotonic() + args.timeout
    # Said once, when the reader is ready (its imports done): whoever starts camcap after this line misses nothing.
    print("frametap: waiting for a tap at %s" % path, file=sys.stderr, flush=True)
    while True:
        try:
            tap = FrameTap(args.name)
            break
        except (FileNotFoundError, ConnectionRefusedError):
            if time.monotonic() > deadline:
                sys.exit("frametap: no tap at %s after %g s" % (path, args.timeout))
            time.sleep(0.01)
    out = open(args.out, "w") if args.out else sys.stdout
    got = torn = pending = 0
    with tap:
        print("frametap: connected to %s: %s" % (path, json.dumps(tap.hello)), file=sys.stderr, flush=True)
        for y, u, v, h in tap.frames(copy=not args.views):
            digest = hashlib.sha256()
            for plane in (y, u, v):
                digest.update(plane.data if plane.flags.c_contiguous else plane.tobytes())
            if args.views and not tap.still_valid(h):
                torn += 1  # overwritten while it was hashed: the hash is not the frame's (a missed frame)
                pending += h["missed"] + 1
                continue
            h["missed"] += pending
            pending = 0
            out.write("%d %d %d %d %d %s %d\n" % (h["sequence"], h["timestamp_ns"], h["width"], h["height"], h["missed"],
                                                  digest.hexdigest(), h["camera_sequence"]))
            out.flush()
            got += 1
            if args.frames is not None and got >= args.frames:
                break
        print("frametap: got %d frames, missed %d, torn while used %d, last sequence %d"
              % (got, tap.missed_total, torn, tap.last_sequence), file=sys.stderr, flush=True)
    if out is not sys.stdout:
        out.close()


if __name__ == "__main__":
    main()
