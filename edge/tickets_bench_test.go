//go:build bench

package edge

import (
	"crypto/tls"
	"testing"
)

// BenchmarkResumedHandshake: a TLS 1.3 handshake that resumes, server and
// client over a pipe, with Go's own ticket keys and with the shared ones.
func BenchmarkResumedHandshake(b *testing.B) {
	for _, shared := range []bool{false, true} {
		b.Run(map[bool]string{false: "go-keys", true: "shared-keys"}[shared], func(b *testing.B) {
			r := newTicketRig(b)
			cfg := (&Server{o: Options{GetCertificate: r.ca.GetCertificate}}).tlsConfig()
			if shared {
				cfg, _ = r.edge(secretKey(1))
			}
			cache := tls.NewLRUClientSessionCache(1)
			resumed := 0
			for b.Loop() {
				if r.connect(cfg, tls.VersionTLS13, cache) {
					resumed++
				}
			}
			if resumed == 0 {
				b.Fatal("no handshake resumed")
			}
		})
	}
}
