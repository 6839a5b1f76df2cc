package edge

import (
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"froog.tech/froog/edge/route"
	"froog.tech/froog/store"
)

func TestWithoutFrameAncestors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"default-src 'self'", "default-src 'self'"},
		{"frame-ancestors 'none'", ""},
		{"default-src 'self'; frame-ancestors 'none'", "default-src 'self'"},
		{"FRAME-ANCESTORS *; img-src *", "img-src *"},
		{"frame-ancestors\t'none';script-src 'self'", "script-src 'self'"},
		// Two policies in one value: each loses its directive.
		{"frame-ancestors a, default-src b; frame-ancestors c", "default-src b"},
		// A directive whose name only starts so is another directive.
		{"frame-ancestors-x y; frame-ancestors z", "frame-ancestors-x y"},
		{" ; ;", " ; ;"}, // nothing to take out: as sent
	} {
		if got := withoutFrameAncestors(tc.in); got != tc.want {
			t.Errorf("withoutFrameAncestors(%q): got %q, want %q", tc.in, got, tc.want)
		}
	}
}

// FuzzWithoutFrameAncestors: whatever an app sends, no frame-ancestors
// directive is left, and what is left came from the value.
func FuzzWithoutFrameAncestors(f *testing.F) {
	for _, s := range []string{"default-src 'self'; frame-ancestors 'none'", "frame-ancestors a, b; frame-ancestors c", "Frame-Ancestors\t*", ";;,,", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		got := withoutFrameAncestors(v)
		for _, pol := range strings.Split(got, ",") {
			for _, dir := range strings.Split(pol, ";") {
				name, _, _ := strings.Cut(trimOWS(dir), " ")
				name, _, _ = strings.Cut(name, "\t")
				if strings.EqualFold(name, "frame-ancestors") {
					t.Fatalf("withoutFrameAncestors(%q) = %q: a frame-ancestors directive is left", v, got)
				}
			}
		}
		if len(got) > len(v)+len(v)/2+2 {
			t.Fatalf("withoutFrameAncestors(%q) = %q: longer than what it came from allows", v, got)
		}
	})
}

// Both adapters' rewrites give the answer the same framing headers,
// whatever spelling the app's names have.
func TestReframe(t *testing.T) {
	t.Parallel()
	const csp = "frame-ancestors https://app.example"
	want := []string{"default-src 'self'", csp}

	var h1 fasthttp.ResponseHeader
	h1.DisableNormalizing()
	h1.Add("content-security-policy", "default-src 'self'; frame-ancestors 'none'")
	h1.Add("x-frame-options", "DENY")
	h1.Add("X-Frame-Options", "SAMEORIGIN")
	h1.Add("X-App", "kept")
	reframeH1(&h1, csp)
	var got []string
	for k, v := range h1.All() {
		switch {
		case strings.EqualFold(string(k), cspHeader):
			got = append(got, string(v))
		case strings.EqualFold(string(k), xFrameOptions):
			t.Errorf("h1: X-Frame-Options %q left", v)
		}
	}
	if !slices.Equal(got, want) || string(h1.Peek("X-App")) != "kept" {
		t.Errorf("h1: CSP %q, X-App %q; want %q and kept", got, h1.Peek("X-App"), want)
	}

	h2 := http.Header{"Content-Security-Policy": {"default-src 'self'; frame-ancestors 'none'"}, "X-Frame-Options": {"DENY"}, "X-App": {"kept"}}
	reframeHeader(h2, csp)
	if !slices.Equal(h2.Values(cspHeader), want) || h2.Get(xFrameOptions) != "" || h2.Get("X-App") != "kept" {
		t.Errorf("h2: got %v; want CSP %q, no X-Frame-Options, X-App kept", h2, want)
	}
}

// policyEdge is the fake edge with pol.froog.test: a public URL with an
// allowlist of 64 prefixes (the client's, 192.0.2.1, in the last) and a
// rate limit no benchmark reaches.
func policyEdge(tb testing.TB) *Server {
	s, rts, _ := newFakeEdge(tb, okApp)
	var allow []netip.Prefix
	for i := range 63 {
		allow = append(allow, netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i), 0, 0}), 16))
	}
	allow = append(allow, netip.MustParsePrefix("192.0.2.0/24"))
	u := &store.URL{ID: "u3", AccountID: "a1", Hostname: "pol", SandboxID: "sb1", Port: 8080, Public: true,
		AllowIPs: allow, RateLimit: &store.RateLimit{PerSecond: 1e9, Burst: 1e9}, FrameAncestors: []string{"https://app.example"}}
	rts.mu.Lock()
	rts.routes["pol.froog.test"] = route.NewRoute(u, nil, time.Now())
	rts.mu.Unlock()
	return s
}

// A URL's policy costs decide no allocation: the allowlist's walk and
// the URL's bucket are on every request's path.
func TestPolicyDecideAllocs(t *testing.T) {
	// Not parallel: testing.AllocsPerRun refuses to run beside others.
	s := policyEdge(t)
	c := &call{host: "pol.froog.test", method: "GET", path: "/", ip: netip.MustParseAddr("192.0.2.1")}
	if d := s.decide(c); d.problem != nil {
		t.Fatalf("refused: %s", d.problem.code)
	}
	plain := &call{host: "pub.froog.test", method: "GET", path: "/", ip: c.ip}
	base := testing.AllocsPerRun(100, func() { s.decide(plain) })
	if n := testing.AllocsPerRun(100, func() { s.decide(c) }); n != base {
		t.Errorf("decide with a policy: %v allocations, want %v as without one", n, base)
	}
	c.ip = netip.MustParseAddr("198.51.100.1")
	if d := s.decide(c); d.problem != &errIPRefused {
		t.Errorf("from outside the allowlist: got %+v, want ip_not_allowed", d.problem)
	}
}
