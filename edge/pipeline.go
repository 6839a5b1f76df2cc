package edge

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"froog.tech/froog/internal/requestid"
)

// The request path, written once for both protocols: decide → strip →
// hold → proxy → answer → log. Each protocol's adapter (h1.go, h2.go)
// only reads and writes its own structures behind an exchange.

// exchange is one request as the pipeline sees it, whatever its
// protocol. Strings it gives may point into the protocol's buffers: the
// pipeline copies what it keeps past a change to the headers.
type exchange interface {
	// head fills c from the request's head (host, method, target, the
	// token's carriers, upgrade, body) and hp from its Connection
	// headers; false: the head is malformed (400).
	head(c *call, hp *hops) bool
	// headers appends the request's headers as sent, Cookie included, to
	// into; the strings stay good until the headers change.
	headers(into []field) []field
	// replace gives the headers spelt name the values (none: deleted).
	replace(name string, values []string)
	set(name, value string)
	// setQuery replaces the request target's query ("" for none).
	setQuery(q string)
	// body is the request body still to read from the client, or nil when
	// there is none or it was read whole with the head; bodyLen is its
	// length (-1 unknown).
	body() io.Reader
	bodyLen() int64
	// setBody replaces the body with one held in memory.
	setBody(b []byte)
	// setReadDeadline bounds the next read of the client's connection or
	// stream (the body's pace).
	setReadDeadline(t time.Time) error
	// watch is a context that ends when the client goes away, while its
	// request is held; release ends the watch.
	watch() (ctx context.Context, release func())
	// drain reads away what the client still sends of a body the edge
	// will not pass on, so that it reads the answer; closing: the
	// connection closes after the answer whatever is left.
	drain(s *Server, closing bool)
	// setResponse sets one header of the edge's own answer; respond
	// sends it.
	setResponse(name, value string)
	respond(status int, body []byte)
	// frame makes csp, a frame-ancestors policy, the only framing rule
	// of the answer that follows, the app's or the edge's (policy.go).
	frame(csp string)
}

// headScan reads what the pipeline needs of a request's headers, one
// field at a time, in one pass, for both protocols. Names are compared
// without case: HTTP/1.1's are kept as sent.
type headScan struct {
	upgrade, fetchMode, accept string
	upgrades                   int
	tooMany                    bool // more Connection names than the edge honours
}

func (sc *headScan) field(c *call, hp *hops, name, v string) {
	switch {
	case strings.EqualFold(name, "Connection"):
		sc.tooMany = !hp.addConnection(v) || sc.tooMany
	case strings.EqualFold(name, "Upgrade"):
		sc.upgrade = v
		sc.upgrades++
	case strings.EqualFold(name, "Cookie"):
		// HTTP/1.1's adapter gives every cookie it parsed as one header,
		// in the form it sends upstream: the edge reads that, so what it
		// authenticates with is what it strips. The value may live in a
		// buffer the protocol reuses: a token is copied out.
		if containsFold(v, tokenCookieLower) {
			c.tokenCookies = tokenCookies(strings.Clone(v), c.tokenCookies)
		}
	case strings.EqualFold(name, "Sec-Fetch-Mode"):
		sc.fetchMode = v
	case strings.EqualFold(name, "Accept"):
		sc.accept = v
	case strings.EqualFold(name, "Access-Control-Request-Method"):
		c.requestMethod = v
	case strings.EqualFold(name, tokenHeader) && c.tokenHeader == "":
		c.tokenHeader = trimOWS(v)
	case strings.EqualFold(name, startWatchHeader):
		c.startWatch, c.startSeen = true, strings.Clone(trimOWS(v))
	}
}

// done completes c once every field is read (c.body set); false: the
// head is malformed.
func (sc *headScan) done(c *call, hp *hops) bool {
	c.upgrade = hp.upgrade && sc.upgrades == 1 && isWebsocket(sc.upgrade) && !c.body
	c.asksUpgrade = hp.upgrade || sc.upgrades > 0
	c.html = wantsHTML(sc.fetchMode, sc.accept)
	return !sc.tooMany
}

// flow is one request's way through the pipeline: what the head said,
// the decision, and its record. admit and pass are two halves so that an
// HTTP/1.1 request with Expect: 100-continue is decided before its body
// is asked for.
type flow struct {
	c   call
	hp  hops
	d   decision
	rec record
	// cookies backs c.tokenCookies: most requests carry one or two.
	cookies [2]string
	// What strip works in, kept here so that it costs no allocation.
	fields  [20]field
	names   [256]byte
	changes [8]change
	in      countingReader // the request body on its way to the sandbox
}

// change is one header name strip rewrites: deleted, then its kept
// values added back.
type change struct {
	name string
	kept []string
}

// field is one header.
type field struct{ name, value string }

// serve serves one request; f is its flow, zero (the adapter's, so that
// the exchange and its flow are one allocation).
func (s *Server) serve(ex exchange, f *flow, proto string) {
	if s.admit(ex, f, proto) {
		s.pass(ex, f)
	}
}

// admit reads the head and decides: it answers a refusal or the token's
// redirect itself and reports false, or reports true (pass goes on).
func (s *Server) admit(ex exchange, f *flow, proto string) bool {
	f.rec = record{id: requestid.New(), start: time.Now(), proto: proto, status: 200, dial: -1, firstByte: -1}
	f.c.tokenCookies = f.cookies[:0]
	ok := ex.head(&f.c, &f.hp)
	// The log keeps its own copies: the head's bytes belong to the request.
	f.rec.host, f.rec.method = strings.Clone(f.c.host), strings.Clone(f.c.method)
	f.rec.path, f.rec.query = keptTarget(f.c.path, f.c.query)
	f.rec.ip = f.c.ip
	ex.setResponse("X-Request-Id", f.rec.id)
	if !ok {
		ex.drain(s, false)
		s.answer(ex, &f.rec, &errBadRequest, f.c.html)
		return false
	}
	f.d = s.decide(&f.c)
	f.rec.rt = f.d.rt
	f.rec.scrubToken(f.d.token)
	switch d := &f.d; {
	case d.problem != nil:
		ex.drain(s, false)
		s.answer(ex, &f.rec, d.problem, f.c.html)
		return false
	case d.location != "":
		ex.drain(s, false)
		d.redirect(ex.setResponse)
		f.rec.status = 302
		ex.respond(302, nil)
		s.finish(&f.rec)
		return false
	}
	return true
}

// pass takes an admitted request on: its token and the client's claims
// stripped, the edge's X-Forwarded-* set, held while its sandbox starts,
// proxied, answered.
func (s *Server) pass(ex exchange, f *flow) {
	c, d, rec := &f.c, &f.d, &f.rec
	if c.startWatch {
		rec.rt = nil // the edge's own page asking: no exchange of the URL's
		ex.drain(s, false)
		s.watchStart(ex, f)
		return
	}
	if !s.strip(ex, f, c, d, &f.hp) {
		s.answer(ex, rec, &errBadRequest, c.html)
		return
	}
	s.forwarded(ex, c, d, rec)
	s.startCapture(ex, f)
	if s.inbox(ex, f) {
		return
	}
	if csp := frameCSP(d.rt); csp != "" && !c.upgrade {
		ex.frame(csp)
	}
	if sb, held := s.needsHold(d.rt); held {
		p, tooLarge := s.holdBody(ex, d, rec, c.body)
		switch {
		case tooLarge:
			ex.drain(s, true)
			p = s.tooLargeToHold(d.rt, d.port, sb, d.wake, rec.id)
		case p == nil:
			ctx, release := ex.watch()
			p = s.hold(ctx, d.rt, d.port, sb, d.wake, rec.id)
			release()
		}
		if p != nil {
			s.answer(ex, rec, p, c.html)
			return
		}
	}
	if c.upgrade {
		s.upgrade(ex, d, rec)
		return
	}
	s.forgetStale(d.rt.SandboxID)
	if p := d.rt.Policy; p != nil {
		rec.bw = s.bandwidth.of(d.rt.URLID, p.BytesPerSecond)
	}
	rec.captureHeadBody(ex)
	in := &f.in
	*in = countingReader{r: ex.body(), n: &rec.bytesIn, bw: rec.bw, tap: rec.requestTap()}
	s.paced(in, ex.setReadDeadline)
	later, err := s.forward(ex, d, in, rec)
	if err != nil {
		p := s.proxyProblem(d.rt, d.port, rec.id, err, in)
		s.answer(ex, rec, &p, c.html)
		return
	}
	if !later {
		s.finish(rec)
	}
}

// strip makes the request's head what reaches the sandbox: no token in
// the query, a cookie or any header; no hop-by-hop header nor a client's
// claim of where it is; the edge's own X-Forwarded-* and X-Request-Id.
// It reports false, changing nothing, when more than maxDropped distinct
// header spellings would change.
func (s *Server) strip(ex exchange, f *flow, c *call, d *decision, hp *hops) bool {
	if q := stripQuery(c.query); len(q) != len(c.query) {
		ex.setQuery(q)
	}
	if c.upgrade {
		hp.keepUpgrade = true
	}
	// One pass finds each distinct spelling to drop or rewrite and the
	// values it keeps; each is then changed once (a deletion walks every
	// header).
	all := ex.headers(f.fields[:0])
	names, n := f.names[:0], 0
	for _, h := range all {
		if hasName(names, h.name) {
			continue
		}
		if !hp.drop(h.name) {
			if nv, keep := forwardHeader(h.name, h.value, d.token); keep && nv == h.value {
				continue
			}
		}
		if n++; n > maxDropped {
			return false
		}
		names = append(append(names, h.name...), 0)
	}
	if n == 0 {
		return true
	}
	// The values kept, copied: the headers' own bytes change below.
	changes := f.changes[:0]
	for len(names) > 0 {
		i := bytes.IndexByte(names, 0)
		ch := change{name: unsafe.String(&names[0], i)} // in f.names, which stays
		names = names[i+1:]
		if !hp.drop(ch.name) {
			for _, h := range all {
				if h.name == ch.name {
					if nv, keep := forwardHeader(h.name, h.value, d.token); keep {
						ch.kept = append(ch.kept, strings.Clone(nv))
					}
				}
			}
		}
		changes = append(changes, ch)
	}
	for _, ch := range changes {
		ex.replace(ch.name, ch.kept)
	}
	return true
}

// forwarded sets the edge's own headers on the way to the sandbox (a
// replay's Froog-Replay among them: replay.go).
func (s *Server) forwarded(ex exchange, c *call, d *decision, rec *record) {
	if c.upgrade {
		ex.set("Connection", "Upgrade")
		ex.set("Upgrade", "websocket")
	}
	ex.set("X-Forwarded-For", c.ip.String())
	ex.set("X-Forwarded-Proto", "https")
	ex.set("X-Forwarded-Host", d.host)
	ex.set("X-Request-Id", rec.id)
	if rec.replayOf != "" {
		ex.set(replayHeader, rec.replayOf)
	}
}

// forwardHeader is what becomes of one request header the hop rules
// keep: its value, or false to drop it (forwardValue; the Cookie header
// loses the token's cookies, stripTokenCookie).
func forwardHeader(name, v, secret string) (string, bool) {
	if strings.EqualFold(name, "Cookie") {
		rest, _ := stripTokenCookie(v, secret)
		return rest, rest != ""
	}
	return forwardValue(name, v, secret)
}

// holdBody reads the body of a request about to be held into memory:
// it waits there while the sandbox starts. tooLarge: it is too large to
// hold (tooLargeToHold); a problem: the client's body failed.
func (s *Server) holdBody(ex exchange, d *decision, rec *record, body bool) (p *problem, tooLarge bool) {
	r := ex.body()
	if !body || r == nil {
		return nil, false
	}
	if ex.bodyLen() > maxHeldBody {
		return nil, true
	}
	in := countingReader{r: r, n: new(atomic.Int64)}
	s.paced(&in, ex.setReadDeadline)
	buf, err := io.ReadAll(io.LimitReader(&in, maxHeldBody+1))
	if err != nil {
		p := s.proxyProblem(d.rt, d.port, rec.id, err, &in)
		return &p, false
	}
	if len(buf) > maxHeldBody {
		return nil, true
	}
	ex.setBody(buf)
	return nil, false
}

// answer answers with one of the edge's own pages, and logs it.
func (s *Server) answer(ex exchange, rec *record, p *problem, html bool) {
	ex.setResponse("X-Request-Id", rec.id)
	p.headers(html, ex.setResponse)
	body := p.body(html, rec.id)
	rec.status = p.status
	rec.bytesOut.Store(int64(len(body)))
	ex.respond(p.status, body)
	s.finish(rec)
}

// b2s views b as a string without copying; the string must not outlive
// the request that owns b.
func b2s(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// hasName reports whether the NUL-terminated list names holds name.
func hasName(names []byte, name string) bool {
	for len(names) > 0 {
		i := bytes.IndexByte(names, 0)
		if string(names[:i]) == name {
			return true
		}
		names = names[i+1:]
	}
	return false
}

// errAnswerRefused: the app's answer has headers the edge does not pass
// on (errBadAnswer).
var errAnswerRefused = errors.New("the app's answer has headers the edge does not pass on")
