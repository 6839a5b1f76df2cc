//go:build bench

package names

import (
	"testing"
)

func BenchmarkLabel(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		Label("my-box-3000-k7f2qx.froog.test:8443", "froog.test")
	}
}
