// Package desktop will serve sandboxes' desktops: the viewer pages and the
// wall, desktop-link sessions, and the websocket-to-VNC bridge with
// view-only enforcement.
//
// Not built yet (its own issue).
package desktop
