package edge

import (
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"froog.tech/froog/edge/route"
	"froog.tech/froog/store"
)

// A URL's policy, set by its owner (route.Policy): who may come in (the
// connection's source address, never a header's), how often, and who
// may frame its answers (its bandwidth cap is bandwidth.go's). decide applies the first two once a request's
// route is known and before anything its token would do; pass hands the
// third to the exchange before the app answers.

var errIPRefused = problem{status: http.StatusForbidden, code: "ip_not_allowed", title: "Not from this address",
	message: "This URL takes requests only from the network addresses its owner allows.", rfc9457: true}

func errURLRateLimited(wait int) problem {
	return problem{status: http.StatusTooManyRequests, code: "rate_limited", title: "Too many requests",
		message: "Your network address sent more requests than this URL takes from one client. Try again in a few seconds.", retryAfter: wait, rfc9457: true}
}

// refusedByPolicy is the problem rt's policy answers c with, or nil.
// count: c is counted against the URL's rate limit (false when the
// request was counted on an earlier look at the same URL).
func (s *Server) refusedByPolicy(c *call, rt *route.Route, count bool) *problem {
	if rt == nil || rt.Policy == nil {
		return nil
	}
	if !rt.Policy.Allows(c.ip) {
		return &errIPRefused
	}
	if rl := rt.Policy.RateLimit; rl != nil && count {
		if ok, wait := s.urlLimits.allow(rt.URLID, *rl, c.ip.Unmap(), s.o.Now()); !ok {
			p := errURLRateLimited(wait)
			return &p
		}
	}
	return nil
}

// urlLimits holds the rate limiters of URLs, by URL id: a route is
// remade at every change of its URL, and its visitors' buckets outlive
// it.
type urlLimits struct {
	mu sync.Mutex
	m  map[string]*urlLimit
}

type urlLimit struct {
	rate store.RateLimit
	l    *limiter
	last time.Time // its last request
}

// maxURLLimits is how many limiters are kept before idle ones go.
const maxURLLimits = 4096

// allow takes one request of ip from the bucket URL id keeps for it
// (limiter.allow); a changed rate starts the URL's buckets again.
func (u *urlLimits) allow(id string, rate store.RateLimit, ip netip.Addr, now time.Time) (bool, int) {
	u.mu.Lock()
	e := u.m[id]
	if e == nil || e.rate != rate {
		if u.m == nil {
			u.m = map[string]*urlLimit{}
		}
		if e == nil && len(u.m) >= maxURLLimits {
			u.sweep(now)
		}
		e = &urlLimit{rate: rate, l: newLimiter(rate.PerSecond, rate.Burst)}
		u.m[id] = e
	}
	e.last = now
	u.mu.Unlock()
	return e.l.allow(ip, now)
}

// sweep forgets the limiters idle long enough for each of their buckets
// to be full again: a new one is the same. u.mu is held.
func (u *urlLimits) sweep(now time.Time) {
	for id, e := range u.m {
		if now.Sub(e.last).Seconds()*e.rate.PerSecond >= float64(e.rate.Burst) {
			delete(u.m, id)
		}
	}
}

// The URL's framing rule: csp is a policy of one directive,
// "frame-ancestors …", and it is the answer's only framing rule: every
// frame-ancestors directive of the app's Content-Security-Policy goes
// (its other directives stay), and so does X-Frame-Options (which a
// browser would obey besides, or instead).

const (
	cspHeader     = "Content-Security-Policy"
	xFrameOptions = "X-Frame-Options"
)

// frameCSP is the policy route rt's answers carry, or "" (the app's
// framing rules stand).
func frameCSP(rt *route.Route) string {
	if rt.Policy == nil || rt.Policy.FrameAncestors == "" {
		return ""
	}
	return "frame-ancestors " + rt.Policy.FrameAncestors
}

// withoutFrameAncestors is one Content-Security-Policy value without its
// frame-ancestors directives: a value may hold several policies (",")
// of several directives (";"). Policies left empty go; "" when nothing
// is left.
func withoutFrameAncestors(v string) string {
	if !containsFold(v, "frame-ancestors") {
		return v
	}
	var pols []string
	for _, pol := range strings.Split(v, ",") {
		var dirs []string
		for _, dir := range strings.Split(pol, ";") {
			dir = trimOWS(dir)
			name := dir // up to the first whitespace
			if i := strings.IndexAny(dir, " \t"); i >= 0 {
				name = dir[:i]
			}
			if dir == "" || strings.EqualFold(name, "frame-ancestors") {
				continue
			}
			dirs = append(dirs, dir)
		}
		if len(dirs) > 0 {
			pols = append(pols, strings.Join(dirs, "; "))
		}
	}
	return strings.Join(pols, ", ")
}

// reframe gives the Content-Security-Policy values an answer goes out
// with: the app's, each without frame-ancestors, then csp.
func reframe(app []string, csp string) []string {
	out := make([]string, 0, len(app)+1)
	for _, v := range app {
		if v = withoutFrameAncestors(v); v != "" {
			out = append(out, v)
		}
	}
	return append(out, csp)
}

// reframeH1 makes csp the framing rule of a fasthttp answer, whose
// header names are as the app spelt them.
func reframeH1(h *fasthttp.ResponseHeader, csp string) {
	var app []string
	var drop [][]byte
	for k, v := range h.All() {
		switch name := b2s(k); {
		case strings.EqualFold(name, cspHeader):
			app = append(app, string(v))
		case !strings.EqualFold(name, xFrameOptions):
			continue
		}
		drop = append(drop, append([]byte(nil), k...))
	}
	for _, k := range drop {
		h.DelBytes(k)
	}
	for _, v := range reframe(app, csp) {
		h.Add(cspHeader, v)
	}
}

// reframeHeader makes csp the framing rule of a net/http answer.
func reframeHeader(h http.Header, csp string) {
	var app []string
	for k, vs := range h {
		switch {
		case strings.EqualFold(k, cspHeader):
			app = append(app, vs...)
		case !strings.EqualFold(k, xFrameOptions):
			continue
		}
		delete(h, k)
	}
	h[cspHeader] = reframe(app, csp)
}

// reframer gives a net/http answer the URL's framing rule when its head
// is written.
type reframer struct {
	http.ResponseWriter
	csp  string
	done bool
}

func (w *reframer) WriteHeader(code int) {
	if !w.done && code >= 200 {
		w.done = true
		reframeHeader(w.Header(), w.csp)
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *reframer) Write(b []byte) (int, error) {
	if !w.done {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

func (w *reframer) Flush() {
	if !w.done {
		w.WriteHeader(http.StatusOK)
	}
	http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the connection's writer
// (read deadlines, the body's pace).
func (w *reframer) Unwrap() http.ResponseWriter { return w.ResponseWriter }
