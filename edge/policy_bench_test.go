//go:build bench

package edge

import (
	"net/netip"
	"testing"
)

// BenchmarkPolicy is decide for a URL with the policy's worst case: the
// 64th prefix matches, then the URL's bucket.
func BenchmarkPolicy(b *testing.B) {
	s := policyEdge(b)
	c := &call{host: "pol.froog.test", method: "GET", path: "/", ip: netip.MustParseAddr("192.0.2.1")}
	b.ReportAllocs()
	for b.Loop() {
		if d := s.decide(c); d.problem != nil {
			b.Fatal(d.problem.code)
		}
	}
}
