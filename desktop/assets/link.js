// What the viewer and the wall share: the link's token, taken out of the
// address bar, and the error pages.
const query = new URLSearchParams(location.search);

// The token is a secret: out of the address bar (and history) at once.
export const token = location.hash.startsWith('#dt_') ? location.hash.slice(1) : '';
if (location.hash) history.replaceState(null, '', location.pathname + location.search);

// Error pages keep the page's look.
export function fail(code) {
  const q = new URLSearchParams();
  if (query.get('theme')) q.set('theme', query.get('theme'));
  location.replace('/error/' + encodeURIComponent(code) + (q.size ? '?' + q : ''));
}
