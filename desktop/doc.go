// Package desktop serves the view hosts of sandboxes' desktops and
// browser views and of accounts' walls. By concept:
//
//   - the viewer and sessions: desktop.go (Options, the interfaces, the
//     handler and its routing by view), http.go (the pages, the link
//     exchange, the session checks), session.go (a dt_ token exchanged
//     for an HMAC-signed __Host- cookie, for one run of one sandbox) and
//     starter.go (SSHStarter: froog-desktop start run in the sandbox over
//     SSH); the viewer page is noVNC, vendored by deploy/novnc.sh and
//     embedded;
//   - the bridge: bridge.go, the websocket to the sandbox's VNC server,
//     view-only enforced by package desktop/rfb's filters both ways (no
//     input up, no clipboard down);
//   - the fast stream: selkies.go (the page's websocket carried to
//     Selkies in the sandbox, the edge holding Selkies' credentials) and
//     selkiesfilter.go (a view-only page's messages filtered), with VNC as
//     the page's fallback;
//   - the sound: sound.go, the /audio websocket, muted until the page
//     unmutes, for view-only sessions too: one connection per listened
//     screen to froog-desktop's sound server (Opus, encoded only while
//     someone listens) fanned out to every listener, whichever transport
//     shows the screen;
//   - the wall: wall.go (an account's running sandboxes, following the
//     feed, pushed to the page by server-sent events) and tiles.go (one
//     small RFB client, rfb.Client, per shown desktop, its picture a
//     JPEG);
//
// It declares the small interfaces it needs — Links, Starter (and
// StreamStarter, SoundStarter), Dialer, Sandboxes, and for the wall
// Accounts and Linker — and holds no adapters
// of the store to them (cmd/froogd has those); it imports neither edge
// nor api: the caller parses the host into a View and hands it in with
// every request.
package desktop
