// On the wall (wall=1, in the wall's iframe) Esc goes back to the grid:
// the key never reaches noVNC's keyboard (which listens lower down), and
// the wall hears of it; the message says nothing but that. A classic
// script in the head, so that it listens before the page can have the
// keyboard (the module that follows loads noVNC first).
'use strict';
if (new URLSearchParams(location.search).get('wall') === '1' && window.parent !== window) {
  window.addEventListener('keydown', (e) => {
    if (e.key !== 'Escape') return;
    e.preventDefault();
    e.stopImmediatePropagation();
    window.parent.postMessage('froog:escape', '*');
  }, true);
}
