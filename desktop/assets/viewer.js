// The froog desktop viewer: exchanges the link's token for a session
// cookie, then shows the sandbox's screen: the fast stream (Selkies,
// selkies.js) when the sandbox offers it, else noVNC over the edge's VNC
// websocket — also when the stream shows nothing within a few seconds.
// ☰ → Connection picks by hand. The edge enforces view-only; the page
// only follows it.
import RFB from './novnc/core/rfb.js';
import K from './novnc/core/input/keysym.js';
import { token, fail } from './link.js';
import { startStream } from './selkies.js';
import * as settings from './storage.js';
import { seamlessClipboard } from './clipboard.js';
import { sound } from './sound.js';

const $ = (id) => document.getElementById(id);
const query = new URLSearchParams(location.search);
const pageViewOnly = query.get('viewonly') === '1';


async function getSession() {
  const res = token
    ? await fetch('/session', { method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ token, view_only: pageViewOnly }), credentials: 'same-origin' })
    : await fetch('/session', { credentials: 'same-origin' });
  const body = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error(body.error?.code || 'desktop_failed');
  return body;
}

let session, rfb, ws, stream;
let viewOnly = pageViewOnly;
let connectedAt = 0, bytes = 0, lastBytes = 0, retries = 0;
let transport = 'VNC', fallbackReason = '', streamStatus = null;
let vncFrames = 0, lastVncFrames = 0, vncFps = 0, lastTick = performance.now();
const prefs = { transport: settings.get('froog.transport', 'auto'),
  scaling: settings.get('froog.scaling', 'fit'), quality: settings.get('froog.quality', '6') };
if (query.get('transport') === 'vnc') prefs.transport = 'vnc';

const edgeCodes = new Set(['sandbox_stopped', 'desktop_failed', 'refused', 'no_session']);

// connect shows the screen with the chosen transport: the fast stream
// unless the menu says VNC or the stream has failed since the last
// reconnect by hand.
function connect() {
  if (rfb) { rfb.disconnect(); rfb = null; }
  if (stream) { stream.close(); stream = null; }
  if (prefs.transport === 'vnc' || fallbackReason) connectVNC(); else connectStream();
}

function connectStream() {
  transport = 'Selkies'; streamStatus = null; connectedAt = 0;
  status('connecting…');
  stream = startStream({
    screen: $('screen'), viewOnly, scaling: prefs.scaling,
    onFrame: () => { connectedAt = Date.now(); retries = 0; status('connected'); clip.connected(); },
    onStatus: (s) => { streamStatus = s; if (connectedAt) status('connected'); },
    onEdgeError: (reason) => { if (edgeCodes.has(reason)) { fail(reason); return true; } return false; },
    onFallback: (reason) => { stream = null; fallbackReason = reason; connectVNC(); },
    onClipboard: (text) => clip.fromSandbox(text),
  });
}

function connectVNC() {
  transport = 'VNC'; streamStatus = null;
  const url = 'wss://' + location.host + '/websockify' + (viewOnly ? '?viewonly=1' : '');
  ws = new WebSocket(url, ['binary']);
  ws.binaryType = 'arraybuffer';
  ws.addEventListener('message', (e) => { bytes += e.data.byteLength || 0; });
  ws.addEventListener('close', (e) => {
    if (edgeCodes.has(e.reason)) fail(e.reason);
  });
  status('connecting…');
  $('screen').replaceChildren();
  rfb = new RFB($('screen'), ws, { shared: true });
  rfb.viewOnly = viewOnly;
  rfb.scaleViewport = prefs.scaling === 'fit';
  rfb.clipViewport = prefs.scaling !== 'fit';
  rfb.qualityLevel = Number(prefs.quality);
  rfb.background = getComputedStyle(document.body).backgroundColor;
  rfb.addEventListener('connect', () => {
    connectedAt = Date.now(); retries = 0;
    status('connected');
    rfb.focus();
    clip.connected();
  });
  // Frames a second: noVNC (1.7.0, vendored) draws each finished
  // FramebufferUpdate with its display's flip, deferred while its render
  // queue is busy (then called again from the queue).
  const display = rfb._display, flip = display.flip;
  display.flip = function (fromQueue) {
    if (fromQueue || this._renderQ.length === 0) vncFrames++;
    return flip.call(this, fromQueue);
  };
  const mine = rfb;
  rfb.addEventListener('disconnect', async () => {
    if (rfb !== mine) return; // replaced: a reconnect or a change of transport
    connectedAt = 0;
    status('disconnected');
    // The session may have ended (sandbox stopped): say so, else retry.
    try { session = await getSessionState(); } catch (err) { fail(err.message); return; }
    if (retries++ < 5) setTimeout(connect, 1000 * retries);
  });
  rfb.addEventListener('clipboard', (e) => clip.fromSandbox(e.detail.text));
}

async function getSessionState() {
  const res = await fetch('/session', { credentials: 'same-origin' });
  const body = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error(body.error?.code || 'desktop_failed');
  return body;
}

// status is the status line's first part: the connection's state and
// transport — for the stream its codec and frames a second, for VNC why
// the fast stream is not used, if it was tried.
function status(conn) {
  let t = transport;
  if (transport === 'Selkies' && streamStatus) t = (streamStatus.codec || 'Selkies') + ' · ' + streamStatus.fps + ' fps';
  if (transport === 'VNC' && connectedAt) t = 'VNC · ' + vncFps + ' fps';
  if (transport === 'VNC' && fallbackReason && prefs.transport !== 'vnc') t += ' (fast stream: ' + fallbackReason + ')';
  $('st-conn').textContent = conn + ' · ' + t + (viewOnly ? ' · view only' : '');
}

// notes is the status line's last part: what this browser keeps from
// the page (settings not kept where storage is blocked, the clipboard
// only through ☰ where the browser refuses it), and the sound's state.
let clipNote = '', soundNote = '';
function notes() {
  $('st-note').textContent = [settings.problem(), clipNote, soundNote].filter(Boolean).join(' · ');
}

// The sound: muted until the 🔇 button beside ☰ is clicked (view-only
// pages may listen); $('status').sound() is its stats for tests.
const snd = sound({
  button: $('sound-button'),
  note: (s) => { soundNote = s; notes(); },
  onEdgeError: (reason) => { if (edgeCodes.has(reason)) { fail(reason); return true; } return false; },
});
$('status').sound = snd.stats;

// The clipboard: none for a view-only page or the browser view.
const hasClipboard = () => !viewOnly && !!session && session.kind !== 'browser';
const clip = seamlessClipboard({
  box: $('clipboard'),
  allowed: hasClipboard,
  send: (text) => { if (stream) stream.clipboard(text); else if (rfb) rfb.clipboardPasteFrom(text); },
  note: (why) => { clipNote = why; notes(); },
});

// The counts so far of the connection shown, for tests and benchmarks:
// pictures drawn and bytes received (the status line's .counts).
$('status').counts = () => ({
  frames: transport === 'VNC' ? vncFrames : (stream ? stream.frames() : 0),
  bytes: transport === 'VNC' ? bytes : (stream ? stream.bytes() : 0),
});

// Resolution, frame and data rate and session time, once a second (rates
// over the time that really passed: a hidden tab's timers run late).
setInterval(() => {
  const now = performance.now(), dt = (now - lastTick) / 1000;
  lastTick = now;
  vncFps = Math.round((vncFrames - lastVncFrames) / dt); lastVncFrames = vncFrames;
  if (transport === 'VNC' && connectedAt) status('connected');
  const canvas = $('screen').querySelector('canvas');
  $('st-res').textContent = canvas && connectedAt ? canvas.width + '×' + canvas.height : '';
  let rate = (bytes - lastBytes) * 8 / dt; lastBytes = bytes;
  if (streamStatus) rate = streamStatus.rate;
  $('st-rate').textContent = connectedAt ? (rate >= 1e6 ? (rate / 1e6).toFixed(1) + ' Mbit/s' : Math.round(rate / 1e3) + ' kbit/s') : '';
  if (connectedAt) {
    const s = Math.floor((Date.now() - connectedAt) / 1000);
    $('st-time').textContent = Math.floor(s / 60) + ':' + String(s % 60).padStart(2, '0');
  } else $('st-time').textContent = '';
}, 1000);

function applyViewOnly() {
  $('viewonly').checked = viewOnly;
  $('viewonly').disabled = session.view_only;
  $('viewonly-note').hidden = !session.view_only;
  $('viewonly-note').textContent = session.locked ? 'This link is view-only.' : 'This page was opened view-only.';
  $('clipboard-box').hidden = !hasClipboard();
  if (!hasClipboard()) $('clipboard').value = '';
  $('keys').hidden = viewOnly;
}

function menu() {
  const button = $('menu-button'), panel = $('menu');
  button.addEventListener('click', () => {
    panel.hidden = !panel.hidden;
    button.setAttribute('aria-expanded', String(!panel.hidden));
  });
  $('fullscreen').addEventListener('click', () => {
    if (document.fullscreenElement) document.exitFullscreen(); else document.documentElement.requestFullscreen();
  });
  $('reconnect').addEventListener('click', () => { retries = 0; fallbackReason = ''; connect(); });
  for (const [id, key] of [['transport', 'transport'], ['scaling', 'scaling'], ['quality', 'quality']]) {
    $(id).value = prefs[key];
    $(id).addEventListener('change', () => {
      prefs[key] = $(id).value;
      if (!(key === 'transport' && query.get('transport'))) { settings.set('froog.' + key, prefs[key]); notes(); }
      if (key === 'transport') { retries = 0; fallbackReason = ''; connect(); return; }
      if (stream) stream.scaling(prefs.scaling);
      if (!rfb) return;
      rfb.scaleViewport = prefs.scaling === 'fit';
      rfb.clipViewport = prefs.scaling !== 'fit';
      rfb.qualityLevel = Number(prefs.quality);
    });
  }
  // A chord: the keys pressed in order, released in reverse.
  const chord = (...syms) => {
    for (const k of syms) (stream ? stream.key(k, true) : rfb.sendKey(k, null, true));
    for (const k of syms.reverse()) (stream ? stream.key(k, false) : rfb.sendKey(k, null, false));
  };
  const keys = {
    ctrlaltdel: () => chord(K.XK_Control_L, K.XK_Alt_L, K.XK_Delete),
    esc: () => chord(K.XK_Escape),
    tab: () => chord(K.XK_Tab),
    super: () => chord(K.XK_Super_L),
    ctrlaltbksp: () => chord(K.XK_Control_L, K.XK_Alt_L, K.XK_BackSpace),
  };
  for (const b of $('keys').querySelectorAll('button')) {
    b.addEventListener('click', () => { if ((rfb || stream) && !viewOnly) keys[b.dataset.key](); });
  }
  $('clipboard-send').addEventListener('click', () => {
    if (!hasClipboard()) return;
    if (stream) stream.clipboard($('clipboard').value); else if (rfb) rfb.clipboardPasteFrom($('clipboard').value);
  });
  // Turning view-only on or off reconnects, so that the edge enforces it.
  $('viewonly').addEventListener('change', () => {
    if (session.view_only) { $('viewonly').checked = true; return; }
    viewOnly = $('viewonly').checked;
    applyViewOnly();
    retries = 0; connect();
  });
}

async function main() {
  notes();
  try { session = await getSession(); } catch (err) { fail(err.message); return; }
  viewOnly = viewOnly || session.view_only;
  $('sound-button').hidden = false;
  menu();
  applyViewOnly();
  connect();
}

main();
