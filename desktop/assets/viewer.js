// The froog desktop viewer: exchanges the link's token for a session
// cookie, then shows the sandbox's screen with noVNC over the edge's
// websocket. The edge enforces view-only; the page only follows it.
import RFB from './novnc/core/rfb.js';
import K from './novnc/core/input/keysym.js';
import { token, fail } from './link.js';

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

let session, rfb, ws;
let viewOnly = pageViewOnly;
let connectedAt = 0, bytes = 0, lastBytes = 0, retries = 0;
const prefs = { transport: localStorage.getItem('froog.transport') || 'auto',
  scaling: localStorage.getItem('froog.scaling') || 'fit', quality: localStorage.getItem('froog.quality') || '6' };
if (query.get('transport') === 'vnc') prefs.transport = 'vnc';

const edgeCodes = new Set(['sandbox_stopped', 'desktop_failed', 'refused', 'no_session']);

function connect() {
  if (rfb) rfb.disconnect();
  const url = 'wss://' + location.host + '/websockify' + (viewOnly ? '?viewonly=1' : '');
  ws = new WebSocket(url, ['binary']);
  ws.binaryType = 'arraybuffer';
  ws.addEventListener('message', (e) => { bytes += e.data.byteLength || 0; });
  ws.addEventListener('close', (e) => {
    if (edgeCodes.has(e.reason)) fail(e.reason);
  });
  status('connecting…');
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
  });
  rfb.addEventListener('disconnect', async () => {
    connectedAt = 0;
    status('disconnected');
    // The session may have ended (sandbox stopped): say so, else retry.
    try { session = await getSessionState(); } catch (err) { fail(err.message); return; }
    if (retries++ < 5) setTimeout(connect, 1000 * retries);
  });
  rfb.addEventListener('clipboard', (e) => { $('clipboard').value = e.detail.text; });
}

async function getSessionState() {
  const res = await fetch('/session', { credentials: 'same-origin' });
  const body = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error(body.error?.code || 'desktop_failed');
  return body;
}

function status(conn) {
  $('st-conn').textContent = conn + ' · VNC' + (viewOnly ? ' · view only' : '');
}

// Resolution, data rate and session time, once a second.
setInterval(() => {
  const canvas = $('screen').querySelector('canvas');
  $('st-res').textContent = canvas && connectedAt ? canvas.width + '×' + canvas.height : '';
  const rate = (bytes - lastBytes) * 8; lastBytes = bytes;
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
  $('clipboard-box').hidden = viewOnly;
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
  $('reconnect').addEventListener('click', () => { retries = 0; connect(); });
  for (const [id, key] of [['transport', 'transport'], ['scaling', 'scaling'], ['quality', 'quality']]) {
    $(id).value = prefs[key];
    $(id).addEventListener('change', () => {
      prefs[key] = $(id).value;
      if (!(key === 'transport' && query.get('transport'))) localStorage.setItem('froog.' + key, prefs[key]);
      if (!rfb) return;
      rfb.scaleViewport = prefs.scaling === 'fit';
      rfb.clipViewport = prefs.scaling !== 'fit';
      rfb.qualityLevel = Number(prefs.quality);
    });
  }
  const keys = {
    ctrlaltdel: () => rfb.sendCtrlAltDel(),
    esc: () => rfb.sendKey(K.XK_Escape, 'Escape'),
    tab: () => rfb.sendKey(K.XK_Tab, 'Tab'),
    super: () => rfb.sendKey(K.XK_Super_L, 'MetaLeft'),
    ctrlaltbksp: () => {
      rfb.sendKey(K.XK_Control_L, 'ControlLeft', true); rfb.sendKey(K.XK_Alt_L, 'AltLeft', true);
      rfb.sendKey(K.XK_BackSpace, 'Backspace');
      rfb.sendKey(K.XK_Alt_L, 'AltLeft', false); rfb.sendKey(K.XK_Control_L, 'ControlLeft', false);
    },
  };
  for (const b of $('keys').querySelectorAll('button')) {
    b.addEventListener('click', () => { if (rfb && !viewOnly) keys[b.dataset.key](); });
  }
  $('clipboard-send').addEventListener('click', () => { if (rfb && !viewOnly) rfb.clipboardPasteFrom($('clipboard').value); });
  // Turning view-only on or off reconnects, so that the edge enforces it.
  $('viewonly').addEventListener('change', () => {
    if (session.view_only) { $('viewonly').checked = true; return; }
    viewOnly = $('viewonly').checked;
    applyViewOnly();
    retries = 0; connect();
  });
}

async function main() {
  try { session = await getSession(); } catch (err) { fail(err.message); return; }
  viewOnly = viewOnly || session.view_only;
  menu();
  applyViewOnly();
  connect();
}

main();
