#!/usr/bin/env python3
"""A hostile WHIP server for PublishSecurityTests: two HTTP servers on two loopback addresses (A, the endpoint's
origin, and B, another origin that must never be contacted) and a UDP socket that answers ICE checks properly
and every DTLS record with garbage (an "accept, then fail DTLS" server). It prints one JSON line with the URLs, then one JSON line per connection and request it sees
({"t": seconds since start, "server": "A"|"B", "event": "connect"|"request", "method", "path", "auth"}).

Paths on A (POST):
  /huge        201 + Location, then 1 GiB of zeroes without Content-Length (read until the client closes)
  /huge-cl     the same with Content-Length: 1073741824
  /r302 /r307 /r308   that redirect to B (the token must not follow)
  /same307     307 to /answer on A (followed)
  /same302     302 to /answer on A (refused: it would turn the POST into a GET)
  /loop        307 to itself, forever (followed 3 times)
  /answer      201, an acceptable SDP answer whose only candidate is the garbage UDP socket, Location /resource/N
  /foreign     the same with a Location on B
  /longlocation  the same with a 15,000-byte Location (/resource/long-xxxx…)
  /unusable    201 + Location /resource/unusable and an HTML body
  /silent      reads the request and never answers
  /weird       /answer whose candidates are first (highest priority) WEIRD_CANDIDATES, addresses that are not unicast
               hosts (multicast, broadcast, unspecified, reserved) on port WEIRD_PORT; the garbage UDP socket last
  /flood103    103 Early Hints responses, one after another, until the client closes (never the answer); logs
               {"event": "flood-sent", "responses", "bytes"} at the end
DELETE /resource/... answers 200. B answers 404 to everything.
"""
import hashlib
import hmac
import json
import os
import re
import socket
import struct
import sys
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

START = time.monotonic()
LOCK = threading.Lock()
COUNTER = [0]


def log(**kw):
    kw["t"] = round(time.monotonic() - START, 3)
    with LOCK:
        sys.stdout.write(json.dumps(kw) + "\n")
        sys.stdout.flush()


ICE_PWD = "p" * 24  # the answer's a=ice-pwd: the key of our STUN answers' MESSAGE-INTEGRITY


def stun_success(request, peer):
    """A valid Binding success response (RFC 5389) to a Binding request: XOR-MAPPED-ADDRESS, MESSAGE-INTEGRITY keyed
    with our ice-pwd, FINGERPRINT. ICE then succeeds, and what fails is DTLS."""
    txid = request[8:20]
    ip = socket.inet_aton(peer[0])
    cookie = 0x2112A442
    xport = peer[1] ^ (cookie >> 16)
    xip = bytes(a ^ b for a, b in zip(ip, struct.pack(">I", cookie)))
    attrs = struct.pack(">HHBBH", 0x0020, 8, 0, 1, xport) + xip

    def header(length):
        return struct.pack(">HHI", 0x0101, length, cookie) + txid

    mi = hmac.new(ICE_PWD.encode(), header(len(attrs) + 24) + attrs, hashlib.sha1).digest()
    attrs += struct.pack(">HH", 0x0008, 20) + mi
    crc = (zlib.crc32(header(len(attrs) + 8) + attrs) ^ 0x5354554E) & 0xFFFFFFFF
    attrs += struct.pack(">HHI", 0x8028, 4, crc)
    return header(len(attrs)) + attrs


def garbage_udp(sock):
    """ICE answered properly (so the publisher's checks succeed and it starts DTLS), then garbage for every DTLS
    record: a handshake record of random bytes and random datagrams."""
    dtls_seen = set()
    while True:
        try:
            data, peer = sock.recvfrom(2048)
        except OSError:
            return
        if len(data) >= 20 and data[0:2] == b"\x00\x01" and data[4:8] == b"\x21\x12\xa4\x42":
            sock.sendto(stun_success(data, peer), peer)
            continue
        if 20 <= data[0] <= 63 and peer not in dtls_seen:
            dtls_seen.add(peer)
            log(event="dtls", peer="%s:%d" % peer)  # ICE passed: the publisher began DTLS
        sock.sendto(os.urandom(48), peer)
        sock.sendto(bytes([0x16, 0xFE, 0xFD]) + os.urandom(61), peer)


WEIRD_PORT = 40404
WEIRD_CANDIDATES = ["224.0.0.1", "255.255.255.255", "0.0.0.0", "240.0.0.1", "239.255.255.250", "ff02::1", "::", "::ffff:224.0.0.1"]


def answer_sdp(offer, udp_port, weird=False):
    pt = None
    fmtp = ""
    for line in offer.splitlines():
        m = re.match(r"a=rtpmap:(\d+) H264/90000", line)
        if m and pt is None:
            pt = m.group(1)
    for line in offer.splitlines():
        if pt and line.startswith("a=fmtp:%s " % pt):
            fmtp = line
    mid = "0"
    for line in offer.splitlines():
        if line.startswith("a=mid:"):
            mid = line[6:].strip()
            break
    fp = ":".join(["AB"] * 32)
    lines = [
        "v=0",
        "o=- 1 1 IN IP4 127.0.0.1",
        "s=-",
        "t=0 0",
        "a=group:BUNDLE %s" % mid,
        "m=video 9 UDP/TLS/RTP/SAVPF %s" % pt,
        "c=IN IP4 127.0.0.1",
        "a=mid:%s" % mid,
        "a=recvonly",
        "a=rtcp-mux",
        "a=ice-ufrag:evil",
        "a=ice-pwd:%s" % ICE_PWD,
        "a=fingerprint:sha-256 %s" % fp,
        "a=setup:passive",
        "a=rtpmap:%s H264/90000" % pt,
    ]
    if fmtp:
        lines.append(fmtp)
    if weird:
        for k, address in enumerate(WEIRD_CANDIDATES):
            lines.append("a=candidate:%d 1 udp %d %s %d typ host" % (k + 2, 2130706431 - k, address, WEIRD_PORT))
    lines.append("a=candidate:1 1 udp %d 127.0.0.1 %d typ host" % (1 if weird else 2130706431, udp_port))
    return "\r\n".join(lines) + "\r\n"


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr, handler, name):
        self.name = name
        super().__init__(addr, handler)

    def verify_request(self, request, client_address):
        log(server=self.name, event="connect")
        return True


def make_handler(name, urls, udp_port):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def body(self):
            n = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(n).decode("utf-8", "replace") if n else ""

        def send(self, status, headers=(), body=b""):
            self.send_response(status)
            for k, v in headers:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)
            self.close_connection = True

        def stream(self, chunk, limit):
            """Writes `chunk` again and again, `limit` bytes at most, until the client closes; returns the bytes sent."""
            sent = 0
            try:
                while sent < limit:
                    self.wfile.write(chunk)
                    sent += len(chunk)
            except OSError:
                pass
            return sent

        def record(self):
            log(server=name, event="request", method=self.command, path=self.path, auth=self.headers.get("Authorization"))

        def do_GET(self):
            self.record()
            self.send(404 if name == "B" else 405)

        def do_DELETE(self):
            self.record()
            self.send(404 if name == "B" else 200)

        def do_POST(self):
            self.record()
            offer = self.body()
            if name == "B":
                return self.send(404)
            path = self.path.split("?")[0]
            with LOCK:
                COUNTER[0] += 1
                n = COUNTER[0]
            if path in ("/huge", "/huge-cl"):
                self.send_response(201)
                self.send_header("Location", "/resource/huge")
                self.send_header("Content-Type", "application/sdp")
                if path == "/huge-cl":
                    self.send_header("Content-Length", str(1 << 30))
                self.send_header("Connection", "close")
                self.end_headers()
                sent = self.stream(b"\0" * 65536, 1 << 30)
                log(server=name, event="huge-sent", bytes=sent)
                self.close_connection = True
            elif path in ("/r302", "/r307", "/r308"):
                self.send(int(path[2:]), [("Location", urls["B"] + "/whip")])
            elif path == "/same307":
                self.send(307, [("Location", "/answer")])
            elif path == "/same302":
                self.send(302, [("Location", "/answer")])
            elif path == "/loop":
                self.send(307, [("Location", "/loop")])
            elif path in ("/answer", "/foreign", "/weird", "/longlocation"):
                location = (urls["B"] if path == "/foreign" else "") + "/resource/%d" % n
                if path == "/longlocation":
                    location = "/resource/long-" + "x" * (15000 - len("/resource/long-"))
                sdp = answer_sdp(offer, udp_port, weird=path == "/weird").encode()
                self.send(201, [("Location", location), ("Content-Type", "application/sdp")], sdp)
            elif path == "/unusable":
                self.send(201, [("Location", "/resource/unusable"), ("Content-Type", "text/html")], b"<html>not an answer</html>")
            elif path == "/silent":
                time.sleep(3600)
            elif path == "/flood103":
                hint = b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload; as=style\r\n\r\n"
                sent = self.stream(hint * 512, 1 << 34)
                log(server=name, event="flood-sent", responses=sent // len(hint), bytes=sent)
                self.close_connection = True
            else:
                self.send(404)

    return Handler


def main():
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    threading.Thread(target=garbage_udp, args=(udp,), daemon=True).start()
    udp_port = udp.getsockname()[1]
    urls = {}
    servers = []
    for name, host in (("A", "127.0.0.1"), ("B", "127.0.0.2")):
        try:
            s = Server((host, 0), None, name)
        except OSError:
            s = Server(("127.0.0.1", 0), None, name)
        servers.append(s)
        urls[name] = "http://%s:%d" % s.server_address[:2]
    for s in servers:
        s.RequestHandlerClass = make_handler(s.name, urls, udp_port)
        threading.Thread(target=s.serve_forever, daemon=True).start()
    log(event="ready", a=urls["A"], b=urls["B"], udp=udp_port, weird=WEIRD_CANDIDATES, weird_port=WEIRD_PORT)
    try:
        threading.Event().wait()  # until the test ends us (SIGTERM)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
