package api_test

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"froog.tech/froog/api"
	"froog.tech/froog/store"
)

type policyOut struct {
	AllowIPs       []string         `json:"allow_ips"`
	RateLimit      *store.RateLimit `json:"rate_limit"`
	BandwidthMbit  int64            `json:"bandwidth_mbit"`
	FrameAncestors []string         `json:"frame_ancestors"`
}

// The owner sets a URL's policy on POST …/urls; absent keeps it, null
// takes it off; the answer and the store say the same.
func TestURLPolicy(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "box"}).want(t, 202, "")
		var u policyOut
		e.do("POST", "/v1/sandboxes/box/urls", e.admin, map[string]any{"port": 3000}).want(t, 201, "").json(t, &u)
		if u.AllowIPs == nil || len(u.AllowIPs) != 0 || u.RateLimit != nil || u.FrameAncestors == nil || len(u.FrameAncestors) != 0 {
			t.Fatalf("a new URL: got %+v, want no policy ([] and absent)", u)
		}
		e.do("POST", "/v1/sandboxes/box/urls", e.admin, map[string]any{"port": 3000,
			"allow_ips":       []string{"203.0.113.0/24", "2001:db8::/32", "198.51.100.7", "2001:db8:1::1"},
			"rate_limit":      map[string]any{"per_second": 10, "burst": 20},
			"bandwidth_mbit":  50,
			"frame_ancestors": []string{"https://App.Example", "https://*.example.com:8443/", "'self'"},
		}).want(t, 200, "").json(t, &u)
		wantAllow := []string{"203.0.113.0/24", "2001:db8::/32", "198.51.100.7/32", "2001:db8:1::1/128"}
		wantFrame := []string{"https://app.example", "https://*.example.com:8443", "'self'"}
		if !slices.Equal(u.AllowIPs, wantAllow) || u.RateLimit == nil || *u.RateLimit != (store.RateLimit{PerSecond: 10, Burst: 20}) || u.BandwidthMbit != 50 || !slices.Equal(u.FrameAncestors, wantFrame) {
			t.Fatalf("policy set: got %+v, want %v, 10/s burst 20, 50 Mbit/s, %v", u, wantAllow, wantFrame)
		}
		st := storedURL(t, e, "box", 3000)
		if len(st.AllowIPs) != 4 || st.AllowIPs[2] != netip.MustParsePrefix("198.51.100.7/32") || st.RateLimit.Burst != 20 || st.BandwidthMbit != 50 || !slices.Equal(st.FrameAncestors, wantFrame) {
			t.Fatalf("stored: %+v", st)
		}
		// Absent keeps each; burst defaults to per_second rounded up.
		u = policyOut{}
		e.do("POST", "/v1/sandboxes/box/urls", e.admin, map[string]any{"port": 3000, "rate_limit": map[string]any{"per_second": 0.5}}).want(t, 200, "").json(t, &u)
		if !slices.Equal(u.AllowIPs, wantAllow) || *u.RateLimit != (store.RateLimit{PerSecond: 0.5, Burst: 1}) || u.BandwidthMbit != 50 || !slices.Equal(u.FrameAncestors, wantFrame) {
			t.Fatalf("absent members: got %+v, want them kept and burst 1", u)
		}
		// null and [] take them off.
		u = policyOut{}
		e.do("POST", "/v1/sandboxes/box/urls", e.admin, `{"port": 3000, "allow_ips": null, "rate_limit": null, "bandwidth_mbit": null, "frame_ancestors": []}`).want(t, 200, "").json(t, &u)
		st = storedURL(t, e, "box", 3000)
		if len(u.AllowIPs) != 0 || u.RateLimit != nil || u.BandwidthMbit != 0 || len(u.FrameAncestors) != 0 || st.AllowIPs != nil || st.RateLimit != nil || st.BandwidthMbit != 0 || st.FrameAncestors != nil {
			t.Fatalf("taken off: got %+v, stored %+v", u, st)
		}
		// The list shows it too.
		e.do("POST", "/v1/sandboxes/box/urls", e.admin, map[string]any{"port": 3000, "allow_ips": []string{"10.0.0.0/8"}}).want(t, 200, "")
		var list []policyOut
		e.do("GET", "/v1/sandboxes/box/urls", e.admin, nil).want(t, 200, "").json(t, &list)
		if len(list) != 1 || !slices.Equal(list[0].AllowIPs, []string{"10.0.0.0/8"}) {
			t.Fatalf("list: got %+v", list)
		}
	})
}

// Bad policy input is a 400 that says what to write, and changes
// nothing: not the policy, not the token, not the title.
func TestURLPolicyRefused(t *testing.T) {
	many := func(n int, f func(i int) string) []string {
		var out []string
		for i := range n {
			out = append(out, f(i))
		}
		return out
	}
	for _, tc := range []struct {
		name string
		body map[string]any
		says string
	}{
		{"not a CIDR", map[string]any{"allow_ips": []string{"203.0.113.0/33"}}, "not a CIDR"},
		{"not an address", map[string]any{"allow_ips": []string{"example.com"}}, "not an IP address"},
		{"host bits set", map[string]any{"allow_ips": []string{"203.0.113.9/24"}}, "did you mean 203.0.113.0/24"},
		{"an IPv4-mapped prefix", map[string]any{"allow_ips": []string{"::ffff:203.0.113.0/120"}}, "write it as IPv4"},
		{"a zone", map[string]any{"allow_ips": []string{"fe80::1%eth0"}}, "not an IP address"},
		{"not a list", map[string]any{"allow_ips": "10.0.0.0/8"}, "list of strings"},
		{"too many prefixes", map[string]any{"allow_ips": many(65, func(i int) string { return fmt.Sprintf("10.0.%d.0/24", i) })}, "at most 64"},
		{"no per_second", map[string]any{"rate_limit": map[string]any{"burst": 5}}, "per_second is required"},
		{"per_second 0", map[string]any{"rate_limit": map[string]any{"per_second": 0}}, "per_second"},
		{"per_second negative", map[string]any{"rate_limit": map[string]any{"per_second": -1}}, "per_second"},
		{"per_second too high", map[string]any{"rate_limit": map[string]any{"per_second": 10001}}, "at most 10000"},
		{"burst 0", map[string]any{"rate_limit": map[string]any{"per_second": 1, "burst": 0}}, "burst"},
		{"an unknown member", map[string]any{"rate_limit": map[string]any{"per_second": 1, "per_minute": 5}}, "rate_limit"},
		{"not an object", map[string]any{"rate_limit": 10}, "rate_limit"},
		{"bandwidth 0", map[string]any{"bandwidth_mbit": 0}, "bandwidth_mbit is a whole number"},
		{"bandwidth too high", map[string]any{"bandwidth_mbit": 10001}, "from 1 to 10000"},
		{"bandwidth a fraction", map[string]any{"bandwidth_mbit": 1.5}, "bandwidth_mbit"},
		{"bandwidth a string", map[string]any{"bandwidth_mbit": "50"}, "bandwidth_mbit"},
		{"a path", map[string]any{"frame_ancestors": []string{"https://app.example/embed"}}, "not an origin"},
		{"a header's end", map[string]any{"frame_ancestors": []string{"https://a.example; script-src *"}}, "not an origin"},
		{"a line's end", map[string]any{"frame_ancestors": []string{"https://a.example\r\nSet-Cookie: x=y"}}, "not an origin"},
		{"another scheme", map[string]any{"frame_ancestors": []string{"javascript://a.example"}}, "not an origin"},
		{"no scheme", map[string]any{"frame_ancestors": []string{"app.example"}}, "not an origin"},
		{"a bare star", map[string]any{"frame_ancestors": []string{"*"}}, "not an origin"},
		{"a star not first", map[string]any{"frame_ancestors": []string{"https://a.*.example"}}, "not an origin"},
		{"a bad port", map[string]any{"frame_ancestors": []string{"https://a.example:99999"}}, "not an origin"},
		{"'none' with another", map[string]any{"frame_ancestors": []string{"'none'", "https://a.example"}}, "stands alone"},
		{"too many origins", map[string]any{"frame_ancestors": many(17, func(i int) string { return fmt.Sprintf("https://a%d.example", i) })}, "at most 16"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, backends[0].open(t), api.Options{})
			e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "box"}).want(t, 202, "")
			e.do("POST", "/v1/sandboxes/box/urls", e.admin, map[string]any{"port": 3000, "title": "kept", "allow_ips": []string{"192.0.2.0/24"}}).want(t, 201, "")
			before := storedURL(t, e, "box", 3000)
			body := map[string]any{"port": 3000, "title": "changed"}
			for k, v := range tc.body {
				body[k] = v
			}
			r := e.do("POST", "/v1/sandboxes/box/urls", e.admin, body).want(t, 400, "invalid_value")
			var eb struct{ Error struct{ Message string } }
			json.Unmarshal(r.body, &eb)
			if !strings.Contains(eb.Error.Message, tc.says) || strings.ContainsAny(eb.Error.Message, "\r\n") {
				t.Errorf("message %q: want it to say %q, on one line", eb.Error.Message, tc.says)
			}
			after := storedURL(t, e, "box", 3000)
			if after.Title != "kept" || after.TokenHash != before.TokenHash || !slices.Equal(after.AllowIPs, before.AllowIPs) || !after.UpdatedAt.Equal(before.UpdatedAt) {
				t.Errorf("a refused request changed the URL: before %+v, after %+v", before, after)
			}
		})
	}
}

// PATCH …/urls/{port} changes the policy alone: a private URL keeps its
// token (POST without public would make a new one), its title and name.
func TestURLPolicyPatch(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "box"}).want(t, 202, "")
		e.do("PATCH", "/v1/sandboxes/box/urls/3000", e.admin, map[string]any{"allow_ips": []string{"10.0.0.0/8"}}).want(t, 404, "not_found")
		var made struct{ URL string }
		e.do("POST", "/v1/sandboxes/box/urls", e.admin, map[string]any{"port": 3000, "title": "kept"}).want(t, 201, "").json(t, &made)
		before := storedURL(t, e, "box", 3000)
		var u struct {
			URL, Title string
			policyOut
		}
		e.do("PATCH", "/v1/sandboxes/box/urls/3000", e.admin, map[string]any{"allow_ips": []string{"10.0.0.0/8"}, "frame_ancestors": []string{"'self'"}}).want(t, 200, "").json(t, &u)
		after := storedURL(t, e, "box", 3000)
		if u.URL != made.URL || u.Title != "kept" || after.TokenHash != before.TokenHash || after.Hostname != before.Hostname {
			t.Fatalf("PATCH changed more than the policy: link %q (was %q), title %q, token changed %v", u.URL, made.URL, u.Title, after.TokenHash != before.TokenHash)
		}
		if !slices.Equal(u.AllowIPs, []string{"10.0.0.0/8"}) || !slices.Equal(after.FrameAncestors, []string{"'self'"}) || after.RateLimit != nil {
			t.Fatalf("PATCH policy: got %+v, stored %+v", u.policyOut, after)
		}
		e.do("PATCH", "/v1/sandboxes/box/urls/3000", e.admin, map[string]any{"allow_ips": []string{"10.0.0.1/8"}}).want(t, 400, "invalid_value")
		e.do("PATCH", "/v1/sandboxes/box/urls/3000", e.admin, map[string]any{"public": true}).want(t, 400, "")
		if got := storedURL(t, e, "box", 3000); !slices.Equal(got.AllowIPs, after.AllowIPs) || got.Public {
			t.Fatalf("a refused PATCH changed the URL: %+v", got)
		}
		e.do("PATCH", "/v1/sandboxes/box/urls/3000", e.admin, `{"allow_ips": null}`).want(t, 200, "")
		if got := storedURL(t, e, "box", 3000); got.AllowIPs != nil || !slices.Equal(got.FrameAncestors, []string{"'self'"}) {
			t.Fatalf("PATCH allow_ips null: stored %+v, want it off and frame_ancestors kept", got)
		}
	})
}
