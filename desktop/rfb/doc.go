// Package rfb is the part of the RFB (VNC) protocol froog speaks, as
// Tailscale's derp is its protocol and derpserver the server: what the
// desktop bridge filters and what the wall's tiles read.
//
//   - filter.go: Filter, the client→server stream of a bridged viewer:
//     the handshake forced to security None and a shared session, and for
//     a view-only viewer every input message (keys, pointer, clipboard,
//     resizes) dropped; the client message types (Msg…).
//   - serverfilter.go: ServerFilter, the server→client stream of a
//     view-only viewer: the server's clipboard dropped, every message
//     framed by the encodings the Filter let the viewer ask for.
//   - client.go: Client, a small RFB 3.8 client that keeps a scaled-down
//     picture of a desktop (a wall tile) from Raw, CopyRect and ZRLE
//     rectangles; AppendRequest asks for updates.
//   - zrle.go: the ZRLE decoder the Client uses, bounded by the
//     rectangle's pixels, not by what the server claims.
//
// Every parser here is fuzzed. It imports nothing of froog's.
package rfb
