// Package edge serves sandboxes' public URLs, one concern a file:
//
//   - listen.go: the HTTPS listener (the accept loop, TLS, and the one
//     dispatch: by SNI to the views' server, else by ALPN to a
//     protocol's), the HTTP listener that redirects to HTTPS, tracked
//     connections and Close;
//   - tickets.go: the TLS session tickets' keys, shared by every edge
//     through the store (sealed with the deployment's secret, rotated,
//     retired), so that a session resumes at any edge;
//   - views.go: the views' server (desktops, browser views, walls), for
//     the connections made for them;
//   - framing.go: the HTTP/1.1 smuggling guard under fasthttp;
//   - h1.go, h2.go: the two protocols' adapters (fasthttp, net/http):
//     each reads its request's head into an exchange and writes the
//     edge's own answers, and nothing more; an answer over either says
//     where HTTP/3 is (Alt-Svc) when the edge serves it;
//   - h3.go: HTTP/3, quic-go's listener and server on the UDP port of
//     the HTTPS port's number, serving through h2.go's handler: QUIC's
//     limits, the per-address connection count shared with TCP, no
//     0-RTT, a request stream's head bounded as TCP's (its own stream
//     loop around quic-go's connection), a view host by SNI to the
//     views' server, and whether a request without Content-Length has a
//     body; ServeQUIC drains as ServeTLS does;
//   - pipeline.go: the request path, once for both protocols: admit
//     (read the head, decide, answer a refusal or the token's redirect),
//     then pass (strip, X-Forwarded-*, hold, proxy, answer, log);
//   - core.go: the decision (rate limit, route, and the token in its
//     three carriers, the redirect that turns it into a cookie, CORS
//     preflights: a route, a redirect or a problem comes out; the port
//     the request goes to, the URL's own or its path route's, chosen once
//     there for the hold, the forward and the pages) and the access log;
//   - policy.go: a URL's own policy, which the decision applies before
//     the token: its allowed source addresses, its rate limit, and the
//     frame-ancestors its answers carry;
//   - bandwidth.go: a URL's bandwidth cap, one byte bucket per URL that
//     its bodies and websockets pay into;
//   - headers.go: hop-by-hop headers and the token's removal, one set of
//     rules for both protocols;
//   - hold.go: auto-start, a request held while its sandbox starts;
//   - starting.go: the Starting page's watch of the start (the stage
//     hostctl writes, the port answering), answered by the edge itself;
//   - inbox.go, inbox_verify.go, inbox_deliver.go: a URL's webhook
//     inbox: the step after strip that verifies (GitHub, Stripe, Slack,
//     Standard Webhooks), stores and answers a matching request itself,
//     and DeliverInboxes, which takes stored requests to the app in
//     order, at least once, leased through the store so any edge may;
//   - proxy.go: the forward, for both protocols: one upstream pool (idle
//     tunnel connections per sandbox port, capped, closed after 30 s
//     idle; a sandbox's new run or endpoint closes its own and no one
//     else's: forgetStale), the request written on a pooled connection
//     and the answer read back (fasthttp's codec for HTTP/1.1; for
//     HTTP/2, net/http's ReverseProxy over the pool, the request's end
//     closing its connection), the dial through the tunnel;
//   - bodies.go: a body as the edge reads it: counted, a request's paced
//     (the client's minimum rate), both capped by bandwidth.go;
//   - websocket.go: an HTTP/1.1 upgrade passed through, and the pipe
//     that joins the two connections;
//   - pages.go, metrics.go, limit.go, edge.go: error pages and the
//     mapping of a failed forward to one, metrics, the per-address rate
//     limit, Options and New;
//   - listening.go: what a refused dial's page says of the ports that do
//     listen in the sandbox (read over the tunnel, cached, bounded), and
//     to whom;
//   - traffic.go: the owner's request rings: per URL, the last 100
//     exchanges this edge saw (a summary: method, path, query without
//     _token, status, bytes, client, dial, first byte, total), recorded
//     once by finish for every protocol, bounded per URL (100, 1 MiB of
//     captures) and per edge (64 MiB), in memory only, kept in step with
//     the route table (KeepTraffic), read by Requests and Follow;
//   - capture.go: with the owner's capture on, the headers and the first
//     10 KiB of each body, taken where the pipeline has them and
//     redacted before the ring keeps them (cookies, credentials, tokens);
//   - replay.go: a captured request sent again through the pipeline,
//     marked Froog-Replay for the app and in the ring.
//
// The API reaches the rings through the small interface it declares
// (api.Traffic), which Server implements: cmd/froogd wires the edge of
// the same process into it, or serves Server on an internal listener
// (internal/traffic's Handler) for API processes apart from the edges.
// The rings are not in the store: they are
// many small writes a second that only their owner reads, and they must
// not outlive the process (nothing captured is written to disk).
//
// The path of a request for a private URL, from accept to the tunnel:
//
//  1. listen.go: accept, the TLS handshake; the SNI is not a view, so
//     ALPN picks the server: http/1.1 goes through framing.go's guard
//     to fasthttp, h2 to net/http.
//  2. h1.go or h2.go: the protocol's handler wraps its request in an
//     exchange and calls the pipeline.
//  3. pipeline.go: admit reads the head once (headScan), and core.go
//     decides (policy.go's rules first), the token checked (a refusal is answered with pages.go's
//     page, the token's redirect here); pass strips the head by
//     headers.go's rules; inbox.go answers a request its URL's inbox
//     takes, and hold.go holds any other if the sandbox is stopped.
//  4. proxy.go: forward takes a connection from the pool or dials one
//     through package tunnel, writes the request, reads the answer's
//     head, and hands the answer to the protocol's server (for HTTP/1.1
//     its body streams as fasthttp writes it; for HTTP/2 the reverse
//     proxy copies it); the connection goes back to the pool once the
//     body is through.
//
// Eight files for HTTP/1.1 (listen, framing, h1, pipeline, core,
// headers, hold, proxy), seven for HTTP/2, seven for HTTP/3 (h3 in
// place of listen, then h2's). Websockets stay on HTTP/1.1: HTTP/2's
// and HTTP/3's extended CONNECT is refused as any CONNECT. The pipeline is the spine:
// core.go, headers.go, hold.go and pages.go are called by it and return
// to it, and the forward does not go back to the adapter's file.
//
// Routes come from package edge/route; connections to sandboxes from
// package tunnel. It must not import api, and it asks certs for
// certificates rather than issuing them.
package edge
