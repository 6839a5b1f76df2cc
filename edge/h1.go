package edge

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"iter"
	"net"
	"strings"
	"time"
	"unsafe"

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

// b2s views b as a string without copying; the string must not outlive
// the request that owns b.
func b2s(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// dropHeaders deletes the headers drop reports, each distinct spelling
// once (a deletion walks every header). It reports false, deleting
// nothing, when there are more than maxDropped spellings to delete.
func dropHeaders(all iter.Seq2[[]byte, []byte], del func([]byte), drop func(string) bool) bool {
	var scratch [512]byte
	names, n := scratch[:0], 0
	for k := range all {
		if !drop(b2s(k)) || hasName(names, b2s(k)) {
			continue
		}
		if n++; n > maxDropped {
			return false
		}
		names = append(append(names, k...), 0)
	}
	for len(names) > 0 {
		i := bytes.IndexByte(names, 0)
		del(names[:i])
		names = names[i+1:]
	}
	return true
}

// headerFold is the value of the first header named name, in any case.
func headerFold(all iter.Seq2[[]byte, []byte], name string) string {
	for k, v := range all {
		if strings.EqualFold(b2s(k), name) {
			return string(v)
		}
	}
	return ""
}

// h1Exchange is one fasthttp request as the pipeline sees it.
type h1Exchange struct {
	s    *Server
	ctx  *fasthttp.RequestCtx
	path []byte // the target's path, as sent
	// continued: the client got 100 Continue, and sends its body.
	continued bool
	f         flow // one allocation for the exchange and its flow
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
		return
	}
	x := &h1Exchange{s: s, ctx: ctx}
	s.serve(x, &x.f, "HTTP/1.1")
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
	closeLingering := func() {
		ctx.SetConnectionClose()
		if fc, ok := ctx.Conn().(*framingConn); ok {
			fc.lingerOnClose()
		}
	}
	if closing {
		ctx.SetConnectionClose()
	}
	switch {
	case req.MayContinue() && !x.continued:
		// Refused before 100 Continue: the client should not send the
		// body, but may have started (RFC 9110 §10.1.1).
		closeLingering()
		return
	case !req.IsBodyStream():
		return // read whole already (up to 64 KiB)
	case closing && req.Header.ContentLength() > maxDrainedBody:
		return
	}
	ctx.Conn().SetReadDeadline(time.Time{}) // paced from here on
	in := countingReader{r: ctx.RequestBodyStream(), n: new(int64)}
	s.paced(&in, ctx.Conn().SetReadDeadline)
	if n, _ := io.Copy(io.Discard, io.LimitReader(&in, maxDrainedBody+1)); n > maxDrainedBody {
		closeLingering()
	} else if in.err != nil {
		ctx.SetConnectionClose()
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

// forward sends the request to the sandbox through the pool and its
// answer on to the client, streaming the body; the exchange is logged
// once the body is through (bodyTail).
func (x *h1Exchange) forward(d *decision, in *countingReader, rec *record) (bool, error) {
	ctx := x.ctx
	req := &ctx.Request
	h := &req.Header
	h.ResetConnectionClose()
	h.SetNoDefaultContentType(true) // a body without a Content-Type stays without one
	// The head is in; the body is paced by its reader (countingReader).
	ctx.Conn().SetReadDeadline(time.Time{})
	if in.r != nil {
		req.SetBodyStream(in, h.ContentLength())
	} else {
		rec.bytesIn = int64(len(req.Body()))
	}
	req.UseHostHeader = true
	up := fasthttp.AcquireResponse()
	up.Header.DisableNormalizing()
	if err := x.s.upstreams.get(d.rt).Do(req, up); err != nil {
		fasthttp.ReleaseResponse(up)
		return false, err
	}
	rh := &ctx.Response.Header
	up.Header.CopyTo(rh)
	rh.SetNoDefaultContentType(true)
	rh.ResetConnectionClose()
	var hp hops
	ok := true
	for k, v := range up.Header.All() {
		if strings.EqualFold(b2s(k), "Connection") {
			ok = ok && hp.addConnection(b2s(v))
		}
	}
	if !ok || !dropHeaders(up.Header.All(), rh.DelBytes, hp.dropResponse) {
		fasthttp.ReleaseResponse(up)
		ctx.Response.Reset()
		return false, errAnswerRefused
	}
	rh.Set("X-Request-Id", rec.id)
	rec.status = up.StatusCode()
	body := up.BodyStream()
	if body == nil {
		rec.bytesOut = int64(len(up.Body()))
		ctx.Response.SetBody(up.Body())
		fasthttp.ReleaseResponse(up)
		return false, nil
	}
	n := up.Header.ContentLength()
	if n < 0 {
		n = -1 // chunked to the client, whatever the sandbox framed it as
	}
	ctx.Response.SetBodyStream(&bodyTail{countingReader: countingReader{r: body, n: &rec.bytesOut}, up: up, x: rec, s: x.s}, n)
	return true, nil
}

// upgradeH1 passes an upgrade (a websocket) through: the request goes to
// the sandbox on a connection of its own, and once the sandbox agrees
// (101) the two connections are joined, with no websocket library in
// between and no idle timeout.
// errUpgradeTimeout: the sandbox did not answer an upgrade in time.
var errUpgradeTimeout = errors.New("the sandbox did not answer the upgrade in 30 s")

func (x *h1Exchange) upgrade(d *decision, rec *record) {
	const html = false // a websocket client reads no page
	s, ctx, rt := x.s, x.ctx, d.rt
	ctx.Conn().SetReadDeadline(time.Time{}) // a websocket has no deadline
	dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	up, err := s.dial(dctx, rt.SandboxID, rt.Port)
	if err != nil {
		p := s.proxyProblem(rt, rec.id, err, nil)
		s.answer(x, rec, &p, html)
		return
	}
	// The sandbox has 30 s to answer the upgrade. A timer that closes the
	// channel bounds it rather than a deadline: a tunnel channel given a
	// deadline reads through a goroutine of its own from then on, which a
	// websocket would keep for its whole life.
	timer := time.AfterFunc(30*time.Second, func() { up.Close() })
	br := bufio.NewReaderSize(up, 4096)
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseResponse(resp)
	resp.Header.DisableNormalizing()
	_, err = up.Write(ctx.Request.Header.Header())
	if err == nil {
		err = resp.ReadLimitBody(br, 1<<20)
	}
	if !timer.Stop() && err == nil {
		err = errUpgradeTimeout // it fired as the answer came: the channel is closed
	}
	if err != nil {
		up.Close()
		p := s.proxyProblem(rt, rec.id, err, nil)
		s.answer(x, rec, &p, html)
		return
	}
	resp.Header.CopyTo(&ctx.Response.Header)
	ctx.Response.Header.SetNoDefaultContentType(true)
	ctx.Response.Header.Set("X-Request-Id", rec.id)
	rec.status = resp.StatusCode()
	if rec.status != fasthttp.StatusSwitchingProtocols {
		up.Close()
		ctx.Response.SetBody(resp.Body())
		rec.bytesOut = int64(len(resp.Body()))
		s.finish(rec)
		return
	}
	if !isWebsocket(headerFold(resp.Header.All(), "Upgrade")) {
		// The edge asked for a websocket; joining the client to anything
		// else (h2c) would take its requests out of the edge's sight.
		up.Close()
		ctx.Response.Reset()
		s.answer(x, rec, &errBadAnswer, html)
		return
	}
	s.finish(rec)
	// From here on the connection carries the websocket, not HTTP: the
	// framing guard lets it through.
	// When fasthttp's reader (64 KiB, for the largest head) holds nothing,
	// the websocket reads the connection itself and the reader goes, as
	// does the upstream's when it holds nothing: an idle websocket then
	// keeps no read buffer at all.
	direct := false
	if fc, ok := ctx.Conn().(*framingConn); ok {
		direct = fc.drained(int(ctx.ConnRequestNum()))
		fc.passThrough()
	}
	var fromSandbox io.Reader = br
	if br.Buffered() == 0 {
		fromSandbox = up
	}
	ctx.Hijack(func(c net.Conn) {
		if u, ok := c.(interface{ UnsafeConn() net.Conn }); ok && direct {
			c = u.UnsafeConn()
		}
		// In a goroutine of its own, so that fasthttp's, which holds its
		// reader, ends.
		go s.pipe(c, up, fromSandbox)
	})
}
