// The settings a page keeps between visits (the viewer's connection,
// scaling and picture quality), in localStorage where the browser allows
// it. Where it does not — a cross-site iframe with third-party storage
// blocked, a privacy mode, a full quota — even reading the property
// throws; then the settings live in memory for the page's life, and
// problem() says so for the status line. The page never dies of it: every
// touch of the browser's storage is in this file (desktop_test.go checks
// that no other asset has one).
const memory = new Map();
let failure = '';

function store() {
  try {
    const s = window.localStorage;
    s.length; // a blocked storage may throw only when used
    return s;
  } catch (e) {
    failure = 'settings are not kept (the browser blocks storage here)';
    return null;
  }
}
const ls = store();

// get returns the setting key, or fallback when it has none.
export function get(key, fallback) {
  if (memory.has(key)) return memory.get(key);
  if (ls) {
    try {
      const v = ls.getItem(key);
      if (v !== null) return v;
    } catch (e) { failure = 'settings are not kept (the browser blocks storage here)'; }
  }
  return fallback;
}

// set keeps a setting: in the browser's storage where it can, always in
// memory for this page.
export function set(key, value) {
  memory.set(key, String(value));
  if (!ls) return;
  try { ls.setItem(key, String(value)); } catch (e) { failure = 'settings are not kept (' + (e && e.name === 'QuotaExceededError' ? 'storage is full' : 'the browser blocks storage here') + ')'; }
}

// problem says why settings are not kept, or '' when they are.
export function problem() { return failure; }
