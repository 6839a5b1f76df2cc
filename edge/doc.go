// Package edge serves sandboxes' public URLs: the HTTPS listener (HTTP/1.1
// and HTTP/2), the HTTP listener that redirects to it, host parsing, the
// route table (loaded whole, kept current from the store's change feed,
// read without locks), token and cookie auth, the reverse proxy through
// the SSH tunnel with websocket passthrough, the HTML and JSON error
// pages, and the access log.
//
// It reads routes from the store and dials through package tunnel; it
// must not import api, and it asks certs for certificates rather than
// issuing them.
package edge
