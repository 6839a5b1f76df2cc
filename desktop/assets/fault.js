// Whatever goes wrong in the page's scripts and nothing handles — a
// module that cannot load or throws while it starts — shows in the status
// line, so that a page never sits at "connecting…" saying nothing. A
// classic script in the head: it listens before the modules run.
'use strict';
(() => {
  const report = (what) => {
    const el = document.getElementById('st-note');
    if (el) el.textContent = 'the page failed: ' + String(what).slice(0, 200);
  };
  window.addEventListener('error', (e) => report(e.message || 'a script did not load'));
  window.addEventListener('unhandledrejection', (e) => report((e.reason && e.reason.message) || e.reason));
})();
