/// The player: WHEP from the page itself (recvonly video transceiver, POST the offer, DELETE on leaving), and
/// an overlay with getStats figures and the capture → display latency (from the abs-capture-time extension).
/// `window.camcapStats()`, `window.camcapFrames()` and `window.camcapLatency()` return them for tests.
public let playerPage = """
    <!doctype html>
    <html><head><meta charset="utf-8"><title>swift-video-capture</title>
    <style>
    body { margin: 0; background: #111; color: #eee; font: 14px system-ui, sans-serif; overflow: hidden; }
    video { width: 100vw; height: 100vh; object-fit: contain; background: #000; }
    #overlay { position: fixed; top: 8px; left: 8px; background: rgba(0,0,0,.6); padding: 6px 10px; border-radius: 4px; white-space: pre; font-family: monospace; }
    </style></head>
    <body>
    <video id="video" autoplay muted playsinline></video>
    <div id="overlay">connecting…</div>
    <script>
    const overlay = document.getElementById('overlay');
    const video = document.getElementById('video');
    const pc = new RTCPeerConnection();
    let resource = null, last = null;
    // The token comes in the URL's fragment (#token=…), which the browser never sends to a server; it is kept for
    // this tab only, and sent as Authorization: Bearer (RFC 9725).
    const token = new URLSearchParams(location.hash.slice(1)).get('token') || sessionStorage.getItem('camcap-token');
    if (token) sessionStorage.setItem('camcap-token', token);
    const auth = token ? { 'Authorization': 'Bearer ' + token } : {};
    window.camcap = { pc, error: null, state: 'new' };
    const transceiver = pc.addTransceiver('video', { direction: 'recvonly' });
    // Chromium lists the absolute capture time extension only when asked: with it, each frame's capture time
    // (the server's clock) comes with the frame, and requestVideoFrameCallback's captureTime carries it.
    const absCaptureTime = 'http://www.webrtc.org/experiments/rtp-hdrext/abs-capture-time';
    if (transceiver.setHeaderExtensionsToNegotiate) {
      try {
        transceiver.setHeaderExtensionsToNegotiate(transceiver.getHeaderExtensionsToNegotiate().map(
          (x) => x.uri === absCaptureTime ? { uri: x.uri, direction: 'sendrecv' } : x));
      } catch (e) { console.log('abs-capture-time: ' + e); }
    }
    pc.ontrack = (e) => { video.srcObject = e.streams[0] || new MediaStream([e.track]); };
    pc.onconnectionstatechange = () => { window.camcap.state = pc.connectionState; };
    async function start() {
      try {
        await pc.setLocalDescription(await pc.createOffer());
        const r = await fetch('/whep', { method: 'POST', headers: { ...auth, 'Content-Type': 'application/sdp' }, body: pc.localDescription.sdp });
        const text = await r.text();
        if (r.status === 401) throw new Error('this server needs its token: open the page with its token in the URL (…/#token=…)');
        if (r.status !== 201) throw new Error('WHEP ' + r.status + ': ' + text);
        resource = r.headers.get('Location');
        window.camcap.resource = resource;
        await pc.setRemoteDescription({ type: 'answer', sdp: text });
      } catch (e) {
        window.camcap.error = String(e);
        overlay.textContent = String(e);
      }
    }
    window.camcapStop = async () => {
      if (resource) { await fetch(resource, { method: 'DELETE', headers: auth }); resource = null; }
      pc.close();
    };
    window.addEventListener('pagehide', () => { if (resource) fetch(resource, { method: 'DELETE', headers: auth, keepalive: true }); });
    window.camcapStats = async () => {
      const report = await pc.getStats();
      let inbound = null, pair = null, transport = null;
      report.forEach((s) => {
        if (s.type === 'inbound-rtp' && s.kind === 'video') inbound = s;
        if (s.type === 'transport') transport = s;
      });
      if (transport && transport.selectedCandidatePairId) pair = report.get(transport.selectedCandidatePairId);
      const i = inbound || {};
      return {
        state: pc.connectionState, error: window.camcap.error,
        framesDecoded: i.framesDecoded || 0, framesReceived: i.framesReceived || 0, framesDropped: i.framesDropped || 0,
        keyFramesDecoded: i.keyFramesDecoded || 0,
        frameWidth: i.frameWidth || 0, frameHeight: i.frameHeight || 0, framesPerSecond: i.framesPerSecond || 0,
        freezeCount: i.freezeCount || 0, totalFreezesDuration: i.totalFreezesDuration || 0,
        nackCount: i.nackCount || 0, pliCount: i.pliCount || 0, firCount: i.firCount || 0,
        retransmittedPacketsReceived: i.retransmittedPacketsReceived || 0,
        packetsReceived: i.packetsReceived || 0, packetsLost: i.packetsLost || 0, bytesReceived: i.bytesReceived || 0,
        jitterBufferDelay: i.jitterBufferDelay || 0, jitterBufferEmittedCount: i.jitterBufferEmittedCount || 0,
        totalDecodeTime: i.totalDecodeTime || 0, decoderImplementation: i.decoderImplementation || '',
        rtt: pair ? (pair.currentRoundTripTime ?? null) : null,
        videoWidth: video.videoWidth, videoHeight: video.videoHeight,
        srtpCipher: transport ? transport.srtpCipher : null, dtlsState: transport ? transport.dtlsState : null,
        now: Date.now(),
      };
    };
    // Per-frame timing (requestVideoFrameCallback): RTP timestamp, when its last packet arrived, when it is
    // expected on screen and when it was captured, in wall-clock ms (-1 when unknown). camcap's /stats also maps
    // RTP timestamps back to capture times. The capture time comes from the abs-capture-time extension: Chromium
    // gives it as the receiver's synchronization source's captureTimestamp (NTP ms, the sender's clock) for the
    // latest frame handed to the track, so it is noted by RTP timestamp until that frame is shown.
    // (requestVideoFrameCallback's own captureTime needs RTCP both ways for a remote track; used when present.)
    const frameLog = [], recent = [], captureByRTP = new Map();
    const wall = (t) => t === undefined || t === null ? -1 : performance.timeOrigin + t;
    const ntpEpochMs = 2208988800000;
    function noteCaptureTimes() {
      const r = pc.getReceivers()[0];
      if (!r || !r.getSynchronizationSources) return;
      for (const s of r.getSynchronizationSources()) {
        if (s.captureTimestamp === undefined || s.rtpTimestamp === undefined) continue;
        captureByRTP.set(s.rtpTimestamp, s.captureTimestamp - ntpEpochMs);
        if (captureByRTP.size > 64) captureByRTP.delete(captureByRTP.keys().next().value);
      }
    }
    // Between frames too: a frame handed to the track before the previous one was shown would hide its entry.
    setInterval(noteCaptureTimes, 10);
    function onFrame(now, m) {
      noteCaptureTimes();
      const capture = m.captureTime !== undefined ? wall(m.captureTime) : (captureByRTP.get(m.rtpTimestamp) ?? -1);
      const f = [m.rtpTimestamp ?? -1, wall(m.receiveTime), wall(m.expectedDisplayTime), capture];
      if (frameLog.length < 100000) frameLog.push(f);
      recent.push(f);
      if (recent.length > 60) recent.shift();
      video.requestVideoFrameCallback(onFrame);
    }
    // The median of the last frames' capture → expected display and capture → received, ms (null without
    // capture times).
    window.camcapLatency = () => {
      const med = (xs) => { if (!xs.length) return null; xs.sort((a, b) => a - b); return xs[xs.length >> 1]; };
      const withCapture = recent.filter((f) => f[3] > 0);
      return { frames: withCapture.length, displayMs: med(withCapture.map((f) => f[2] - f[3])),
               receiveMs: med(withCapture.filter((f) => f[1] > 0).map((f) => f[1] - f[3])) };
    };
    if ('requestVideoFrameCallback' in HTMLVideoElement.prototype) video.requestVideoFrameCallback(onFrame);
    window.camcapFrames = () => frameLog.splice(0);
    setInterval(async () => {
      if (window.camcap.error) return;
      const s = await window.camcapStats();
      if (s.dtlsState === 'closed' || s.state === 'failed') {
        overlay.textContent = s.dtlsState === 'closed' ? 'the server ended the stream' : 'connection failed';
        return;
      }
      let kbps = 0;
      if (last) kbps = (s.bytesReceived - last.bytesReceived) * 8 / (s.now - last.now);
      last = s;
      const lat = window.camcapLatency();
      overlay.textContent = `${s.frameWidth}x${s.frameHeight}  ${s.framesPerSecond} fps  ${kbps.toFixed(0)} kbps` +
        `  rtt ${s.rtt === null ? '-' : (s.rtt * 1000).toFixed(1) + ' ms'}\\n${s.state}  decoded ${s.framesDecoded}` +
        `  freezes ${s.freezeCount}  nack ${s.nackCount}  pli ${s.pliCount}` +
        (lat.displayMs === null ? '' : `\ncapture → display ${lat.displayMs.toFixed(0)} ms  → received ${lat.receiveMs === null ? '-' : lat.receiveMs.toFixed(0)} ms`);
    }, 1000);
    start();
    </script>
    </body></html>
    """

/// The MJPEG page (`GET /mjpeg.html`, public: it holds no secret): an `<img>` of `/stream.mjpeg`, with the token, the
/// rate and the size from the URL's fragment (`#token=…&fps=10&width=640&height=360`), which a browser never sends.
/// `window.camcapMJPEG()` samples the picture into a canvas and returns `{width, height, samples, changes}` (the
/// samples whose pixels differed from the one before), for tests.
public let mjpegPage = """
    <!doctype html>
    <html><head><meta charset="utf-8"><title>swift-video-capture MJPEG</title>
    <style>
    body { margin: 0; background: #111; color: #eee; font: 14px system-ui, sans-serif; }
    img { width: 100vw; height: 100vh; object-fit: contain; }
    </style></head>
    <body>
    <img id="mjpeg" alt="MJPEG">
    <script>
    const params = new URLSearchParams(location.hash.slice(1));
    const token = params.get('token') || sessionStorage.getItem('camcap-token');
    if (token) sessionStorage.setItem('camcap-token', token);
    const query = new URLSearchParams();
    for (const k of ['fps', 'width', 'height']) if (params.get(k)) query.set(k, params.get(k));
    if (token) query.set('token', token);
    const img = document.getElementById('mjpeg');
    img.src = '/stream.mjpeg?' + query.toString();
    const canvas = document.createElement('canvas');
    let samples = 0, changes = 0, previous = null;
    function sample() {
      if (!img.naturalWidth) return;
      canvas.width = 64; canvas.height = 36;
      const g = canvas.getContext('2d', { willReadFrequently: true });
      g.drawImage(img, 0, 0, 64, 36);
      const d = g.getImageData(0, 0, 64, 36).data;
      let h = 0;
      for (let i = 0; i < d.length; i++) h = (h * 31 + d[i]) >>> 0;
      samples++;
      if (previous !== null && h !== previous) changes++;
      previous = h;
    }
    setInterval(sample, 50);
    window.camcapMJPEG = () => ({ width: img.naturalWidth, height: img.naturalHeight, samples, changes });
    </script>
    </body></html>
    """
