package edge

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"froog.tech/froog/edge/route"
)

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
// that passed (for a redirect, also how long its cookie lasts; 0: a
// session cookie): the edge makes sure it reaches the sandbox nowhere.
func authorize(rt *route.Route, c *call, now time.Time) (verdict, string, time.Duration) {
	if tok, ok := queryToken(c.query); ok {
		life, valid := rt.Check(tok, now)
		switch {
		case !valid:
			return invalid, "", 0
		case (c.method == http.MethodGet || c.method == http.MethodHead) && !c.upgrade:
			return redirect, tok, life
		}
		return allow, tok, 0 // inline: a websocket upgrade or a non-GET request
	}
	if c.tokenHeader != "" {
		if _, ok := rt.Check(c.tokenHeader, now); ok {
			return allow, c.tokenHeader, 0
		}
		return invalid, "", 0
	}
	for _, tok := range c.tokenCookies {
		if _, ok := rt.Check(tok, now); ok {
			return allow, tok, 0
		}
	}
	if len(c.tokenCookies) > 0 {
		return invalid, "", 0
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
