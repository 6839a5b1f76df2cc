// Package tunnel will hold the SSH client connections to sandboxes: a
// pinned host key, one connection per sandbox shared by many channels,
// keepalives, reconnects, and DialContext(ctx, sandbox, port).
//
// Not built yet (its own issue). It must not know about HTTP.
package tunnel
