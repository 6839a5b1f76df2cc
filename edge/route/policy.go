package route

import (
	"net/netip"
	"strings"

	"froog.tech/froog/store"
)

// Policy is a URL's policy as the edge applies it (store.URL's
// AllowIPs, RateLimit, BandwidthMbit and FrameAncestors). Never changed
// once made.
type Policy struct {
	// allow: the source prefixes let in; nil, any.
	allow []netip.Prefix
	// RateLimit bounds each client address's requests; nil: none.
	RateLimit *store.RateLimit
	// FrameAncestors is the frame-ancestors directive's sources, joined
	// by spaces; "": the app's framing rules stand.
	FrameAncestors string
	// BytesPerSecond caps the URL's bodies and websockets, both ways
	// together, on each edge; 0: no cap.
	BytesPerSecond int64
}

// newPolicy is u's policy, or nil when it has none.
func newPolicy(u *store.URL) *Policy {
	if u.AllowIPs == nil && u.RateLimit == nil && u.FrameAncestors == nil && u.BandwidthMbit <= 0 {
		return nil
	}
	p := &Policy{RateLimit: u.RateLimit, BytesPerSecond: max(u.BandwidthMbit, 0) * 125_000}
	if u.RateLimit != nil && (u.RateLimit.PerSecond <= 0 || u.RateLimit.Burst < 1) {
		p.RateLimit = nil // not the API's: a limit of nothing would close the URL
	}
	if u.AllowIPs != nil {
		// Masked, so that a stored 203.0.113.9/24 means its network; an
		// empty list lets nobody in, as written.
		p.allow = make([]netip.Prefix, 0, len(u.AllowIPs))
		for _, a := range u.AllowIPs {
			if a.IsValid() {
				p.allow = append(p.allow, a.Masked())
			}
		}
	}
	var srcs []string
	for _, o := range u.FrameAncestors {
		// The API checked each origin; one that could end the directive
		// or start another is never emitted all the same.
		if o != "" && !strings.ContainsAny(o, "; ,\t\r\n\"\\") && isPrintable(o) {
			srcs = append(srcs, o)
		}
	}
	if u.FrameAncestors != nil {
		p.FrameAncestors = strings.Join(srcs, " ")
		if p.FrameAncestors == "" {
			p.FrameAncestors = "'none'"
		}
	}
	return p
}

// Allows reports whether a request from source address ip may reach
// the URL. An IPv4-mapped IPv6 address is its IPv4 address: a
// dual-stack listener's IPv4 client matches the IPv4 rules.
func (p *Policy) Allows(ip netip.Addr) bool {
	if p == nil || p.allow == nil {
		return true
	}
	ip = ip.Unmap()
	for _, a := range p.allow {
		if a.Contains(ip) {
			return true
		}
	}
	return false
}

// isPrintable reports whether s is printable ASCII.
func isPrintable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}
