package route

import (
	"net/netip"
	"testing"

	"froog.tech/froog/store"
)

func TestPolicyAllows(t *testing.T) {
	t.Parallel()
	pfx := func(ss ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, s := range ss {
			out = append(out, netip.MustParsePrefix(s))
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		allow []netip.Prefix
		ip    string
		want  bool
	}{
		{"in an IPv4 prefix", pfx("203.0.113.0/24"), "203.0.113.9", true},
		{"outside it", pfx("203.0.113.0/24"), "203.0.114.1", false},
		{"IPv4-mapped IPv6 matches the IPv4 rule", pfx("203.0.113.0/24"), "::ffff:203.0.113.9", true},
		{"IPv4-mapped IPv6 outside it", pfx("203.0.113.0/24"), "::ffff:198.51.100.1", false},
		{"an IPv4 client never matches an IPv6 rule", pfx("::/0"), "203.0.113.9", false},
		{"in an IPv6 prefix", pfx("2001:db8::/32"), "2001:db8:1::5", true},
		{"outside it", pfx("2001:db8::/32"), "2001:db9::5", false},
		{"a stored host bits prefix means its network", pfx("203.0.113.77/24"), "203.0.113.1", true},
		{"one address", pfx("198.51.100.7/32"), "198.51.100.7", true},
		{"its neighbour", pfx("198.51.100.7/32"), "198.51.100.8", false},
		{"no source address", pfx("0.0.0.0/0"), "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := newPolicy(&store.URL{AllowIPs: tc.allow})
			var ip netip.Addr
			if tc.ip != "" {
				ip = netip.MustParseAddr(tc.ip)
			}
			if got := p.Allows(ip); got != tc.want {
				t.Errorf("Allows(%q) with %v: got %v, want %v", tc.ip, tc.allow, got, tc.want)
			}
		})
	}
	if p := newPolicy(&store.URL{}); p != nil || !p.Allows(netip.MustParseAddr("192.0.2.1")) {
		t.Errorf("no policy: got %+v, want nil, which allows every address", p)
	}
}

func TestPolicyFrameAncestors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   []string
		want string
	}{
		{nil, ""},
		{[]string{"https://app.example", "'self'"}, "https://app.example 'self'"},
		// What could end the directive, or start a header, is never
		// emitted; with nothing left, nobody may frame.
		{[]string{"https://a.example; script-src *", "https://b.example\r\nX: y"}, "'none'"},
		{[]string{"https://a.example", "x,y"}, "https://a.example"},
	} {
		p := newPolicy(&store.URL{FrameAncestors: tc.in})
		got := ""
		if p != nil {
			got = p.FrameAncestors
		}
		if got != tc.want {
			t.Errorf("frame_ancestors %q: got %q, want %q", tc.in, got, tc.want)
		}
	}
}
