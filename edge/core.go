package edge

import (
	"context"
	"log/slog"
	"net/netip"
	"strconv"
	"strings"
	"time"
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
	upgrade      bool // a websocket (or other) upgrade
	preflight    bool // a CORS preflight, see isPreflight
	html         bool // a browser navigation: errors are pages
	ip           netip.Addr
}

// decision is the core's answer: a problem to answer with, a redirect
// that sets the token cookie, or (neither) the route to proxy to.
type decision struct {
	rt        *route
	problem   *problem
	location  string // a redirect's target: this URL without the token
	setCookie string
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
	rt := s.routes.lookup(c.host)
	if rt == nil {
		return decision{problem: &errNotFound}
	}
	if c.method == "CONNECT" {
		return decision{rt: rt, problem: &errForbidden}
	}
	if rt.public || c.preflight {
		return decision{rt: rt}
	}
	switch v, tok, life := rt.authorize(c, s.o.Now()); v {
	case missing:
		return decision{rt: rt, problem: &errTokenMissing}
	case invalid:
		return decision{rt: rt, problem: &errTokenInvalid}
	case redirect:
		// Absolute, so that a path starting with "//" stays a path and
		// never reads as another host.
		loc := "https://" + c.host + c.path
		if q := stripQuery(c.query); q != "" {
			loc += "?" + q
		}
		return decision{rt: rt, location: loc, setCookie: tokenCookieValue(tok, life)}
	}
	return decision{rt: rt}
}

// redirect gives the headers of d's redirect (302): the token becomes
// the cookie, and the address loses it.
func (d *decision) redirect(set func(name, value string)) {
	set("Location", d.location)
	set("Set-Cookie", d.setCookie)
	set("Cache-Control", "no-store")
	set("Referrer-Policy", "no-referrer")
}

// exchange is one request's record for the access log and the metrics.
type exchange struct {
	id       string
	start    time.Time
	host     string
	method   string
	path     string
	proto    string
	status   int
	bytesIn  int64
	bytesOut int64
}

// finish logs x and counts it. Never the query (it may carry a token), a
// cookie or a header.
func (s *Server) finish(x *exchange) {
	d := time.Since(x.start)
	s.m.requests.WithLabelValues(strconv.Itoa(x.status/100) + "xx").Inc()
	s.m.latency.Observe(d.Seconds())
	s.m.bytesIn.Add(float64(x.bytesIn))
	s.m.bytesOut.Add(float64(x.bytesOut))
	if !s.o.Logger.Enabled(context.Background(), slog.LevelInfo) {
		return
	}
	s.o.Logger.LogAttrs(context.Background(), slog.LevelInfo, "request",
		slog.String("request_id", x.id), slog.String("host", x.host), slog.String("method", x.method),
		slog.String("path", x.path), slog.Int("status", x.status), slog.Int64("bytes_in", x.bytesIn),
		slog.Int64("bytes", x.bytesOut), slog.Duration("duration", d), slog.String("proto", x.proto))
}

// Hop-by-hop headers (RFC 9110 §7.6.1) end at the edge, as do any the
// Connection header names.
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// replacedHeaders are the edge's to set: whatever a client sent is
// dropped (the token header too, which must never reach the sandbox).
var replacedHeaders = []string{tokenHeader, "X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host", "X-Request-Id"}

// isHop reports whether a request header named name ends at the edge.
// connection is the Connection header's value; upgrade keeps the two
// headers an upgrade needs.
func isHop(name, connection string, upgrade bool) bool {
	for _, h := range hopHeaders {
		if strings.EqualFold(name, h) {
			return !upgrade || !(strings.EqualFold(h, "Connection") || strings.EqualFold(h, "Upgrade"))
		}
	}
	for _, h := range replacedHeaders {
		if strings.EqualFold(name, h) {
			return true
		}
	}
	return connection != "" && hasToken(connection, name) && !(upgrade && strings.EqualFold(name, "Upgrade"))
}

// hasToken reports whether the comma-separated list v holds token
// (case-insensitive).
func hasToken(v, token string) bool {
	for v != "" {
		var part string
		part, v, _ = strings.Cut(v, ",")
		if strings.EqualFold(strings.TrimSpace(part), token) {
			return true
		}
	}
	return false
}
