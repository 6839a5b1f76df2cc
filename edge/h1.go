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

	"froog.tech/froog/edge/route"
	"froog.tech/froog/internal/requestid"
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

// h1Head is what one pass over a request's headers finds. Names are
// compared without case: fasthttp keeps them as sent.
type h1Head struct {
	hops                                    hops
	tooMany                                 bool // more Connection names than the edge honours
	upgrade                                 string
	upgrades                                int
	fetchMode, accept, requestMethod, token string
	tokenCookies                            []string
}

func scanH1(h *fasthttp.RequestHeader, hd *h1Head) {
	for k, v := range h.All() {
		switch name := b2s(k); {
		case strings.EqualFold(name, "Connection"):
			if !hd.hops.addConnection(b2s(v)) {
				hd.tooMany = true
			}
		case strings.EqualFold(name, "Upgrade"):
			hd.upgrade = b2s(v)
			hd.upgrades++
		case strings.EqualFold(name, "Cookie"):
			// fasthttp gives every cookie it parsed as one header, in the
			// form it sends upstream: the edge reads that, so what it
			// authenticates with is what it strips. The value lives in a
			// buffer fasthttp reuses: a token is copied out.
			if containsFold(b2s(v), tokenCookieLower) {
				hd.tokenCookies = tokenCookies(string(v), hd.tokenCookies)
			}
		case strings.EqualFold(name, "Sec-Fetch-Mode"):
			hd.fetchMode = b2s(v)
		case strings.EqualFold(name, "Accept"):
			hd.accept = b2s(v)
		case strings.EqualFold(name, "Access-Control-Request-Method"):
			hd.requestMethod = b2s(v)
		case strings.EqualFold(name, tokenHeader) && hd.token == "":
			hd.token = trimOWS(b2s(v))
		}
	}
}

// dropHeaders deletes the headers drop reports, each distinct spelling
// once (a deletion walks every header). It reports false, deleting
// nothing, when there are more than maxDropped spellings to delete.
func dropHeaders(all iter.Seq2[[]byte, []byte], del func([]byte), drop func(string) bool) bool {
	var scratch [512]byte
	names, n := scratch[:0], 0
	for k := range all {
		if !drop(b2s(k)) || hasName(names, k) {
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

// scrubH1 gives each request header (Cookie aside) the value
// forwardValue says, or drops it; each distinct spelling that changes is
// rewritten once. It reports false, changing nothing, when more than
// maxDropped spellings would change.
func scrubH1(h *fasthttp.RequestHeader, secret string) bool {
	var scratch [256]byte
	names, n := scratch[:0], 0
	for k, v := range h.All() {
		if strings.EqualFold(b2s(k), "Cookie") || hasName(names, k) {
			continue
		}
		if nv, keep := forwardValue(b2s(k), b2s(v), secret); keep && nv == b2s(v) {
			continue
		}
		if n++; n > maxDropped {
			return false
		}
		names = append(append(names, k...), 0)
	}
	for len(names) > 0 {
		i := bytes.IndexByte(names, 0)
		name := names[:i]
		var kept []string
		for k, v := range h.All() {
			if bytes.Equal(k, name) {
				if nv, keep := forwardValue(b2s(k), b2s(v), secret); keep {
					kept = append(kept, strings.Clone(nv)) // v is in fasthttp's buffer
				}
			}
		}
		h.DelBytes(name)
		for _, v := range kept {
			h.AddBytesK(name, v)
		}
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

// hasName reports whether the NUL-terminated list names holds name.
func hasName(names, name []byte) bool {
	for len(names) > 0 {
		i := bytes.IndexByte(names, 0)
		if bytes.Equal(names[:i], name) {
			return true
		}
		names = names[i+1:]
	}
	return false
}

// h1Call is one HTTP/1.1 request as the core sees it, read from its
// head, and the core's decision.
type h1Call struct {
	x       exchange
	c       call
	hd      h1Head
	d       decision
	path    []byte
	cookies [2]string
	// answered: the edge has answered (a refusal or the token's
	// redirect); nothing goes to the sandbox.
	answered bool
}

// h1Decided keys the h1Call that expectH1 made, in the request's user
// values, for serveH1.
type h1Decided struct{}

// decideH1 reads r's head and has the core decide; a refusal or a
// redirect is answered here (r.answered).
func (s *Server) decideH1(ctx *fasthttp.RequestCtx, r *h1Call) {
	h := &ctx.Request.Header
	r.x = exchange{id: requestid.New(), start: time.Now(), proto: "HTTP/1.1", status: fasthttp.StatusOK}
	uri := h.RequestURI()
	path, query := uri, []byte(nil)
	if i := bytes.IndexByte(uri, '?'); i >= 0 {
		path, query = uri[:i], uri[i+1:]
	}
	r.path = path
	r.hd = h1Head{tokenCookies: r.cookies[:0]}
	hd := &r.hd
	scanH1(h, hd)
	body := h.ContentLength() > 0 || h.ContentLength() == -1 // -1 chunked; -2, a request without a body
	r.c = call{host: b2s(h.Host()), method: b2s(h.Method()), path: b2s(path), query: b2s(query),
		tokenHeader: hd.token, tokenCookies: hd.tokenCookies, requestMethod: hd.requestMethod,
		upgrade:     hd.hops.upgrade && hd.upgrades == 1 && isWebsocket(hd.upgrade) && !body,
		asksUpgrade: hd.hops.upgrade || hd.upgrades > 0,
		body:        body,
		html:        wantsHTML(hd.fetchMode, hd.accept),
	}
	if a, ok := ctx.RemoteAddr().(*net.TCPAddr); ok {
		r.c.ip = a.AddrPort().Addr().Unmap()
	}
	// The log keeps its own copies: these bytes belong to the request.
	x := &r.x
	x.host, x.method, x.path = string(h.Host()), string(h.Method()), string(path)
	r.answered = true
	if hd.tooMany {
		s.refuseH1(ctx, x, &errBadRequest, r.c.html)
		return
	}
	r.d = s.decide(&r.c)
	switch d := &r.d; {
	case d.problem != nil:
		s.refuseH1(ctx, x, d.problem, r.c.html)
	case d.location != "":
		s.drainH1(ctx)
		ctx.Response.Header.Set("X-Request-Id", x.id)
		d.redirect(ctx.Response.Header.Set)
		ctx.SetStatusCode(fasthttp.StatusFound)
		x.status = fasthttp.StatusFound
		s.finish(x)
	default:
		r.answered = false
	}
}

// expectH1 decides a request that sent Expect: 100-continue on its head
// alone, before the client sends its body: a refusal is the answer (401,
// 404, 429...; fasthttp then closes the connection, and the client never
// sends the body), and only a request the edge lets in gets 100
// Continue. serveH1 takes the decision from there.
func (s *Server) expectH1(ctx *fasthttp.RequestCtx) int {
	r := &h1Call{}
	s.decideH1(ctx, r)
	if r.answered {
		return ctx.Response.StatusCode()
	}
	ctx.SetUserValue(h1Decided{}, r)
	return fasthttp.StatusContinue
}

// refuseH1 answers a request the edge will not pass on, once its body is
// read away (drainH1).
func (s *Server) refuseH1(ctx *fasthttp.RequestCtx, x *exchange, p *problem, html bool) {
	s.drainH1(ctx)
	s.h1Problem(ctx, x, p, html)
}

// drainH1 reads away the body of a request the edge answers itself, up
// to maxDrainedBody at the pace bodies must keep: a client cut off while
// it still sends sees its connection reset, not the answer. Past the
// bound, or when the body fails, the connection closes after the answer.
// A request still waiting for 100 Continue has nothing to drain.
func (s *Server) drainH1(ctx *fasthttp.RequestCtx) {
	req := &ctx.Request
	closeLingering := func() {
		ctx.SetConnectionClose()
		if fc, ok := ctx.Conn().(*framingConn); ok {
			fc.lingerOnClose()
		}
	}
	switch {
	case req.MayContinue():
		// Refused before 100 Continue: the client should not send the
		// body, but may have started (RFC 9110 §10.1.1).
		closeLingering()
		return
	case !req.IsBodyStream():
		return // read whole already (up to 64 KiB)
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

// serveH1 serves one HTTP/1.1 request: the core decides, then the proxy.
func (s *Server) serveH1(ctx *fasthttp.RequestCtx) {
	r, _ := ctx.UserValue(h1Decided{}).(*h1Call)
	if r == nil {
		r = &h1Call{}
		s.decideH1(ctx, r)
	}
	if r.answered {
		return
	}
	req := &ctx.Request
	h := &req.Header
	x, c, hd, d, path := &r.x, &r.c, &r.hd, &r.d, r.path

	// What reaches the sandbox: no token in the query, the cookie or the
	// header; the edge's own X-Forwarded-* and X-Request-Id.
	if q := stripQuery(c.query); len(q) != len(c.query) {
		nu := append(append([]byte(nil), path...), '?')
		if q == "" {
			nu = nu[:len(nu)-1]
		}
		req.SetRequestURIBytes(append(nu, q...))
	}
	if h.ConnectionClose() {
		ctx.SetConnectionClose() // the client's connection closes; the tunnel's stays
	}
	if !dropHeaders(h.All(), h.DelBytes, hd.hops.drop) {
		s.h1Problem(ctx, x, &errBadRequest, c.html)
		return
	}
	h.ResetConnectionClose()
	for k, v := range h.All() {
		if strings.EqualFold(b2s(k), "Cookie") {
			if rest, changed := stripTokenCookie(b2s(v), d.token); changed {
				h.DelAllCookies()
				if rest != "" {
					h.Set("Cookie", rest)
				}
			}
			break
		}
	}
	if !scrubH1(h, d.token) {
		s.h1Problem(ctx, x, &errBadRequest, c.html)
		return
	}
	if c.upgrade {
		h.Set("Connection", "Upgrade")
		h.Set("Upgrade", "websocket")
	}
	h.SetNoDefaultContentType(true) // a body without a Content-Type stays without one
	h.Set("X-Forwarded-For", c.ip.String())
	h.Set("X-Forwarded-Proto", "https")
	h.Set("X-Forwarded-Host", d.host)
	h.Set("X-Request-Id", x.id)
	// The head is in; the body is paced by its reader (countingReader),
	// and a websocket has no deadline.
	ctx.Conn().SetReadDeadline(time.Time{})

	if sb, held := s.needsHold(d.rt); held {
		if p := s.holdH1(ctx, x, d, sb, c.body); p != nil {
			s.h1Problem(ctx, x, p, c.html)
			return
		}
	}
	if c.upgrade {
		s.upgradeH1(ctx, x, d.rt)
		return
	}
	s.forgetStale(d.rt.SandboxID)
	in := countingReader{n: &x.bytesIn}
	if req.IsBodyStream() {
		in.r = ctx.RequestBodyStream()
		s.paced(&in, ctx.Conn().SetReadDeadline)
		req.SetBodyStream(&in, h.ContentLength())
	} else {
		x.bytesIn = int64(len(req.Body()))
	}
	req.UseHostHeader = true
	up := fasthttp.AcquireResponse()
	up.Header.DisableNormalizing()
	if err := s.upstreams.get(d.rt).Do(req, up); err != nil {
		fasthttp.ReleaseResponse(up)
		p := s.proxyProblem(d.rt, x.id, err, &in)
		s.h1Problem(ctx, x, &p, c.html)
		return
	}
	s.answerH1(ctx, x, up)
}

// holdH1 holds a request while its sandbox starts (hold.go), with its
// body in memory.
func (s *Server) holdH1(ctx *fasthttp.RequestCtx, x *exchange, d *decision, sb *route.Sandbox, body bool) *problem {
	req := &ctx.Request
	if body && req.IsBodyStream() {
		if n := req.Header.ContentLength(); n > maxHeldBody {
			// Read the body away first (up to a bound): a client cut off
			// while it still sends sees its connection reset, not the
			// answer.
			if n <= maxDrainedBody {
				in := countingReader{r: ctx.RequestBodyStream(), n: new(int64)}
				s.paced(&in, ctx.Conn().SetReadDeadline)
				io.Copy(io.Discard, &in)
			}
			ctx.SetConnectionClose()
			return s.tooLargeToHold(d.rt, sb, d.wake, x.id)
		}
		in := countingReader{r: ctx.RequestBodyStream(), n: &x.bytesIn}
		s.paced(&in, ctx.Conn().SetReadDeadline)
		buf, err := io.ReadAll(io.LimitReader(&in, maxHeldBody+1))
		x.bytesIn = 0 // counted again on the way to the sandbox
		if err != nil {
			p := s.proxyProblem(d.rt, x.id, err, &in)
			return &p
		}
		if len(buf) > maxHeldBody {
			return s.tooLargeToHold(d.rt, sb, d.wake, x.id)
		}
		req.SetBody(buf)
	}
	// The hold ends early when the client goes away: nothing else reads
	// its connection meanwhile, so the guard can look.
	hctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if fc, ok := ctx.Conn().(*framingConn); ok {
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			for hctx.Err() == nil {
				if !fc.alive(100 * time.Millisecond) {
					cancel()
				}
			}
		}()
		defer func() {
			cancel()
			fc.Conn.SetReadDeadline(time.Unix(1, 0)) // ends a read under way now
			<-watched                                // no read of the guard's outlives the hold
		}()
	}
	return s.hold(hctx, d.rt, sb, d.wake, x.id)
}

// answerH1 sends the sandbox's answer up on to the client, streaming its
// body; the exchange is logged once the body is through.
func (s *Server) answerH1(ctx *fasthttp.RequestCtx, x *exchange, up *fasthttp.Response) {
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
		s.h1Problem(ctx, x, &errBadAnswer, false)
		return
	}
	rh.Set("X-Request-Id", x.id)
	x.status = up.StatusCode()
	body := up.BodyStream()
	if body == nil {
		x.bytesOut = int64(len(up.Body()))
		ctx.Response.SetBody(up.Body())
		fasthttp.ReleaseResponse(up)
		s.finish(x)
		return
	}
	n := up.Header.ContentLength()
	if n < 0 {
		n = -1 // chunked to the client, whatever the sandbox framed it as
	}
	ctx.Response.SetBodyStream(&bodyTail{countingReader: countingReader{r: body, n: &x.bytesOut}, up: up, x: x, s: s}, n)
}

// h1Problem answers with one of the edge's own pages.
func (s *Server) h1Problem(ctx *fasthttp.RequestCtx, x *exchange, p *problem, html bool) {
	rh := &ctx.Response.Header
	rh.Set("X-Request-Id", x.id)
	p.headers(html, rh.Set)
	ctx.SetStatusCode(p.status)
	body := p.body(html, x.id)
	ctx.SetBody(body)
	x.status, x.bytesOut = p.status, int64(len(body))
	s.finish(x)
}

// upgradeH1 passes an upgrade (a websocket) through: the request goes to
// the sandbox on a connection of its own, and once the sandbox agrees
// (101) the two connections are joined, with no websocket library in
// between and no idle timeout.
// errUpgradeTimeout: the sandbox did not answer an upgrade in time.
var errUpgradeTimeout = errors.New("the sandbox did not answer the upgrade in 30 s")

func (s *Server) upgradeH1(ctx *fasthttp.RequestCtx, x *exchange, rt *route.Route) {
	const html = false // a websocket client reads no page
	dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	up, err := s.dial(dctx, rt.SandboxID, rt.Port)
	if err != nil {
		p := s.proxyProblem(rt, x.id, err, nil)
		s.h1Problem(ctx, x, &p, html)
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
		p := s.proxyProblem(rt, x.id, err, nil)
		s.h1Problem(ctx, x, &p, html)
		return
	}
	resp.Header.CopyTo(&ctx.Response.Header)
	ctx.Response.Header.SetNoDefaultContentType(true)
	ctx.Response.Header.Set("X-Request-Id", x.id)
	x.status = resp.StatusCode()
	if x.status != fasthttp.StatusSwitchingProtocols {
		up.Close()
		ctx.Response.SetBody(resp.Body())
		x.bytesOut = int64(len(resp.Body()))
		s.finish(x)
		return
	}
	if !isWebsocket(headerFold(resp.Header.All(), "Upgrade")) {
		// The edge asked for a websocket; joining the client to anything
		// else (h2c) would take its requests out of the edge's sight.
		up.Close()
		ctx.Response.Reset()
		s.h1Problem(ctx, x, &errBadAnswer, html)
		return
	}
	s.finish(x)
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
