package edge

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// The HTTP/1.1 front end: fasthttp's server and one fasthttp client per
// sandbox port, around the same core as HTTP/2. Header names and the
// request target pass as sent: names are not normalised and the path is
// not cleaned (fasthttp writes the special headers it manages itself,
// Host, Content-Length, Content-Type, User-Agent, Cookie and
// Transfer-Encoding, in their canonical spelling).

// maxHeader bounds a request's or response's head: 64 KiB of headers and
// the request line.
const maxHeader = 64<<10 + 4096

func (s *Server) newH1Server() *fasthttp.Server {
	return &fasthttp.Server{
		Handler:                       s.serveH1,
		ErrorHandler:                  s.h1Error,
		ExpectHandler:                 s.expectH1,
		ReadBufferSize:                maxHeader,
		ReadTimeout:                   s.o.ReadHeaderTimeout, // the body's read deadline is lifted in serveH1
		IdleTimeout:                   s.o.IdleTimeout,
		MaxRequestBodySize:            64 << 10, // larger bodies stream
		StreamRequestBody:             true,
		DisableHeaderNamesNormalizing: true,
		DisablePreParseMultipartForm:  true,
		NoDefaultServerHeader:         true,
		NoDefaultContentType:          true,
		CloseOnShutdown:               true,
		KeepHijackedConns:             true, // a websocket's connection is closed by its own pipe
		Logger:                        discardLogger{},
	}
}

type discardLogger struct{}

func (discardLogger) Printf(string, ...any) {}

// h1Error answers a request fasthttp could not read. A connection on
// which nothing of a request came never gets here: the guard ends it
// quietly (framingConn.Read). A request cut by a read deadline, the
// start of its body read before the handler runs, is answered 408.
func (s *Server) h1Error(ctx *fasthttp.RequestCtx, err error) {
	status := fasthttp.StatusBadRequest
	var tooBig *fasthttp.ErrSmallBuffer
	switch {
	case errors.As(err, &tooBig):
		status = fasthttp.StatusRequestHeaderFieldsTooLarge
	case isTimeout(err):
		status = fasthttp.StatusRequestTimeout
	}
	ctx.Response.Reset()
	ctx.SetStatusCode(status)
	ctx.SetConnectionClose()
}

// h1Exchange is one fasthttp request as the pipeline sees it.
type h1Exchange struct {
	s    *Server
	ctx  *fasthttp.RequestCtx
	path []byte // the target's path, as sent
	// continued: the client got 100 Continue, and sends its body.
	continued bool
	// csp is the URL's framing rule (frame), or "".
	csp string
	f   flow // one allocation for the exchange and its flow
}

// h1Decided keys the exchange expectH1 admitted, in the request's user
// values, for serveH1.
type h1Decided struct{}

// expectH1 decides a request that sent Expect: 100-continue on its head
// alone, before the client sends its body: a refusal is the answer (401,
// 404, 429...; fasthttp then closes the connection, and the client never
// sends the body), and only a request the edge lets in gets 100
// Continue. serveH1 takes it on from there.
func (s *Server) expectH1(ctx *fasthttp.RequestCtx) int {
	x := &h1Exchange{s: s, ctx: ctx}
	if !s.admit(x, &x.f, "HTTP/1.1") {
		x.advertise()
		return ctx.Response.StatusCode()
	}
	ctx.SetUserValue(h1Decided{}, x)
	return fasthttp.StatusContinue
}

// serveH1 serves one HTTP/1.1 request through the pipeline.
func (s *Server) serveH1(ctx *fasthttp.RequestCtx) {
	if x, _ := ctx.UserValue(h1Decided{}).(*h1Exchange); x != nil {
		x.continued = true
		s.pass(x, &x.f)
		x.reframe()
		x.advertise()
		return
	}
	x := &h1Exchange{s: s, ctx: ctx}
	s.serve(x, &x.f, "HTTP/1.1")
	x.reframe()
	x.advertise()
}

// advertise gives the answer the edge's Alt-Svc (Options.HTTP3), in
// place of any the app sent (headers.go drops it anyway).
func (x *h1Exchange) advertise() {
	if x.s.altSvc != "" {
		x.ctx.Response.Header.Set("Alt-Svc", x.s.altSvc)
	}
}

// frame: fasthttp writes the answer's head once the handler returns,
// the app's answer streamed or not; serveH1 rewrites it then.
func (x *h1Exchange) frame(csp string) { x.csp = csp }

func (x *h1Exchange) reframe() {
	if x.csp != "" {
		reframeH1(&x.ctx.Response.Header, x.csp)
	}
}

func (x *h1Exchange) head(c *call, hp *hops) bool {
	ctx := x.ctx
	h := &ctx.Request.Header
	uri := h.RequestURI()
	path, query := uri, []byte(nil)
	if i := bytes.IndexByte(uri, '?'); i >= 0 {
		path, query = uri[:i], uri[i+1:]
	}
	x.path = path
	*c = call{host: b2s(h.Host()), method: b2s(h.Method()), path: b2s(path), query: b2s(query), tokenCookies: c.tokenCookies,
		body: h.ContentLength() > 0 || h.ContentLength() == -1, // -1 chunked; -2, a request without a body
	}
	if a, ok := ctx.RemoteAddr().(*net.TCPAddr); ok {
		c.ip = a.AddrPort().Addr().Unmap()
	}
	if h.ConnectionClose() {
		ctx.SetConnectionClose() // the client's connection closes; the tunnel's stays
	}
	var sc headScan
	for k, v := range h.All() {
		sc.field(c, hp, b2s(k), b2s(v))
	}
	return sc.done(c, hp)
}

func (x *h1Exchange) headers(into []field) []field {
	for k, v := range x.ctx.Request.Header.All() {
		into = append(into, field{b2s(k), b2s(v)})
	}
	return into
}

func (x *h1Exchange) replace(name string, values []string) {
	h := &x.ctx.Request.Header
	h.Del(name)
	for _, v := range values {
		h.Add(name, v)
	}
}

func (x *h1Exchange) set(name, value string)     { x.ctx.Request.Header.Set(name, value) }
func (x *h1Exchange) setResponse(name, v string) { x.ctx.Response.Header.Set(name, v) }
func (x *h1Exchange) bodyLen() int64             { return int64(x.ctx.Request.Header.ContentLength()) }
func (x *h1Exchange) setBody(b []byte)           { x.ctx.Request.SetBody(b) }

func (x *h1Exchange) setQuery(q string) {
	nu := append([]byte(nil), x.path...)
	if q != "" {
		nu = append(append(nu, '?'), q...)
	}
	x.ctx.Request.SetRequestURIBytes(nu)
}

// body: fasthttp reads a body of up to 64 KiB whole with the head.
func (x *h1Exchange) body() io.Reader {
	if !x.ctx.Request.IsBodyStream() {
		return nil
	}
	return x.ctx.RequestBodyStream()
}

// headBody is a body fasthttp read whole with the head (inboxBody).
func (x *h1Exchange) headBody() []byte { return x.ctx.Request.Body() }

func (x *h1Exchange) setReadDeadline(t time.Time) error { return x.ctx.Conn().SetReadDeadline(t) }

func (x *h1Exchange) respond(status int, body []byte) {
	x.ctx.SetStatusCode(status)
	x.ctx.SetBody(body)
}

// drain reads away the body of a request the edge answers itself, up
// to maxDrainedBody at the pace bodies must keep: a client cut off while
// it still sends sees its connection reset, not the answer. Past the
// bound, or when the body fails, the connection closes after the answer.
// A request still waiting for 100 Continue has nothing to drain.
func (x *h1Exchange) drain(s *Server, closing bool) {
	ctx := x.ctx
	req := &ctx.Request
	if closing {
		ctx.SetConnectionClose()
	}
	switch {
	case req.MayContinue() && !x.continued:
		// Refused before 100 Continue: the client should not send the
		// body, but may have started (RFC 9110 §10.1.1).
		closeLingering(ctx)
		return
	case !req.IsBodyStream():
		return // read whole already (up to 64 KiB)
	case closing && req.Header.ContentLength() > maxDrainedBody:
		return
	}
	ctx.Conn().SetReadDeadline(time.Time{}) // paced from here on
	in := countingReader{r: ctx.RequestBodyStream(), n: new(atomic.Int64)}
	s.paced(&in, ctx.Conn().SetReadDeadline)
	if n, _ := io.Copy(io.Discard, io.LimitReader(&in, maxDrainedBody+1)); n > maxDrainedBody {
		closeLingering(ctx)
	} else if in.err != nil {
		ctx.SetConnectionClose()
	}
}

// closeLingering closes the connection after the answer, reading away
// first what the client still sends of a body no one read: closed with
// bytes unread, a connection ends in a reset that can take the answer
// with it.
func closeLingering(ctx *fasthttp.RequestCtx) {
	ctx.SetConnectionClose()
	if fc, ok := ctx.Conn().(*framingConn); ok {
		fc.lingerOnClose()
	}
}

// watch: the hold ends early when the client goes away. Nothing else
// reads its connection meanwhile, so the guard can look.
func (x *h1Exchange) watch() (context.Context, func()) {
	hctx, cancel := context.WithCancel(context.Background())
	fc, ok := x.ctx.Conn().(*framingConn)
	if !ok {
		return hctx, cancel
	}
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for hctx.Err() == nil {
			if !fc.alive(100 * time.Millisecond) {
				cancel()
			}
		}
	}()
	return hctx, func() {
		cancel()
		fc.Conn.SetReadDeadline(time.Unix(1, 0)) // ends a read under way now
		<-watched                                // no read of the guard's outlives the hold
	}
}
