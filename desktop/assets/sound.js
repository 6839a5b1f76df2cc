// The sandbox's sound, muted until the viewer unmutes: only then does the
// page open the edge's /audio websocket (and the sandbox encode anything)
// and make its AudioContext — in the click, as browsers' autoplay rules
// want. A view-only page may listen too.
//   server → page, binary: [0x01, 0x00, Opus packet] (Selkies' audio
//   framing), 20 ms of 48 kHz stereo each; the page sends nothing.
// Decoded with WebCodecs' AudioDecoder and played through WebAudio, each
// chunk scheduled right after the last, leadS ahead of now (the jitter
// buffer); a schedule that has fallen behind or run too far ahead starts
// again at now + leadS. Where the browser has no AudioDecoder for Opus
// the button says so and stays muted.

export const leadS = 0.06;
const maxAheadS = 0.4;
const rate = 48000, channels = 2;
const ringSize = rate; // one second of the left channel, for stats()

// pitch estimates the frequency of samples a (at rate) from the median
// time between their upward zero crossings (a gap or a glitch in the
// sound moves a few of them, not the median); rms is their level.
export function pitch(a, rate) {
  const periods = [];
  let last = -1, sum = a.length ? a[0] * a[0] : 0;
  for (let i = 1; i < a.length; i++) {
    sum += a[i] * a[i];
    if (a[i - 1] < 0 && a[i] >= 0) { if (last >= 0) periods.push(i - last); last = i; }
  }
  periods.sort((x, y) => x - y);
  const median = periods.length ? periods[periods.length >> 1] : 0;
  return { frequency: median ? rate / median : 0, rms: a.length ? Math.sqrt(sum / a.length) : 0 };
}

export function sound({ button, note, onEdgeError }) {
  let on = false, ws = null, ac = null, dec = null, next = 0, retries = 0, timer = 0;
  const st = { packets: 0, bytes: 0, chunks: 0, frames: 0, errors: 0, onsets: [] };
  const ring = new Float32Array(ringSize);
  let ringAt = 0, ringFilled = 0, loud = false;

  function show(text, title) {
    button.textContent = on ? '🔊' : '🔇';
    button.setAttribute('aria-pressed', String(on));
    button.title = title || (on ? 'Sound on: click to mute' : 'Sound off: click to listen');
    note(text || '');
  }

  function output(ad) {
    try {
      const n = ad.numberOfFrames, ch = Math.min(ad.numberOfChannels, channels);
      const buf = ac.createBuffer(ch, n, ad.sampleRate);
      for (let c = 0; c < ch; c++) {
        const data = new Float32Array(n);
        ad.copyTo(data, { planeIndex: c, format: 'f32-planar' });
        buf.copyToChannel(data, c);
        if (c === 0) measure(data);
      }
      st.chunks++; st.frames += n;
      const now = ac.currentTime;
      if (next < now + 0.005 || next > now + maxAheadS) next = now + leadS;
      const src = ac.createBufferSource();
      src.buffer = buf;
      src.connect(ac.destination);
      src.start(next);
      next += n / ad.sampleRate;
    } finally { ad.close(); }
  }

  // measure keeps the last second of the left channel and notes when
  // sound starts after silence (the page's clock, for the latency bench).
  function measure(data) {
    let sum = 0;
    for (let i = 0; i < data.length; i++) {
      sum += data[i] * data[i];
      ring[ringAt] = data[i]; ringAt = (ringAt + 1) % ringSize;
    }
    ringFilled = Math.min(ringSize, ringFilled + data.length);
    const rms = Math.sqrt(sum / data.length);
    if (!loud && rms > 0.05) { loud = true; st.onsets.push(performance.timeOrigin + performance.now()); if (st.onsets.length > 100) st.onsets.shift(); }
    if (loud && rms < 0.01) loud = false;
  }

  // The last half second of the left channel: its pitch and level.
  function recent() {
    const n = Math.min(ringFilled, rate / 2), a = new Float32Array(n);
    for (let i = 0; i < n; i++) a[i] = ring[(ringAt - n + i + ringSize) % ringSize];
    return pitch(a, rate);
  }

  function connect() {
    ws = new WebSocket('wss://' + location.host + '/audio');
    ws.binaryType = 'arraybuffer';
    const mine = ws;
    ws.onopen = () => { if (ws === mine) show('sound on'); };
    ws.onmessage = (e) => {
      if (!(e.data instanceof ArrayBuffer) || e.data.byteLength < 3) return;
      const b = new Uint8Array(e.data);
      if (b[0] !== 0x01) return;
      st.packets++; st.bytes += b.length; retries = 0;
      if (!dec || dec.state !== 'configured') return;
      try {
        dec.decode(new EncodedAudioChunk({ type: 'key', timestamp: st.packets * 20000, data: b.subarray(2) }));
      } catch (err) { st.errors++; }
    };
    ws.onclose = (e) => {
      if (ws !== mine) return;
      ws = null;
      if (onEdgeError(e.reason)) { stop(); return; }
      if (e.reason === 'no_sound') { stop('no sound in this sandbox'); return; }
      if (on && retries++ < 5) { show('sound: reconnecting…'); timer = setTimeout(connect, 1000 * retries); return; }
      stop('sound ended');
    };
  }

  async function start() {
    if (typeof AudioDecoder === 'undefined' || typeof AudioContext === 'undefined') {
      show('sound: not supported by this browser', 'This browser cannot decode the sound (no WebCodecs AudioDecoder)');
      return;
    }
    const config = { codec: 'opus', sampleRate: rate, numberOfChannels: channels };
    // The context first, in the click: a later one would start suspended.
    if (!ac) {
      try { ac = new AudioContext({ latencyHint: 'interactive', sampleRate: rate }); } catch (e) { ac = new AudioContext({ latencyHint: 'interactive' }); }
    }
    ac.resume();
    on = true; retries = 0; next = 0;
    show('sound: connecting…');
    let supported = false;
    try { supported = (await AudioDecoder.isConfigSupported(config)).supported; } catch (e) { /* no */ }
    if (!on) return;
    if (!supported) { on = false; show('sound: this browser has no Opus decoder'); return; }
    dec = new AudioDecoder({ output: (ad) => { if (on) output(ad); else ad.close(); }, error: () => { st.errors++; } });
    dec.configure(config);
    connect();
  }

  function stop(why) {
    on = false;
    clearTimeout(timer);
    if (ws) { const w = ws; ws = null; w.close(); }
    if (dec && dec.state !== 'closed') dec.close();
    dec = null;
    if (ac) ac.suspend();
    show(why);
  }

  button.addEventListener('click', () => { if (on) stop(); else start(); });
  show();
  return {
    // stats: what the page has received and decoded, for tests and
    // benchmarks: counts, the last half second's frequency (Hz) and
    // level, and when sound started after silence (epoch ms).
    stats: () => ({ on, ...st, onsets: st.onsets.slice(), ...recent(),
      lead: leadS, outputLatency: ac ? (ac.outputLatency || 0) + (ac.baseLatency || 0) : 0 }),
    stop: () => stop(),
  };
}
