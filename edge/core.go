package edge

import (
	"context"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"froog.tech/froog/edge/route"
	"froog.tech/froog/names"
	"froog.tech/froog/store"
)

// call is what the core knows of one request, whatever its protocol. Its
// strings may point into a protocol's buffers: the core keeps none of
// them past decide.
type call struct {
	host   string
	method string
	path   string // raw, as sent
	query  string // raw, without the '?'
	// tokenHeader is the first X-Froog-Url-Token header; tokenCookies
	// the values of every __Host-froog_url cookie.
	tokenHeader  string
	tokenCookies []string
	// requestMethod is Access-Control-Request-Method (a CORS preflight's).
	requestMethod string
	upgrade       bool // a websocket upgrade the edge would pass through
	asksUpgrade   bool // Connection: upgrade or an Upgrade header, whatever the edge does with it
	body          bool // the request has a body (any length but 0)
	html          bool // a browser navigation: errors are pages
	// startWatch: a Starting page's watch (starting.go), which the edge
	// answers itself; startSeen is the version the page shows.
	startWatch bool
	startSeen  string
	ip         netip.Addr
}

// decision is the core's answer: a problem to answer with, a redirect
// that sets the token cookie, or (neither) the route to proxy to.
type decision struct {
	rt *route.Route
	// port is the sandbox's port the request goes to: the one of rt's
	// path prefixes its path is under, else the URL's own (PortFor).
	port      int
	problem   *problem
	location  string // a redirect's target: this URL without the token
	setCookie string
	// host is the request's host as the edge spells it (the route's name,
	// and the port the client gave): for X-Forwarded-Host and redirects.
	host string
	// wake: the request may start a stopped sandbox (the URL is public, or
	// the request carried a valid token).
	wake bool
	// token is the URL token the request was let in with, if any: no
	// header that still holds it goes on (forwardValue). For
	// token_invalid, the token refused (the request goes nowhere). It
	// may point into the request's head, which strip rewrites.
	token string
	// own: the token is the private URL's own, not a viewer's (the
	// owner's link: listening.go tells it what listens).
	own bool
}

// decide routes and authorizes c. Both protocol front ends call it, so
// the two cannot drift.
func (s *Server) decide(c *call) decision {
	if s.limit != nil {
		if ok, wait := s.limit.allow(c.ip, s.o.Now()); !ok {
			p := errRateLimited(wait)
			return decision{problem: &p}
		}
	}
	name, port, ok := names.SplitHostPort(c.host)
	if !ok {
		return decision{problem: &errBadRequest}
	}
	// The URL's policy comes first: a request it refuses goes no
	// further, whatever token it carries (policy.go).
	rt := s.o.Routes.Lookup(name)
	if p := s.refusedByPolicy(c, rt, true); p != nil {
		return decision{rt: rt, problem: p}
	}
	d := s.decideRoute(c, rt, port)
	if refusedByTable(d) {
		// The table follows the store a moment behind: a URL or a viewer
		// token made just now may not be in it yet.
		key := name
		if d.problem == &errTokenInvalid {
			key += " " + store.HashSecret(d.token)
		}
		again := s.o.Routes.Recheck(name, key, func(rt *route.Route) bool { return !refusedByTable(s.decideRoute(c, rt, port)) })
		if again != rt {
			// A newer route: its policy, and its limit unless this
			// request was counted against the same URL's already.
			if p := s.refusedByPolicy(c, again, rt == nil || again == nil || rt.URLID != again.URLID); p != nil {
				return decision{rt: again, problem: p}
			}
		}
		d = s.decideRoute(c, again, port)
	}
	return d
}

// refusedByTable reports whether d refuses for what the table does not
// hold (the URL, or the token): what a newer table may let in.
func refusedByTable(d decision) bool {
	return d.problem == &errNotFound || d.problem == &errTokenInvalid
}

// decideRoute is decide for the route the table gave (nil: none); port
// is the one the client gave in Host.
func (s *Server) decideRoute(c *call, rt *route.Route, port string) decision {
	if rt == nil {
		return decision{problem: &errNotFound}
	}
	d := decision{rt: rt, port: rt.PortFor(c.path), host: names.Host(rt.Host, s.domain)}
	if port != "" {
		d.host += ":" + port
	}
	switch {
	case c.method == "CONNECT":
		d.problem = &errForbidden
		return d
	case !strings.HasPrefix(c.path, "/") && !(c.path == "*" && c.method == "OPTIONS"):
		d.problem = &errBadRequest // an absolute-form target, or no path
		return d
	case inboxAmbiguous(rt.Inbox, c.method, c.path):
		d.problem = &errBadRequest // the inbox and the app would read the path two ways (inbox.go)
		return d
	}
	if rt.Public {
		d.wake = true
		return d
	}
	if s.verifiedInbox(rt, c) {
		return d // its signature stands in for the token (inbox.go)
	}
	if isPreflight(c) {
		return d
	}
	v, tok, life := authorize(rt, c, s.o.Now())
	switch v {
	case missing:
		d.problem = &errTokenMissing
	case invalid:
		d.problem, d.token = &errTokenInvalid, tok
	case redirect:
		// Absolute, so that a path starting with "//" stays a path and
		// never reads as another host.
		d.location = "https://" + d.host + c.path
		if q := stripQuery(c.query); q != "" {
			d.location += "?" + q
		}
		d.setCookie = tokenCookieValue(tok, life)
	default:
		d.wake, d.token, d.own = true, tok, life == 0
	}
	return d
}

// redirect gives the headers of d's redirect (302): the token becomes
// the cookie, and the address loses it.
func (d *decision) redirect(set func(name, value string)) {
	set("Location", d.location)
	set("Set-Cookie", d.setCookie)
	set("Cache-Control", "no-store")
	set("Referrer-Policy", "no-referrer")
}

// record is one request's record for the access log and the metrics.
type record struct {
	id     string
	start  time.Time
	host   string
	method string
	path   string
	proto  string
	status int
	// The bodies' bytes: atomic, as HTTP/2's request body may still be
	// read by the proxy's writer when the exchange is logged.
	bytesIn, bytesOut atomic.Int64
	// bw is the URL's bandwidth cap the bodies pay into; nil: none.
	bw *byteBucket
	// For the URL's request ring (traffic.go): its route (nil: the
	// request is kept in none), the query without _token, the client's
	// address, the stages' times (-1: none), the exchange it replays,
	// and its capture (nil: none).
	rt              *route.Route
	query           string
	ip              netip.Addr
	dial, firstByte time.Duration
	replayOf        string
	cap             *capture
}

// finish logs x and counts it. Never the query (it may carry a token), a
// cookie or a header.
func (s *Server) finish(x *record) {
	d := time.Since(x.start)
	s.m.requests.WithLabelValues(strconv.Itoa(x.status/100) + "xx").Inc()
	s.m.protocols.WithLabelValues(alpn(x.proto)).Inc()
	s.m.latency.Observe(d.Seconds())
	in, out := x.bytesIn.Load(), x.bytesOut.Load()
	s.m.bytesIn.Add(float64(in))
	s.m.bytesOut.Add(float64(out))
	s.keep(x, d)
	if !s.o.Logger.Enabled(context.Background(), slog.LevelInfo) {
		return
	}
	s.o.Logger.LogAttrs(context.Background(), slog.LevelInfo, "request",
		slog.String("request_id", x.id), slog.String("host", x.host), slog.String("method", x.method),
		slog.String("path", x.path), slog.Int("status", x.status), slog.Int64("bytes_in", in),
		slog.Int64("bytes", out), slog.Duration("duration", d), slog.String("proto", x.proto))
}

// alpn names a request's protocol (record.proto) as ALPN does, for the
// metrics' label.
func alpn(proto string) string {
	switch proto {
	case "HTTP/3.0":
		return "h3"
	case "HTTP/2.0":
		return "h2"
	}
	return "http/1.1"
}

// The token and the decision to let a request in.

// Names of the URL token's three carriers (DESIGN.md).
const (
	tokenParam  = "_token"
	tokenCookie = "__Host-froog_url"
	tokenHeader = "X-Froog-Url-Token"
)

type verdict int

const (
	allow    verdict = iota
	redirect         // a navigation with ?_token=: set the cookie, drop the token from the address
	missing
	invalid
)

// authorize decides a request to a private URL. It returns the token
// that passed and how long it has left (0: the URL's own, which does
// not expire; for a redirect, how long its cookie lasts, 0 a session
// cookie): the edge makes sure it reaches the sandbox nowhere.
// For invalid it returns the token that failed (the first cookie's).
func authorize(rt *route.Route, c *call, now time.Time) (verdict, string, time.Duration) {
	if tok, ok := queryToken(c.query); ok {
		life, valid := rt.Check(tok, now)
		switch {
		case !valid:
			return invalid, tok, 0
		case (c.method == http.MethodGet || c.method == http.MethodHead) && !c.upgrade:
			return redirect, tok, life
		}
		return allow, tok, life // inline: a websocket upgrade or a non-GET request
	}
	if c.tokenHeader != "" {
		if life, ok := rt.Check(c.tokenHeader, now); ok {
			return allow, c.tokenHeader, life
		}
		return invalid, c.tokenHeader, 0
	}
	for _, tok := range c.tokenCookies {
		if life, ok := rt.Check(tok, now); ok {
			return allow, tok, life
		}
	}
	if len(c.tokenCookies) > 0 {
		return invalid, c.tokenCookies[0], 0
	}
	return missing, "", 0
}

// isPreflight: a CORS preflight (OPTIONS with Access-Control-Request-Method)
// carries no credentials by the spec (the browser never sends cookies or
// custom headers with it), so requiring the token would make every
// cross-origin call to a private URL fail. It goes to the app, which
// answers its own CORS policy; the request that follows is checked.
// Only a request that can be nothing but a preflight skips the token: one
// that asks for an upgrade or carries a body is checked like any other
// (a preflight has neither, and either would let a stranger talk to the
// app).
func isPreflight(c *call) bool {
	return c.method == http.MethodOptions && c.requestMethod != "" && !c.upgrade && !c.asksUpgrade && !c.body
}

// queryToken finds the first _token parameter in a raw query. A name is
// read as the app would read it, percent-decoded (%5Ftoken is _token), and
// so is the value: whatever spelling the edge takes, stripQuery removes.
func queryToken(raw string) (string, bool) {
	for raw != "" {
		var part string
		part, raw, _ = strings.Cut(raw, "&")
		if k, v, _ := strings.Cut(part, "="); isTokenParam(k) {
			if u, err := url.QueryUnescape(v); err == nil {
				v = u
			}
			return v, true
		}
	}
	return "", false
}

// isTokenParam reports whether a raw query parameter name is _token.
func isTokenParam(k string) bool {
	if k == tokenParam {
		return true
	}
	if !strings.Contains(k, "%") {
		return false
	}
	u, err := url.QueryUnescape(k)
	return err == nil && u == tokenParam
}

// stripQuery removes every _token parameter, leaving the rest as sent.
func stripQuery(raw string) string {
	if !strings.Contains(raw, tokenParam) && !strings.Contains(raw, "%") {
		return raw
	}
	var kept []string
	changed := false
	for _, part := range strings.Split(raw, "&") {
		if k, _, _ := strings.Cut(part, "="); isTokenParam(k) {
			changed = true
			continue
		}
		kept = append(kept, part)
	}
	if !changed {
		return raw
	}
	return strings.Join(kept, "&")
}

// tokenCookieValue is the Set-Cookie that carries a token in a browser.
func tokenCookieValue(tok string, life time.Duration) string {
	v := tokenCookie + "=" + tok + "; Path=/; Secure; HttpOnly; SameSite=None; Partitioned"
	if life > 0 {
		v += "; Max-Age=" + strconv.Itoa(int(life/time.Second))
	}
	return v
}
