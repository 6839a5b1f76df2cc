// Package desktop serves the view hosts of sandboxes' desktops and
// browser views: the viewer page (noVNC, vendored by deploy/novnc.sh and
// embedded), desktop-link sessions (a dt_ token exchanged for an
// HMAC-signed __Host- cookie), and the websocket-to-VNC bridge with
// view-only enforced by an RFB client-stream filter; the fast stream
// (selkies.go): the page's websocket carried to Selkies in the sandbox,
// the edge holding Selkies' credentials and filtering a view-only page's
// messages (selkiesfilter.go), with VNC as the page's fallback; and an account's
// wall (wall.go): tiles kept by one small RFB client per shown desktop
// (rfbclient.go, tiles.go), pushed to the page by server-sent events.
//
// It declares the small interfaces it needs — Links, Starter, Dialer,
// Sandboxes, and for the wall Accounts and Linker — and imports neither
// edge nor api: the caller parses the host into a View and hands it in
// with every request.
package desktop
