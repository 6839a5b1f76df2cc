package edge

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"froog.tech/froog/edge/route"
	"froog.tech/froog/store"
)

func TestQueryToken(t *testing.T) {
	t.Parallel()
	tests := []struct{ raw, tok, stripped string }{
		{"_token=pt_a", "pt_a", ""},
		{"a=1&_token=pt_a&b=2", "pt_a", "a=1&b=2"},
		{"a=1&_token=pt_a&_token=pt_b", "pt_a", "a=1"},
		{"x_token=1&_tokens=2", "", "x_token=1&_tokens=2"},
		{"q=%5Ftoken", "", "q=%5Ftoken"},
		{"%5Ftoken=pt_a&b", "pt_a", "b"},
		{"%5ftoken=pt%5Fa", "pt_a", ""},
		{"_tok%65n=pt_a&_token=pt_b", "pt_a", ""},
		{"%zz=1&a", "", "%zz=1&a"},
		{"", "", ""},
	}
	for _, tt := range tests {
		tok, ok := queryToken(tt.raw)
		if tok != tt.tok || ok != (tt.tok != "") {
			t.Errorf("queryToken(%q) = %q, %v", tt.raw, tok, ok)
		}
		if got := stripQuery(tt.raw); got != tt.stripped {
			t.Errorf("stripQuery(%q) = %q, want %q", tt.raw, got, tt.stripped)
		}
	}
}

func FuzzStripQuery(f *testing.F) {
	for _, s := range []string{"a=1&_token=x&b=%20", "_token", "&&_token=&", "_token=a=b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		out := stripQuery(raw)
		if _, ok := queryToken(out); ok {
			t.Fatalf("stripQuery(%q) = %q still carries a token", raw, out)
		}
		if !strings.Contains(raw, tokenParam) && !strings.Contains(raw, "%") && out != raw {
			t.Fatalf("a query without a token changed: %q → %q", raw, out)
		}
	})
}

// One parser reads the token's cookie for authentication and for
// stripping: every spelling that authenticates is stripped.
func TestTokenCookie(t *testing.T) {
	t.Parallel()
	tests := []struct {
		header string
		tokens []string
		rest   string
	}{
		{"a=1; __Host-froog_url=pt_x; b=2", []string{"pt_x"}, "a=1; b=2"},
		{"__Host-froog_url =pt_x", []string{"pt_x"}, ""},
		{"__Host-froog_url= pt_x ;a=1", []string{"pt_x"}, "a=1"},
		{"\t__Host-froog_url\t=\t\"pt_x\"", []string{"pt_x"}, ""},
		{"__HOST-FROOG_URL=pt_x", []string{"pt_x"}, ""},
		{"__Host-froog_url=pt_x;__Host-froog_url=pt_y", []string{"pt_x", "pt_y"}, ""},
		{"x__Host-froog_url=1; __Host-froog_urlx=2", nil, "x__Host-froog_url=1; __Host-froog_urlx=2"},
		{"a=__Host-froog_url=pt_x", nil, "a=__Host-froog_url=pt_x"},
		{"a=1;;b=2", nil, "a=1;;b=2"},
	}
	for _, tt := range tests {
		got := tokenCookies(tt.header, nil)
		if fmt.Sprint(got) != fmt.Sprint(tt.tokens) {
			t.Errorf("tokenCookies(%q) = %q, want %q", tt.header, got, tt.tokens)
		}
		if rest, _ := stripTokenCookie(tt.header, ""); rest != tt.rest {
			t.Errorf("stripTokenCookie(%q) = %q, want %q", tt.header, rest, tt.rest)
		}
	}
}

// What goes on to the sandbox of the headers the hop rules keep: a
// Referer without the token (in its query, any spelling, or after #),
// and nothing that still holds the token the request was let in with.
func TestForwardValue(t *testing.T) {
	t.Parallel()
	const tok = "pt_secret"
	tests := []struct {
		name, value string
		want        string
		keep        bool
	}{
		{"Referer", "https://a.test/p?x=1&_token=pt_other&y=2", "https://a.test/p?x=1&y=2", true},
		{"referer", "https://a.test/p?%5Ftoken=pt_other", "https://a.test/p", true},
		{"REFERER", "https://a.test/p?x=1#_token=pt_other", "https://a.test/p?x=1", true},
		{"Referer", "https://a.test/p#?_token=" + tok, "https://a.test/p", true},
		{"Referer", "https://a.test/p?_token=" + tok, "https://a.test/p", true},
		{"Referer", "https://a.test/" + tok, "", false},
		{"Referer", "https://a.test/p?x=1", "https://a.test/p?x=1", true},
		{"Origin", "https://a.test", "https://a.test", true},
		{"Origin", "https://a.test?_token=" + tok, "", false},
		{"Authorization", "Bearer " + tok, "", false},
		{"X-App", "pt_secre", "pt_secre", true},
	}
	for _, tt := range tests {
		got, keep := forwardValue(tt.name, tt.value, tok)
		if keep != tt.keep || keep && got != tt.want {
			t.Errorf("forwardValue(%q, %q) = %q, %v; want %q, %v", tt.name, tt.value, got, keep, tt.want, tt.keep)
		}
	}
	if got, keep := forwardValue("X-App", "anything", ""); !keep || got != "anything" {
		t.Errorf("without a token: %q, %v", got, keep)
	}
	for _, tt := range []struct{ header, rest string }{
		{"a=1; copy=" + tok + "; b=2", "a=1; b=2"},
		{"copy=\"x " + tok + "\"", ""},
		{"a=1", "a=1"},
	} {
		if rest, _ := stripTokenCookie(tt.header, tok); rest != tt.rest {
			t.Errorf("stripTokenCookie(%q, token) = %q, want %q", tt.header, rest, tt.rest)
		}
	}
	var h hops
	for _, name := range []string{"Forwarded", "x-real-ip", "X-Forwarded-Port", "x-forwarded-anything", "True-Client-IP", "X-FROOG-URL-TOKEN"} {
		if !h.drop(name) {
			t.Errorf("%s reaches the sandbox", name)
		}
	}
	if h.drop("X-Forwarde") || h.drop("Origin") {
		t.Error("a header of the app's is dropped")
	}
}

func FuzzTokenCookie(f *testing.F) {
	for _, s := range []string{"a=1; __Host-froog_url=pt_x", "__host-froog_url =\"x\";", ";;=;"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		rest, changed := stripTokenCookie(v, "")
		if got := tokenCookies(rest, nil); len(got) > 0 {
			t.Fatalf("stripTokenCookie(%q) = %q still carries %q", v, rest, got)
		}
		if changed != (len(tokenCookies(v, nil)) > 0) {
			t.Fatalf("%q: changed %v, but tokens %q", v, changed, tokenCookies(v, nil))
		}
	})
}

// The Connection header's names end at the edge, up to a bound; an
// upgrade is only ever a websocket.
func TestHops(t *testing.T) {
	t.Parallel()
	var h hops
	if !h.addConnection("keep-alive, X-A ,upgrade") || !h.addConnection("x-b") {
		t.Fatal("refused a short list")
	}
	for name, want := range map[string]bool{"x-a": true, "X-B": true, "Keep-Alive": true, "Upgrade": true, "Connection": true,
		"X-Froog-Url-Token": true, "x-forwarded-for": true, "X-C": false, "Cookie": false} {
		if h.drop(name) != want {
			t.Errorf("drop(%q) = %v, want %v", name, !want, want)
		}
	}
	if !h.upgrade {
		t.Error("upgrade not seen")
	}
	var many hops
	if many.addConnection(strings.Repeat("x,", maxConnectionTokens+1)+"y") && many.addConnection(strings.Repeat("a,", maxConnectionTokens)) {
		t.Fatal("no bound on Connection's names")
	}
	for v, want := range map[string]bool{"websocket": true, " WebSocket ": true, "h2c": false, "websocket, h2c": false, "": false, "TLS/1.2": false} {
		if isWebsocket(v) != want {
			t.Errorf("isWebsocket(%q) = %v", v, !want)
		}
	}
}

func TestAuthorize(t *testing.T) {
	t.Parallel()
	now := time.Now()
	rt := route.NewRoute(&store.URL{TokenHash: store.HashSecret("pt_own")}, []store.URLToken{
		{Hash: store.HashSecret("pvt_live"), ExpiresAt: now.Add(time.Hour)},
		{Hash: store.HashSecret("pvt_gone"), ExpiresAt: now.Add(-time.Second)},
	}, now.Add(-time.Minute))
	tests := []struct {
		name string
		c    call
		want verdict
		life bool
	}{
		{"nothing", call{method: "GET"}, missing, false},
		{"own token in the query", call{method: "GET", query: "_token=pt_own"}, redirect, false},
		{"viewer token in the query", call{method: "GET", query: "_token=pvt_live"}, redirect, true},
		{"expired viewer token", call{method: "GET", query: "_token=pvt_gone"}, invalid, false},
		{"wrong token", call{method: "GET", query: "_token=pt_nope"}, invalid, false},
		{"POST inline", call{method: "POST", query: "_token=pt_own"}, allow, false},
		{"websocket inline", call{method: "GET", query: "_token=pt_own", upgrade: true}, allow, false},
		{"header", call{method: "GET", tokenHeader: "pvt_live"}, allow, true}, // a viewer's: what it has left
		{"own header", call{method: "GET", tokenHeader: "pt_own"}, allow, false},
		{"viewer POST inline", call{method: "POST", query: "_token=pvt_live"}, allow, true},
		{"viewer cookie", call{method: "GET", tokenCookies: []string{"pvt_live"}}, allow, true},
		{"wrong header", call{method: "GET", tokenHeader: "pvt_gone"}, invalid, false},
		{"cookie", call{method: "GET", tokenCookies: []string{"pt_own"}}, allow, false},
		{"stale cookie", call{method: "GET", tokenCookies: []string{"pt_old"}}, invalid, false},
		{"stale and good cookie", call{method: "GET", tokenCookies: []string{"pt_old", "pt_own"}}, allow, false},
		{"oversized token", call{method: "GET", tokenHeader: strings.Repeat("x", 300)}, invalid, false},
	}
	for _, tt := range tests {
		v, _, life := authorize(rt, &tt.c, now)
		if v != tt.want || (life > 0) != tt.life {
			t.Errorf("%s: got %v (life %v), want %v", tt.name, v, life, tt.want)
		}
	}
	for _, tt := range []struct {
		c    call
		want bool
	}{
		{call{method: "OPTIONS", requestMethod: "POST"}, true},
		{call{method: "OPTIONS"}, false},
		{call{method: "GET", requestMethod: "POST"}, false},
		{call{method: "options", requestMethod: "POST"}, false},
		// What a preflight never is: an upgrade, or a request with a body.
		{call{method: "OPTIONS", requestMethod: "POST", upgrade: true}, false},
		{call{method: "OPTIONS", requestMethod: "POST", body: true}, false},
		{call{method: "OPTIONS", requestMethod: "POST", asksUpgrade: true}, false},
	} {
		if got := isPreflight(&tt.c); got != tt.want {
			t.Errorf("isPreflight(%+v) = %v", tt.c, got)
		}
	}
}

func TestCookieValue(t *testing.T) {
	t.Parallel()
	if got := tokenCookieValue("pvt_x", 90*time.Minute); got != "__Host-froog_url=pvt_x; Path=/; Secure; HttpOnly; SameSite=None; Partitioned; Max-Age=5400" {
		t.Fatalf("cookie %q", got)
	}
}
