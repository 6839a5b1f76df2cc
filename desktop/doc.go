// Package desktop serves the view hosts of sandboxes' desktops and
// browser views: the viewer page (noVNC, vendored by deploy/novnc.sh and
// embedded), desktop-link sessions (a dt_ token exchanged for an
// HMAC-signed __Host- cookie), and the websocket-to-VNC bridge with
// view-only enforced by an RFB client-stream filter.
//
// It declares the small interfaces it needs — Links, Starter, Dialer,
// Sandboxes — and imports neither edge nor api: the caller parses the
// host into a View and hands it in with every request.
package desktop
