// The seamless clipboard of a full session (text only): text copied in
// the sandbox is offered to the browser's clipboard at once when the page
// has the focus and the browser allows writing, else when the page gets
// the focus back; text copied in the browser is sent to the sandbox when
// the page gets the focus (read with the async Clipboard API, which in
// an iframe needs the embedder's allow="clipboard-read; clipboard-write")
// or when it is pasted into the page. The ☰ clipboard box shows the last
// text either way and stays the way in and out where the browser
// refuses; note(text) says so for the status line. A view-only page, and
// the browser view (the docs give it no clipboard), have none: allowed()
// is asked before every read, write and send, and nothing here touches
// the browser's clipboard when it says no. Images and rich text are not
// carried (RFB's plain cut text is Latin-1 text, Selkies' is UTF-8 text).
export function seamlessClipboard({ box, allowed, send, note }) {
  const api = navigator.clipboard;
  let inBrowser = null; // what the browser's clipboard was when last read or written here
  let pending = null;   // the sandbox's text, not yet written to the browser
  let refused = '';

  const say = (why) => { if (why !== refused) { refused = why; note(why); } };
  const focused = () => document.visibilityState === 'visible' && document.hasFocus();

  // offer writes the sandbox's pending text to the browser's clipboard.
  async function offer() {
    if (pending === null || !allowed() || !api?.writeText || !focused()) return;
    const text = pending;
    try {
      await api.writeText(text);
      inBrowser = text;
      if (pending === text) pending = null;
      say('');
    } catch (e) { say('clipboard: through ☰ (the browser does not let the page write it)'); }
  }

  // toSandbox sends the browser's text unless the sandbox has it already.
  function toSandbox(text) {
    if (!allowed() || typeof text !== 'string' || text === '' || text === inBrowser) return;
    inBrowser = text;
    pending = null; // the browser's newer copy wins over an older one from the sandbox
    box.value = text;
    send(text);
  }

  // readable says whether to read the browser's clipboard: where the
  // browser has a clipboard-read permission (Chromium) and it is granted
  // or yet to be asked (then the browser asks once). Where it has none
  // (Firefox, Safari), every read pops up a "Paste" button: the page
  // reads nothing there, and a paste or the ☰ box brings text in.
  async function readable() {
    if (!api?.readText || !navigator.permissions) return false;
    try {
      const st = (await navigator.permissions.query({ name: 'clipboard-read' })).state;
      if (st === 'denied') say('clipboard: through ☰ (the browser does not let the page read it)');
      return st !== 'denied';
    } catch (e) { return false; }
  }

  // sync, when the page has the focus: the browser's clipboard if it
  // changed since the page last saw it (the person copied something
  // elsewhere), else the sandbox's pending text.
  async function sync() {
    if (!allowed() || !focused()) return;
    if (await readable()) {
      try {
        const text = await api.readText();
        if (text !== inBrowser && text !== '') { toSandbox(text); return; }
        if (refused.includes('read')) say('');
      } catch (e) { say('clipboard: through ☰ (the browser does not let the page read it)'); }
    }
    await offer();
  }

  window.addEventListener('focus', () => { sync(); });
  document.addEventListener('visibilitychange', () => { if (document.visibilityState === 'visible') sync(); });
  // A paste into the page (not into the box, which has a button of its
  // own): the pasted text, with no permission needed.
  document.addEventListener('paste', (e) => {
    if (e.target === box || !allowed()) return;
    const text = e.clipboardData?.getData('text/plain');
    if (text) { e.preventDefault(); toSandbox(text); }
  });

  return {
    // fromSandbox takes the sandbox's clipboard (the edge sends none to a
    // view-only page, and this takes none there either).
    fromSandbox(text) {
      if (!allowed()) return;
      box.value = text;
      if (text === inBrowser) return; // our own, come back
      pending = text;
      offer();
    },
    // connected syncs once a connection is up: the page may have the
    // focus already.
    connected: () => { sync(); },
  };
}
