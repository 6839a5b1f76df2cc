//go:build bench

package route

import (
	"fmt"
	"testing"
	"time"

	"froog.tech/froog/store"
)

// BenchmarkTableChange is one change to a table of 100,000 URLs, as the
// feed applies it: clone, put, and flatten when due.
func BenchmarkTableChange(b *testing.B) {
	tb := tableWith(100_000).cur.Load()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tb = tb.clone()
		tb.putURL(&store.URL{ID: fmt.Sprint("new_", i%5000), Hostname: fmt.Sprint("new-", i%5000), SandboxID: "sbx_2", Port: i % 5000, CreatedAt: time.Time{}})
		if tb.heavy() {
			tb = tb.flat()
		}
	}
}

func BenchmarkPortFor(b *testing.B) {
	rt := NewRoute(&store.URL{Port: 3000, Routes: []store.PathRoute{{Prefix: "/api/", Port: 8000}, {Prefix: "/api/v2/", Port: 8002}}}, nil, time.Time{})
	b.ReportAllocs()
	for b.Loop() {
		rt.PortFor("/api/v2/users/7")
	}
}

func BenchmarkLookup(b *testing.B) {
	rs := tableWith(100_000)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rs.Lookup("box-50000-abcdef.froog.test:8443")
	}
}

func BenchmarkCheck(b *testing.B) {
	rt := &Route{TokenHash: store.HashSecret("pt_own"), viewers: map[string]time.Time{}}
	now := time.Now()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, ok := rt.Check("pt_own", now); !ok {
			b.Fatal("refused")
		}
	}
}
