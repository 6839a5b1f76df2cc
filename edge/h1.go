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

// serveH1 serves one HTTP/1.1 request: the core decides, then the proxy.
func (s *Server) serveH1(ctx *fasthttp.RequestCtx) {
	req := &ctx.Request
	h := &req.Header
	x := &exchange{id: requestid.New(), start: time.Now(), proto: "HTTP/1.1", status: fasthttp.StatusOK}
	uri := h.RequestURI()
	path, query := uri, []byte(nil)
	if i := bytes.IndexByte(uri, '?'); i >= 0 {
		path, query = uri[:i], uri[i+1:]
	}
	var cookies [2]string
	hd := h1Head{tokenCookies: cookies[:0]}
	scanH1(h, &hd)
	body := h.ContentLength() > 0 || h.ContentLength() == -1 // -1 chunked; -2, a request without a body
	c := call{host: b2s(h.Host()), method: b2s(h.Method()), path: b2s(path), query: b2s(query),
		tokenHeader: hd.token, tokenCookies: hd.tokenCookies, requestMethod: hd.requestMethod,
		upgrade:     hd.hops.upgrade && hd.upgrades == 1 && isWebsocket(hd.upgrade) && !body,
		asksUpgrade: hd.hops.upgrade || hd.upgrades > 0,
		body:        body,
		html:        wantsHTML(hd.fetchMode, hd.accept),
	}
	if a, ok := ctx.RemoteAddr().(*net.TCPAddr); ok {
		c.ip = a.AddrPort().Addr().Unmap()
	}
	// The log keeps its own copies: these bytes belong to the request.
	x.host, x.method, x.path = string(h.Host()), string(h.Method()), string(path)
	if hd.tooMany {
		s.h1Problem(ctx, x, &errBadRequest, c.html)
		return
	}
	d := s.decide(&c)
	switch {
	case d.problem != nil:
		s.h1Problem(ctx, x, d.problem, c.html)
		return
	case d.location != "":
		ctx.Response.Header.Set("X-Request-Id", x.id)
		d.redirect(ctx.Response.Header.Set)
		ctx.SetStatusCode(fasthttp.StatusFound)
		x.status = fasthttp.StatusFound
		s.finish(x)
		return
	}

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
		if p := s.holdH1(ctx, x, &d, sb, c.body); p != nil {
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
