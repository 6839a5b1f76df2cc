// The fast stream: the sandbox's Selkies (pinned commit 3a0bc7a, see
// desktop/selkies.go) through the edge's /stream websocket. The edge holds
// Selkies' credentials; this page speaks only Selkies' wire protocol:
//   server → page, binary: 0x03 JPEG stripe [type, 0, frame id u16, y u16, JPEG]
//                          0x04 H.264 [type, 1 = key, frame id u16, y u16, w u16, h u16, Annex B]
//                          (0x01 audio and 0x05 gzip'd text are not asked for)
//   server → page, text:   AUTH_SUCCESS,{role}, MODE websockets, KILL reason, clipboard,BASE64, JSON
//                          ({"type":"stream_resolution","width","height"}, stats, …)
//   page → server, text:   SETTINGS,{…} first; kd,KEYSYM / ku,KEYSYM; m,X,Y,MASK,SCROLL;
//                          cw,BASE64 (clipboard); CLIENT_FRAME_ACK ID; REQUEST_KEYFRAME
// H.264 is decoded with WebCodecs' VideoDecoder, one per stripe; where the
// browser has no H.264 decoder the page asks for JPEG. The caller gets
// onFrame once a picture is drawn, onStatus every second, and onFallback
// (with the reason, for the status line) when the stream is not offered,
// ends, or draws nothing within firstFrameMs of Selkies' first word (the
// edge may first have to start the desktop and Selkies: up to answerMs).
import { getKeysym } from './novnc/core/input/util.js';

export const firstFrameMs = 5000;
export const answerMs = 60000;

// h264Supported says whether WebCodecs can decode H.264 here.
export async function h264Supported() {
  if (typeof VideoDecoder === 'undefined') return false;
  try {
    const r = await VideoDecoder.isConfigSupported({ codec: 'avc1.42E01F', codedWidth: 1920, codedHeight: 1080 });
    return !!r.supported;
  } catch (e) { return false; }
}

// codecOf reads an H.264 keyframe's SPS (NAL type 7) for its avc1 codec
// string: profile, constraints and level.
function codecOf(au) {
  const b = new Uint8Array(au);
  for (let i = 0; i + 7 < b.length; i++) {
    if (b[i] === 0 && b[i + 1] === 0 && b[i + 2] === 1 && (b[i + 3] & 0x1f) === 7) {
      const hex = (v) => v.toString(16).padStart(2, '0');
      return 'avc1.' + hex(b[i + 4]) + hex(b[i + 5]) + hex(b[i + 6]);
    }
  }
  return 'avc1.42E01F';
}

export function startStream({ screen, viewOnly, scaling, onFrame, onStatus, onFallback, onEdgeError, onClipboard }) {
  const canvas = document.createElement('canvas');
  canvas.id = 'stream';
  canvas.tabIndex = 0;
  canvas.width = 0; canvas.height = 0;
  screen.replaceChildren(canvas);
  const g = canvas.getContext('2d');
  let ws, ended = false, answered = false, drawn = 0, bytes = 0, codec = '', lastAck = -1, lastKeyReq = 0;
  let width = 0, height = 0, buttons = 0;
  let frames = 0, lastId = -1; // pictures drawn (a frame's stripes count once)
  const decoders = new Map(); // stripe y → {dec, w, h, key}
  const pressed = new Set();
  const timers = [];

  const send = (m) => { if (ws && ws.readyState === WebSocket.OPEN) ws.send(m); };
  function end(reason) {
    if (ended) return;
    ended = true;
    for (const t of timers) clearInterval(t);
    for (const d of decoders.values()) { try { d.dec.close(); } catch (e) { /* closed */ } }
    removeInput();
    if (ws) { ws.onclose = null; ws.close(); }
    if (reason) onFallback(reason);
  }

  // size sets the picture's size (Selkies' stream_resolution); grow
  // makes room for a stripe beyond it. Both keep what is drawn: JPEG
  // stripes repaint only what changed.
  function size(w, h) {
    if (w > 0 && h > 0 && (w !== width || h !== height)) {
      let old = null;
      if (width && height) {
        old = document.createElement('canvas');
        old.width = width; old.height = height;
        old.getContext('2d').drawImage(canvas, 0, 0);
      }
      width = w; height = h;
      canvas.width = w; canvas.height = h;
      if (old) g.drawImage(old, 0, 0);
    }
  }
  const grow = (w, bottom) => { if (w > width || bottom > height) size(Math.max(w, width), Math.max(bottom, height)); };
  function applyScaling(mode) { canvas.className = mode === 'fit' ? 'fit' : ''; }
  applyScaling(scaling);

  function painted(id) {
    if (id !== lastId) { frames++; lastId = id; }
    lastAck = id;
    if (drawn++ === 0) onFrame();
  }
  function requestKeyframe() {
    const now = performance.now();
    if (now - lastKeyReq > 1000) { lastKeyReq = now; send('REQUEST_KEYFRAME'); }
  }

  async function jpegStripe(buf, id, y) {
    codec = 'JPEG';
    const bmp = await createImageBitmap(new Blob([buf.slice(6)], { type: 'image/jpeg' }));
    if (ended) { bmp.close(); return; }
    grow(bmp.width, y + bmp.height);
    g.drawImage(bmp, 0, y);
    bmp.close();
    painted(id);
  }

  function h264Stripe(buf, dv) {
    codec = 'H.264';
    const key = dv.getUint8(1) === 1, id = dv.getUint16(2), y = dv.getUint16(4), w = dv.getUint16(6), h = dv.getUint16(8);
    const au = buf.slice(10);
    if (typeof VideoDecoder === 'undefined' || !au.byteLength) return;
    let d = decoders.get(y);
    if (!d || d.w !== w || d.h !== h || d.dec.state === 'closed') {
      if (!key) { requestKeyframe(); return; }
      if (d) { try { d.dec.close(); } catch (e) { /* closed */ } }
      const dec = new VideoDecoder({
        output: (frame) => {
          if (!ended) {
            grow(frame.displayWidth, y + frame.displayHeight);
            g.drawImage(frame, 0, y);
            painted(frame.timestamp);
          }
          frame.close();
        },
        error: () => { decoders.delete(y); requestKeyframe(); },
      });
      try {
        dec.configure({ codec: codecOf(au), codedWidth: w, codedHeight: h, optimizeForLatency: true });
      } catch (e) { return; } // a codec this browser cannot decode: no picture, and the fallback's timer runs
      d = { dec, w, h };
      decoders.set(y, d);
    }
    try {
      d.dec.decode(new EncodedVideoChunk({ type: key ? 'key' : 'delta', timestamp: id, data: au }));
    } catch (e) { decoders.delete(y); requestKeyframe(); }
  }

  function message(e) {
    if (!answered) { // Selkies' first word: the desktop runs; now a picture is due
      answered = true;
      timers.push(setTimeout(() => { if (!drawn) end('no picture within ' + firstFrameMs / 1000 + ' s'); }, firstFrameMs));
    }
    if (e.data instanceof ArrayBuffer) {
      bytes += e.data.byteLength;
      if (e.data.byteLength < 6) return;
      const dv = new DataView(e.data);
      const t = dv.getUint8(0);
      if (t === 0x03) jpegStripe(e.data, dv.getUint16(2), dv.getUint16(4)).catch(() => {});
      else if (t === 0x04 && e.data.byteLength >= 10) h264Stripe(e.data, dv);
      return;
    }
    bytes += e.data.length;
    if (e.data.startsWith('KILL ')) { end('Selkies closed it: ' + e.data.slice(5)); return; }
    if (e.data.startsWith('clipboard,')) { // the sandbox's clipboard, base64 UTF-8 (small ones; big ones come in parts)
      try {
        const b = atob(e.data.slice(10)), u = new Uint8Array(b.length);
        for (let i = 0; i < b.length; i++) u[i] = b.charCodeAt(i);
        onClipboard(new TextDecoder().decode(u));
      } catch (err) { /* not base64 */ }
      return;
    }
    if (e.data[0] === '{') {
      try {
        const m = JSON.parse(e.data);
        if (m.type === 'stream_resolution' && (!m.displayId || m.displayId === 'primary')) size(m.width, m.height);
      } catch (err) { /* not for us */ }
    }
  }

  // Input, in Selkies' vocabulary; none at all on a view-only page.
  function position(e) {
    const r = canvas.getBoundingClientRect();
    if (!width || !r.width) return [0, 0];
    const s = Math.min(r.width / width, r.height / height);
    const ox = r.left + (r.width - width * s) / 2, oy = r.top + (r.height - height * s) / 2;
    const x = Math.round((e.clientX - ox) / s), y = Math.round((e.clientY - oy) / s);
    return [Math.max(0, Math.min(width - 1, x)), Math.max(0, Math.min(height - 1, y))];
  }
  const pointer = (e) => {
    if (e.type === 'pointerdown') { buttons |= 1 << e.button; canvas.focus(); }
    if (e.type === 'pointerup') buttons &= ~(1 << e.button);
    const [x, y] = position(e);
    send(`m,${x},${y},${buttons},0`);
    e.preventDefault();
  };
  const wheel = (e) => {
    const [x, y] = position(e);
    const bit = e.deltaY < 0 ? 1 << 3 : 1 << 4;
    send(`m,${x},${y},${buttons | bit},1`);
    send(`m,${x},${y},${buttons},0`);
    e.preventDefault();
  };
  const key = (e) => {
    const k = getKeysym(e);
    if (!k) return;
    e.preventDefault();
    if (e.type === 'keydown') { pressed.add(k); send('kd,' + k); } else { pressed.delete(k); send('ku,' + k); }
  };
  const blur = () => { for (const k of pressed) send('ku,' + k); pressed.clear(); };
  const noMenu = (e) => e.preventDefault();
  function addInput() {
    if (viewOnly) return;
    for (const t of ['pointerdown', 'pointerup', 'pointermove']) canvas.addEventListener(t, pointer);
    canvas.addEventListener('wheel', wheel, { passive: false });
    canvas.addEventListener('contextmenu', noMenu);
    canvas.addEventListener('keydown', key);
    canvas.addEventListener('keyup', key);
    canvas.addEventListener('blur', blur);
  }
  function removeInput() {
    for (const t of ['pointerdown', 'pointerup', 'pointermove']) canvas.removeEventListener(t, pointer);
    canvas.removeEventListener('wheel', wheel);
    canvas.removeEventListener('contextmenu', noMenu);
    canvas.removeEventListener('keydown', key);
    canvas.removeEventListener('keyup', key);
    canvas.removeEventListener('blur', blur);
  }

  (async () => {
    const h264 = await h264Supported();
    if (ended) return;
    ws = new WebSocket('wss://' + location.host + '/stream' + (viewOnly ? '?viewonly=1' : ''));
    ws.binaryType = 'arraybuffer';
    ws.onmessage = message;
    ws.onopen = () => {
      send('SETTINGS,' + JSON.stringify({ displayId: 'primary', encoder: h264 ? 'h264enc' : 'jpeg', framerate: 60, audioRedundancy: false }));
      addInput();
      canvas.focus();
    };
    ws.onclose = (e) => {
      if (ended) return;
      if (onEdgeError(e.reason)) { end(); return; }
      if (e.code === 4005) end('not offered here');
      else if (drawn) end('the stream ended');
      else end('could not connect');
    };
    timers.push(setTimeout(() => { if (!answered) end('no answer within ' + answerMs / 1000 + ' s'); }, answerMs));
    timers.push(setInterval(() => { if (lastAck >= 0) send('CLIENT_FRAME_ACK ' + (lastAck & 0xffff)); }, 500));
    // Rates over the time that really passed: a hidden tab's timers run late.
    let lastBytes = 0, lastFrames = 0, lastT = performance.now();
    timers.push(setInterval(() => {
      const now = performance.now(), dt = (now - lastT) / 1000;
      onStatus({ fps: Math.round((frames - lastFrames) / dt), codec, width, height,
        rate: (bytes - lastBytes) * 8 / dt, bytes, frames });
      lastBytes = bytes; lastFrames = frames; lastT = now;
    }, 1000));
  })();

  return {
    close: () => end(),
    scaling: applyScaling,
    key: (keysym, down) => { if (!viewOnly) send((down ? 'kd,' : 'ku,') + keysym); },
    clipboard: (text) => {
      if (viewOnly) return;
      const b = new TextEncoder().encode(text);
      let s = '';
      for (const c of b) s += String.fromCharCode(c);
      send('cw,' + btoa(s));
    },
    focus: () => canvas.focus(),
    frames: () => frames,
    bytes: () => bytes,
  };
}
