package api

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzURLPolicy: whatever allow_ips, rate_limit, frame_ancestors and
// routes a request holds, what the API accepts is what the edge can
// apply as written: masked prefixes, no IPv4-mapped ones, a limit that
// lets something through, origins with nothing that could end the
// frame-ancestors directive or the header, and at most 8 routes to other
// ports, each prefix a plain path the edge matches byte for byte.
func FuzzURLPolicy(f *testing.F) {
	for _, s := range [][4]string{
		{`["203.0.113.0/24","2001:db8::/32","198.51.100.7"]`, `{"per_second":10,"burst":20}`, `["https://app.example","https://*.example.com:8443/","'self'"]`, `[{"prefix":"/api/","port":8000},{"prefix":"/api/v2/","port":8001}]`},
		{`null`, `null`, `[]`, `null`},
		{`["::ffff:1.2.3.4/128","fe80::1%eth0","1.2.3.4/33"]`, `{"per_second":0}`, `["https://a.example; script-src *","'none'"]`, `[{"prefix":"/api/../","port":8000},{"prefix":"/%61pi/","port":3000}]`},
		{`"x"`, `{"per_second":1e309}`, `["HTTPS://A.EXAMPLE:0443"]`, `[{"prefix":"/a/","port":8000},{"prefix":"/a/","port":8001},{"prefix":"/b","port":0}]`},
	} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	f.Fuzz(func(t *testing.T, allow, rate, frame, routes string) {
		own := 3000
		req := urlRequest{Port: &own, AllowIPs: json.RawMessage(allow), RateLimit: json.RawMessage(rate), FrameAncestors: json.RawMessage(frame), Routes: json.RawMessage(routes)}
		if !json.Valid(req.AllowIPs) || !json.Valid(req.RateLimit) || !json.Valid(req.FrameAncestors) || !json.Valid(req.Routes) {
			return // the request's decoder refuses it first
		}
		p, err := parsePolicy(&req)
		if err != nil {
			if e, ok := err.(*Error); !ok || e.Status != 400 || strings.ContainsAny(e.Message, "\r\n") {
				t.Fatalf("refused with %#v, want a 400 on one line", err)
			}
			return
		}
		if len(p.allow) > maxAllowIPs || len(p.frame) > maxFrameAncestors {
			t.Fatalf("accepted %d prefixes and %d origins", len(p.allow), len(p.frame))
		}
		for _, a := range p.allow {
			if !a.IsValid() || a.Masked() != a || a.Addr().Is4In6() || a.Addr().Zone() != "" {
				t.Fatalf("accepted prefix %v", a)
			}
		}
		if r := p.rate; r != nil && (!(r.PerSecond > 0) || r.PerSecond > maxPerSecond || r.Burst < 1 || r.Burst > maxBurst) {
			t.Fatalf("accepted rate limit %+v", *r)
		}
		if len(p.routes) > maxRoutes {
			t.Fatalf("accepted %d routes", len(p.routes))
		}
		seen := map[string]bool{}
		for _, r := range p.routes {
			x := r.Prefix
			if seen[x] || r.Port < 1 || r.Port > 65535 || r.Port == own || len(x) > maxRoutePrefix || len(x) < 1 || x[0] != '/' || x[len(x)-1] != '/' ||
				strings.Contains(x, "..") || strings.Contains(x, "//") || strings.Contains(x, "/./") || strings.ContainsFunc(x, func(c rune) bool { return c <= ' ' || c >= 0x7f || strings.ContainsRune("%?#\\", c) }) {
				t.Fatalf("accepted route %+v", r)
			}
			seen[x] = true
		}
		for _, o := range p.frame {
			if o == "" || strings.ContainsAny(o, " \t\r\n;,\"\\\x00") || (strings.Contains(o, "'") && o != "'self'" && o != "'none'") {
				t.Fatalf("accepted origin %q", o)
			}
		}
	})
}
