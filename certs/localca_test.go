package certs_test

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"

	"froog.tech/froog/certs"
)

func TestLocalCA(t *testing.T) {
	dir := t.TempDir()
	ca, err := certs.OpenLocalCA(dir, "froog.localhost")
	if err != nil {
		t.Fatal(err)
	}
	c, err := ca.GetCertificate(&tls.ClientHelloInfo{ServerName: "My-Box-3000-abc123.froog.localhost"})
	if err != nil {
		t.Fatal(err)
	}
	again, _ := ca.GetCertificate(&tls.ClientHelloInfo{ServerName: "my-box-3000-abc123.froog.localhost"})
	if again != c {
		t.Fatal("a second handshake issued a new certificate instead of using the cached one")
	}
	// It verifies against ca.pem, which a user hands to curl --cacert.
	pemBytes, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemBytes) {
		t.Fatal("ca.pem holds no certificate")
	}
	if _, err := c.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "my-box-3000-abc123.froog.localhost"}); err != nil {
		t.Fatalf("leaf does not verify: %v", err)
	}
	for _, name := range []string{"", "example.com", "froog.localhost.evil.com", "xfroog.localhost"} {
		if _, err := ca.GetCertificate(&tls.ClientHelloInfo{ServerName: name}); err == nil {
			t.Errorf("%q: issued a certificate outside the domain", name)
		}
	}
	// The root is created once: a reopen keeps it.
	ca2, err := certs.OpenLocalCA(dir, "froog.localhost")
	if err != nil {
		t.Fatal(err)
	}
	c2, _ := ca2.GetCertificate(&tls.ClientHelloInfo{ServerName: "x.froog.localhost"})
	if _, err := c2.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "x.froog.localhost"}); err != nil {
		t.Fatalf("after reopen: %v", err)
	}
}
