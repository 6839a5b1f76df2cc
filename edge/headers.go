package edge

import (
	"net/http"
	"strings"

	"froog.tech/froog/names"
)

// The rules for request and response headers, for both protocols: which
// headers end at the edge, how the token's cookie and header are read,
// and how they are taken out. Each protocol's front end only walks its
// own header structure with these functions, so the two cannot read a
// header differently.

// Hop-by-hop headers (RFC 9110 §7.6.1) end at the edge, as do any the
// Connection header names.
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// replacedHeaders are the edge's to set, or a client's claims of where
// it is that only a proxy may make: whatever a client sent is dropped
// (the token header too, which must never reach the sandbox; and
// Froog-Replay, which only a replay carries, so that the app may trust
// it). Every
// X-Forwarded-* name is the edge's too (forwardedPrefix); the edge sets
// X-Forwarded-For, -Proto and -Host.
var replacedHeaders = []string{tokenHeader, replayHeader, "X-Request-Id", "Forwarded", "X-Real-Ip", "X-Client-Ip", "True-Client-Ip",
	"Cf-Connecting-Ip", "X-Cluster-Client-Ip", "Fastly-Client-Ip", "X-Original-Forwarded-For"}

const forwardedPrefix = "X-Forwarded-"

// maxConnectionTokens bounds the names one message's Connection headers
// may list, and maxDropped the distinct spellings of header names the
// edge removes from one message: real clients use a handful, and each
// removal walks the message's headers.
const (
	maxConnectionTokens = 32
	maxDropped          = 64
)

// hops is what a message's Connection headers say: the names that end at
// the edge, and whether it asks for an upgrade.
type hops struct {
	named   [maxConnectionTokens]string
	n       int
	upgrade bool // Connection lists "upgrade"
	// keepUpgrade keeps Connection and Upgrade on the way to the sandbox:
	// the edge passes this upgrade through.
	keepUpgrade bool
}

// addConnection takes one Connection header's value; it reports false
// when the message lists more names than the edge honours.
func (h *hops) addConnection(v string) bool {
	for v != "" {
		var part string
		part, v, _ = strings.Cut(v, ",")
		part = trimOWS(part)
		switch {
		case part == "":
		case strings.EqualFold(part, "upgrade"):
			h.upgrade = true
		case strings.EqualFold(part, "close"), strings.EqualFold(part, "keep-alive"):
			// Not header names; Keep-Alive is a hop header anyway.
		case h.n == len(h.named):
			return false
		default:
			h.named[h.n] = part
			h.n++
		}
	}
	return true
}

// drop reports whether a header named name ends at the edge.
func (h *hops) drop(name string) bool {
	for _, hh := range hopHeaders {
		if strings.EqualFold(name, hh) {
			return !h.keepUpgrade || !(hh == "Connection" || hh == "Upgrade")
		}
	}
	if len(name) >= len(forwardedPrefix) && strings.EqualFold(name[:len(forwardedPrefix)], forwardedPrefix) {
		return true
	}
	for _, r := range replacedHeaders {
		if strings.EqualFold(name, r) {
			return true
		}
	}
	for _, n := range h.named[:h.n] {
		if strings.EqualFold(name, n) {
			return true
		}
	}
	return false
}

// edgeResponseHeaders are answer headers only the edge may send: an
// app's Alt-Svc would speak for the edge (which protocols, which port
// it answers on), and could send browsers elsewhere or clear the edge's.
var edgeResponseHeaders = []string{"Alt-Svc"}

// dropEdgeHeaders takes the edge's own headers off an app's answer on
// its way through the reverse proxy (HTTP/2, HTTP/3).
func dropEdgeHeaders(res *http.Response) error {
	for _, h := range edgeResponseHeaders {
		delete(res.Header, h) // as http.ReadResponse spells it
	}
	return nil
}

// dropResponse reports whether a response header named name ends at the
// edge: the hop-by-hop ones, those the response's Connection names, and
// the edge's own (edgeResponseHeaders).
func (h *hops) dropResponse(name string) bool {
	for _, hh := range hopHeaders {
		if strings.EqualFold(name, hh) {
			return true
		}
	}
	for _, e := range edgeResponseHeaders {
		if strings.EqualFold(name, e) {
			return true
		}
	}
	for _, n := range h.named[:h.n] {
		if strings.EqualFold(name, n) {
			return true
		}
	}
	return false
}

// isWebsocket reports whether an Upgrade header's value asks for a
// websocket and nothing else. Other upgrades (h2c above all, which
// would turn the connection into many requests the edge never sees) are
// not passed through: their Upgrade header is dropped and the request
// goes to the sandbox as an ordinary one.
func isWebsocket(upgrade string) bool {
	return strings.EqualFold(trimOWS(upgrade), "websocket")
}

// trimOWS trims optional whitespace (spaces and tabs, RFC 9110 §5.6.3),
// as both protocols' header values are read.
func trimOWS(s string) string {
	for s != "" && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for s != "" && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// cookiePart splits one ';'-separated part of a Cookie header into its
// name and value, as the edge reads every cookie: whitespace around the
// part, the name and the value is not part of them, and a value in
// double quotes is the text inside.
func cookiePart(part string) (name, value string) {
	name, value, _ = strings.Cut(trimOWS(part), "=")
	name, value = trimOWS(name), trimOWS(value)
	if len(value) >= 2 && value[0] == '"' && value[len(value)-1] == '"' {
		value = value[1 : len(value)-1]
	}
	return name, value
}

const tokenCookieLower = "__host-froog_url"

// isTokenCookie reports whether a cookie name is the token's cookie, in
// any case: what the edge could authenticate with, it also strips.
func isTokenCookie(name string) bool { return strings.EqualFold(name, tokenCookie) }

// tokenCookies appends to into the values of the token cookies in one
// Cookie header's value.
func tokenCookies(v string, into []string) []string {
	if !containsFold(v, tokenCookieLower) {
		return into
	}
	for v != "" {
		var part string
		part, v, _ = strings.Cut(v, ";")
		if name, value := cookiePart(part); isTokenCookie(name) {
			into = append(into, value)
		}
	}
	return into
}

// stripTokenCookie removes the token cookies from one Cookie header's
// value, and any other cookie that holds secret (the token the request
// was let in with; "" for none), keeping the other parts as sent; it
// reports whether it changed anything. A header left empty is "" (the
// caller drops it).
func stripTokenCookie(v, secret string) (string, bool) {
	if !containsFold(v, tokenCookieLower) && !holds(v, secret) {
		return v, false
	}
	var b strings.Builder
	changed := false
	for rest := v; rest != ""; {
		var part string
		part, rest, _ = strings.Cut(rest, ";")
		if name, _ := cookiePart(part); isTokenCookie(name) || holds(part, secret) {
			changed = true
			continue
		}
		if p := trimOWS(part); p != "" {
			if b.Len() > 0 {
				b.WriteString("; ")
			}
			b.WriteString(p)
		}
	}
	if !changed {
		return v, false
	}
	return b.String(), true
}

// containsFold reports whether s contains lower, a lowercase string,
// ignoring ASCII case.
func containsFold(s, lower string) bool {
	for i := 0; i+len(lower) <= len(s); i++ {
		if names.EqualFold(s[i:i+len(lower)], lower) {
			return true
		}
	}
	return false
}

// holds reports whether v holds secret, a token ("" never is held).
func holds(v, secret string) bool { return secret != "" && strings.Contains(v, secret) }

// forwardValue says what becomes of one request header the hop rules
// keep (Cookie aside: stripTokenCookie), on its way to the sandbox: its
// value, or false to drop it. A Referer loses every _token parameter of
// its query, as the request's own query does, and its fragment (a
// Referer has none, RFC 9110 §10.1.3; a page's token may sit there);
// then any header that still holds the token the request was let in with
// (secret; "" for none) is dropped: Origin, Authorization, one of the
// app's own.
func forwardValue(name, v, secret string) (string, bool) {
	if strings.EqualFold(name, "Referer") {
		v = scrubReferer(v)
	}
	return v, !holds(v, secret)
}

// scrubReferer takes the fragment and the _token parameters out of a
// Referer's value, leaving the rest as sent.
func scrubReferer(v string) string {
	if i := strings.IndexByte(v, '#'); i >= 0 {
		v = v[:i]
	}
	base, query, ok := strings.Cut(v, "?")
	if !ok {
		return v
	}
	if q := stripQuery(query); q != query {
		if q == "" {
			return base
		}
		return base + "?" + q
	}
	return v
}
