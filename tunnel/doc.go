// Package tunnel holds the SSH client connections to sandboxes: one
// connection per sandbox, shared by all its channels, with the host key
// pinned from the store, a deadline on the whole handshake, keepalives that
// close a dead connection, a single in-flight dial per sandbox with
// backoff after failures, and connections dropped when the sandbox stops
// or its endpoint changes (change feed).
//
// DialContext opens a direct-tcpip channel to 127.0.0.1:PORT inside the
// sandbox and returns a net.Conn whose deadlines work (x/crypto/ssh
// channels refuse them; HTTP clients rely on them). Session opens an exec
// session for the API. DialSSH is the one pinned-host-key SSH dial, used
// here and by hostctl/qemu to log in to its guests. Errors callers act on
// are typed: ErrNotRunning, ErrPortClosed (nothing listens on the port
// inside the sandbox), ErrHostKeyMismatch.
//
// tunnel must not know about HTTP.
package tunnel
