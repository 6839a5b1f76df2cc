// Package edge serves sandboxes' public URLs, one concern a file:
//
//   - listen.go: the HTTPS listener (the accept loop, TLS, the split by
//     ALPN and SNI between the protocols' servers and the views'), the
//     HTTP listener that redirects to HTTPS, tracked connections and
//     Close;
//   - framing.go: the HTTP/1.1 smuggling guard under fasthttp;
//   - h1.go, h2.go: the two protocols' adapters (fasthttp, net/http):
//     each reads and writes its own request and response behind an
//     exchange, and nothing more;
//   - pipeline.go: the request path, once for both protocols: admit
//     (read the head, decide, answer a refusal or the token's redirect),
//     then pass (strip, X-Forwarded-*, hold, proxy, answer, log);
//   - core.go: the decision (route, rate limit, auth; a route, a
//     redirect or a problem comes out) and the access log;
//   - auth.go: the token in its three carriers, the redirect that turns
//     it into a cookie, CORS preflights;
//   - headers.go: hop-by-hop headers and the token's removal, one set of
//     rules for both protocols;
//   - hold.go: auto-start, a request held while its sandbox starts;
//   - proxy.go: the upstream pool through the tunnel, failures mapped to
//     pages, the websocket pipe, body pacing (countingReader);
//   - views.go: the view hosts (desktops, browser views, walls), served
//     only on a connection made for them;
//   - pages.go, metrics.go, limit.go, edge.go: error pages, metrics, the
//     per-address rate limit, Options and New.
//
// The path of a request for a private URL, file by file:
//
//	HTTP/1.1: listen.go (accept, TLS handshake; ALPN http/1.1, SNI not
//	a view) → framing.go (the guard reads the head as fasthttp does) →
//	h1.go (fasthttp's handler: the exchange) → pipeline.go (serve).
//	HTTP/2: listen.go (ALPN h2) → h2.go (net/http's handler: the
//	exchange) → pipeline.go (serve).
//	pipeline.go then, for both: core.go decides (auth.go checks the
//	token) → headers.go's rules strip the head → hold.go waits if the
//	sandbox is stopped → the adapter's forward (the protocol's upstream
//	client) → proxy.go (the pool, dial) → package tunnel.
//
// The pipeline is the spine: core.go, auth.go, headers.go, hold.go and
// pages.go are called by it and return to it; only forward still goes
// back to the adapter, each protocol keeping its own upstream client.
//
// Routes come from package edge/route; connections to sandboxes from
// package tunnel. It must not import api, and it asks certs for
// certificates rather than issuing them.
package edge
