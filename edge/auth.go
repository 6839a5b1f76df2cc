package edge

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"froog.tech/froog/store"
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

// authorize decides a request to a private URL. It returns, for a
// redirect, the token and how long its cookie lasts (0: a session cookie).
func (rt *route) authorize(r *http.Request, now time.Time) (verdict, string, time.Duration) {
	if tok, ok := queryToken(r.URL.RawQuery); ok {
		life, valid := rt.check(tok, now)
		switch {
		case !valid:
			return invalid, "", 0
		case (r.Method == http.MethodGet || r.Method == http.MethodHead) && !isUpgrade(r):
			return redirect, tok, life
		}
		return allow, "", 0 // inline: a websocket upgrade or a non-GET request
	}
	if tok := r.Header.Get(tokenHeader); tok != "" {
		if _, ok := rt.check(tok, now); ok {
			return allow, "", 0
		}
		return invalid, "", 0
	}
	seen := false
	for _, c := range r.Cookies() {
		if c.Name != tokenCookie {
			continue
		}
		seen = true
		if _, ok := rt.check(c.Value, now); ok {
			return allow, "", 0
		}
	}
	if seen {
		return invalid, "", 0
	}
	return missing, "", 0
}

// check reports whether tok opens the route, and for a viewer token how
// long it has left.
func (rt *route) check(tok string, now time.Time) (time.Duration, bool) {
	if tok == "" || len(tok) > 256 {
		return 0, false
	}
	h := store.HashSecret(tok)
	if rt.tokenHash != "" && h == rt.tokenHash {
		return 0, true
	}
	if exp, ok := rt.viewers[h]; ok && now.Before(exp) {
		return exp.Sub(now), true
	}
	return 0, false
}

// isPreflight: a CORS preflight carries no credentials by the spec (the
// browser never sends cookies with it), so requiring the token would make
// every cross-origin call to a private URL fail. It goes to the app, which
// answers its own CORS policy; the request that follows is checked.
func isPreflight(r *http.Request) bool {
	return r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
}

func isUpgrade(r *http.Request) bool {
	return headerHasToken(r.Header, "Connection", "upgrade") && r.Header.Get("Upgrade") != ""
}

func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, part := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(part), token) {
				return true
			}
		}
	}
	return false
}

// queryToken finds the first _token parameter in a raw query.
func queryToken(raw string) (string, bool) {
	for raw != "" {
		var part string
		part, raw, _ = strings.Cut(raw, "&")
		if k, v, _ := strings.Cut(part, "="); k == tokenParam {
			return v, true // tokens are base64url: nothing to unescape
		}
	}
	return "", false
}

// stripQuery removes every _token parameter, leaving the rest as sent.
func stripQuery(raw string) string {
	if !strings.Contains(raw, tokenParam) {
		return raw
	}
	var kept []string
	for _, part := range strings.Split(raw, "&") {
		if k, _, _ := strings.Cut(part, "="); k != tokenParam {
			kept = append(kept, part)
		}
	}
	return strings.Join(kept, "&")
}

// stripCookie removes the token cookie from Cookie headers, keeping the
// others as sent.
func stripCookie(h http.Header) {
	vals := h.Values("Cookie")
	if len(vals) == 0 {
		return
	}
	var out []string
	for _, v := range vals {
		var kept []string
		for _, c := range strings.Split(v, ";") {
			if name, _, _ := strings.Cut(strings.TrimSpace(c), "="); name != tokenCookie {
				kept = append(kept, strings.TrimSpace(c))
			}
		}
		if len(kept) > 0 {
			out = append(out, strings.Join(kept, "; "))
		}
	}
	h.Del("Cookie")
	for _, v := range out {
		h.Add("Cookie", v)
	}
}

// strip removes every carrier of the token: it never reaches the sandbox.
func strip(r *http.Request) {
	r.URL.RawQuery = stripQuery(r.URL.RawQuery)
	r.Header.Del(tokenHeader)
	stripCookie(r.Header)
}

// tokenCookieValue is the Set-Cookie that carries a token in a browser.
func tokenCookieValue(tok string, life time.Duration) string {
	v := tokenCookie + "=" + tok + "; Path=/; Secure; HttpOnly; SameSite=None; Partitioned"
	if life > 0 {
		v += "; Max-Age=" + strconv.Itoa(int(life/time.Second))
	}
	return v
}
