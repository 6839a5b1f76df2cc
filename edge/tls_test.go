package edge

import (
	"crypto/tls"
	"net"
	"strings"
	"testing"

	"froog.tech/froog/certs"
)

// The edge's TLS 1.2 offers AEAD suites only (issue #24 item 7c): a
// client that offers nothing but CBC suites is refused, one that offers
// an AEAD suite gets in.
func TestTLSConfigAEADOnly(t *testing.T) {
	t.Parallel()
	ca, err := certs.OpenLocalCA(t.TempDir(), "froog.test")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{o: Options{GetCertificate: ca.GetCertificate}}
	cfg := s.tlsConfig()
	if cfg.MinVersion != tls.VersionTLS12 || len(cfg.CipherSuites) == 0 {
		t.Fatalf("MinVersion %x, suites %v: want TLS 1.2 and a list of suites", cfg.MinVersion, cfg.CipherSuites)
	}
	secure := map[uint16]bool{}
	for _, cs := range tls.CipherSuites() {
		secure[cs.ID] = true
	}
	for _, id := range cfg.CipherSuites {
		if name := tls.CipherSuiteName(id); !secure[id] || strings.Contains(name, "CBC") || !(strings.Contains(name, "GCM") || strings.Contains(name, "CHACHA20")) {
			t.Errorf("the edge offers %s", name)
		}
	}
	var cbc []uint16
	for _, cs := range append(tls.CipherSuites(), tls.InsecureCipherSuites()...) {
		if strings.Contains(cs.Name, "CBC") {
			cbc = append(cbc, cs.ID)
		}
	}
	for _, tt := range []struct {
		name   string
		suites []uint16
		ok     bool
	}{
		{"CBC only", cbc, false},
		{"AES-GCM", []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}, true},
		{"ChaCha20", []uint16{tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256}, true},
	} {
		sc, cc := net.Pipe()
		go func() {
			defer sc.Close()
			tls.Server(sc, cfg).Handshake()
		}()
		c := tls.Client(cc, &tls.Config{ServerName: "a.froog.test", RootCAs: ca.Pool(), MaxVersion: tls.VersionTLS12, CipherSuites: tt.suites})
		err := c.Handshake()
		c.Close()
		if (err == nil) != tt.ok {
			t.Errorf("TLS 1.2 offering %s: handshake error %v, want success: %v", tt.name, err, tt.ok)
		}
	}
}
