// Package edge serves sandboxes' public URLs, one concern a file:
//
//   - listen.go: the HTTPS listener (TLS, the split by ALPN between the
//     two protocols), the HTTP listener that redirects to it, tracked
//     connections and Close;
//   - core.go: what both protocols share — a request (call) goes in, a
//     decision (route, redirect or problem) comes out — and the access log;
//   - auth.go: the token in its three carriers, the redirect that turns
//     it into a cookie, CORS preflights;
//   - headers.go: hop-by-hop headers and the token's removal, one set of
//     rules for both protocols;
//   - proxy.go: the upstream pool through the tunnel, streaming, the
//     websocket pipe, and failures mapped to pages;
//   - framing.go: the HTTP/1.1 smuggling guard;
//   - h1.go, h2.go: the two protocols' adapters (fasthttp, net/http);
//   - pages.go, metrics.go, limit.go: error pages, metrics, the
//     per-address rate limit.
//
// Routes come from package edge/route; connections to sandboxes from
// package tunnel. It must not import api, and it asks certs for
// certificates rather than issuing them.
package edge
