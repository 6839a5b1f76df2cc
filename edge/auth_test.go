package edge

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"froog.tech/froog/store"
)

func TestQueryToken(t *testing.T) {
	tests := []struct{ raw, tok, stripped string }{
		{"_token=pt_a", "pt_a", ""},
		{"a=1&_token=pt_a&b=2", "pt_a", "a=1&b=2"},
		{"a=1&_token=pt_a&_token=pt_b", "pt_a", "a=1"},
		{"x_token=1&_tokens=2", "", "x_token=1&_tokens=2"},
		{"q=%5Ftoken", "", "q=%5Ftoken"},
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
		if !strings.Contains(raw, tokenParam) && out != raw {
			t.Fatalf("a query without a token changed: %q → %q", raw, out)
		}
	})
}

func TestStripCookie(t *testing.T) {
	h := http.Header{}
	h.Add("Cookie", "a=1; __Host-froog_url=pt_x; b=2")
	h.Add("Cookie", "__Host-froog_url=pt_y")
	stripCookie(h)
	if got := h.Values("Cookie"); len(got) != 1 || got[0] != "a=1; b=2" {
		t.Fatalf("cookies after strip: %q", got)
	}
}

func TestAuthorize(t *testing.T) {
	now := time.Now()
	rt := &route{public: false, tokenHash: store.HashSecret("pt_own"), viewers: map[string]time.Time{
		store.HashSecret("pvt_live"): now.Add(time.Hour),
		store.HashSecret("pvt_gone"): now.Add(-time.Second),
	}}
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
		{"header", call{method: "GET", tokenHeader: "pvt_live"}, allow, false},
		{"wrong header", call{method: "GET", tokenHeader: "pvt_gone"}, invalid, false},
		{"cookie", call{method: "GET", tokenCookies: []string{"pt_own"}}, allow, false},
		{"stale cookie", call{method: "GET", tokenCookies: []string{"pt_old"}}, invalid, false},
		{"stale and good cookie", call{method: "GET", tokenCookies: []string{"pt_old", "pt_own"}}, allow, false},
		{"oversized token", call{method: "GET", tokenHeader: strings.Repeat("x", 300)}, invalid, false},
	}
	for _, tt := range tests {
		v, _, life := rt.authorize(&tt.c, now)
		if v != tt.want || (life > 0) != tt.life {
			t.Errorf("%s: got %v (life %v), want %v", tt.name, v, life, tt.want)
		}
	}
	if !isPreflight("OPTIONS", "POST") || isPreflight("OPTIONS", "") || isPreflight("GET", "POST") {
		t.Fatal("preflight detection")
	}
}

func TestCookieValue(t *testing.T) {
	if got := tokenCookieValue("pvt_x", 90*time.Minute); got != "__Host-froog_url=pvt_x; Path=/; Secure; HttpOnly; SameSite=None; Partitioned; Max-Age=5400" {
		t.Fatalf("cookie %q", got)
	}
}
