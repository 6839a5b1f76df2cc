// The froog wall: every running sandbox of an account as a tile whose
// picture the edge refreshes about once a second (server-sent events say
// when). A click makes one tile live (the desktop's own view-only viewer
// in an iframe); Use makes it live with input over the wall; Esc goes
// back to pictures. Open opens the desktop in a new tab.
import { token, fail } from './link.js';

const $ = (id) => document.getElementById(id);

async function session(body) {
  const res = body
    ? await fetch('/session', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body), credentials: 'same-origin' })
    : await fetch('/session', { credentials: 'same-origin' });
  const out = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error(out.error?.code || 'desktop_failed');
  return out;
}

const tiles = new Map(); // sandbox id → {el, img, note, name, v}
let live = null; // {id, iframe, mode}

const notes = { starting: 'starting…', nopicture: 'no picture' };

function makeTile(sb) {
  const el = document.createElement('section');
  el.className = 'tile';
  el.dataset.id = sb.id;
  const head = document.createElement('div');
  head.className = 'head';
  const name = document.createElement('span');
  name.className = 'name';
  const use = document.createElement('button');
  use.type = 'button'; use.className = 'use'; use.textContent = 'Use';
  const open = document.createElement('button');
  open.type = 'button'; open.className = 'open'; open.textContent = 'Open';
  head.append(name, use, open);
  const pic = document.createElement('div');
  pic.className = 'pic';
  pic.title = 'Click to watch it live';
  const img = document.createElement('img');
  img.alt = '';
  const note = document.createElement('span');
  note.className = 'note';
  note.textContent = notes.starting;
  pic.append(img, note);
  el.append(head, pic);
  const t = { el, img, note, name, pic, v: 0 };
  name.addEventListener('click', () => goLive(sb.id, 'use'));
  use.addEventListener('click', () => goLive(sb.id, 'use'));
  pic.addEventListener('click', () => { if (!live || live.id !== sb.id) goLive(sb.id, 'view'); });
  open.addEventListener('click', () => openTab(sb.id));
  return t;
}

function render(list) {
  const ids = new Set(list.map((s) => s.id));
  for (const [id, t] of tiles) {
    if (ids.has(id)) continue;
    if (live && live.id === id) back();
    t.el.remove();
    tiles.delete(id);
  }
  const grid = $('grid');
  let prev = null;
  for (const sb of list) {
    let t = tiles.get(sb.id);
    if (!t) { t = makeTile(sb); tiles.set(sb.id, t); }
    t.name.textContent = sb.name;
    const at = prev ? prev.nextSibling : grid.firstChild;
    if (at !== t.el) grid.insertBefore(t.el, at); // moves only what moved: an iframe that moves reloads
    prev = t.el;
  }
  $('empty').hidden = list.length > 0;
  $('count').textContent = list.length ? list.length + (list.length === 1 ? ' sandbox' : ' sandboxes') : '';
}

function tileEvent(e) {
  const t = tiles.get(e.id);
  if (!t) return;
  if (e.v > t.v) {
    t.v = e.v;
    t.img.src = '/tile/' + encodeURIComponent(e.id) + '.jpg?v=' + e.v;
  }
  t.note.hidden = e.state === 'ok';
  t.note.textContent = notes[e.state] || '';
  t.el.dataset.state = e.state;
}

async function link(id, mode) {
  const res = await fetch('/live', { method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ sandbox_id: id, mode }), credentials: 'same-origin' });
  const out = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error(out.error?.code || 'desktop_failed');
  return out.url;
}

async function goLive(id, mode) {
  if (live) back();
  const t = tiles.get(id);
  if (!t) return;
  const mine = { id, mode, iframe: null };
  live = mine;
  t.el.classList.add(mode === 'use' ? 'using' : 'live');
  $('back').hidden = false;
  let url;
  try { url = await link(id, mode); } catch { if (live === mine) back(); return; }
  if (live !== mine) return;
  const f = document.createElement('iframe');
  f.allow = 'clipboard-read; clipboard-write; fullscreen';
  f.title = 'Desktop of ' + t.name.textContent;
  f.src = url;
  if (mode === 'use') f.addEventListener('load', () => f.focus());
  mine.iframe = f;
  t.pic.append(f);
}

function back() {
  if (!live) return;
  const t = tiles.get(live.id);
  if (live.iframe) live.iframe.remove();
  if (t) t.el.classList.remove('live', 'using');
  live = null;
  $('back').hidden = true;
}

async function openTab(id) {
  try { window.open(await link(id, 'open'), '_blank', 'noopener'); } catch { /* the tile says what it can */ }
}

document.addEventListener('keydown', (e) => { if (e.key === 'Escape') back(); });
// Esc inside a live tile's viewer (which has the keyboard in Use) comes
// as a message from it (viewer.js, wall=1).
window.addEventListener('message', (e) => {
  if (live && live.iframe && e.source === live.iframe.contentWindow && e.data === 'froog:escape') back();
});
// A view-only live tile keeps the keyboard on the wall (for Esc): its
// viewer may take the focus when it connects.
window.addEventListener('blur', () => {
  if (live && live.mode === 'view' && document.activeElement === live.iframe) setTimeout(() => live?.iframe?.blur(), 0);
});
$('back').addEventListener('click', back);

let events;
function listen() {
  events = new EventSource('/events');
  events.addEventListener('sandboxes', (e) => render(JSON.parse(e.data)));
  events.addEventListener('tile', (e) => tileEvent(JSON.parse(e.data)));
  events.addEventListener('end', (e) => { events.close(); fail(e.data); });
  events.addEventListener('error', async () => {
    if (events.readyState !== EventSource.CLOSED) return; // it reconnects by itself
    try { await session(); } catch (err) { fail(err.message); return; }
    setTimeout(listen, 2000);
  });
}

async function main() {
  try { await session(token ? { token } : null); } catch (err) { fail(err.message); return; }
  listen();
}

main();
