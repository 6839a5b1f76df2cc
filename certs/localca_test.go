package certs_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
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

// fakeNames is a route table holding a fixed set of names.
type fakeNames map[string]string

func (n fakeNames) Owner(name string) (string, error) {
	if acct, ok := n[name]; ok {
		return acct, nil
	}
	return "", errors.New("no URL holds this name")
}

// With a decision function, the local CA issues only for names that
// route, like the ACME path.
func TestLocalCANames(t *testing.T) {
	names := fakeNames{"box-3000-abc123.froog.localhost": "acct_1", "froog.localhost": "acct_1"}
	ca, err := certs.NewLocalCA(certs.LocalCAOptions{Dir: t.TempDir(), Domains: []string{"froog.localhost"}, Names: names})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		want bool
	}{
		{"box-3000-abc123.froog.localhost", true},
		{"BOX-3000-abc123.froog.localhost.", true},
		{"froog.localhost", true},
		{"box-3000-zzzzzz.froog.localhost", false},
		{"a.b.froog.localhost", false},
		{"box-3000-abc123.froog.localhost.evil.com", false},
		{"example.com", false},
		{"", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ca.GetCertificate(&tls.ClientHelloInfo{ServerName: tt.name})
			if got := err == nil && c != nil; got != tt.want {
				t.Fatalf("got a certificate %t (%v), want %t", got, err, tt.want)
			}
		})
	}
	if got := ca.Cached(); got != 2 {
		t.Fatalf("got %d cached leaves, want 2 (refused names are not cached)", got)
	}
}

// The cache of leaves is bounded and drops the least recently used.
func TestLocalCACacheBound(t *testing.T) {
	for _, max := range []int{0, 1, 3} {
		t.Run(fmt.Sprint(max), func(t *testing.T) {
			ca, err := certs.NewLocalCA(certs.LocalCAOptions{Dir: t.TempDir(), Domains: []string{"froog.localhost"}, MaxCached: max})
			if err != nil {
				t.Fatal(err)
			}
			bound := max
			if bound == 0 {
				bound = 1024
			}
			get := func(i int) *tls.Certificate {
				t.Helper()
				c, err := ca.GetCertificate(&tls.ClientHelloInfo{ServerName: fmt.Sprintf("n%d.froog.localhost", i)})
				if err != nil {
					t.Fatal(err)
				}
				return c
			}
			first := get(0)
			for i := 1; i < bound+20; i++ {
				if i < bound && get(0) != first {
					t.Fatalf("after %d names, the most recently used leaf was dropped", i)
				}
				get(i)
				if got := ca.Cached(); got > bound {
					t.Fatalf("got %d cached leaves, want at most %d", got, bound)
				}
			}
			for i := 0; i < bound; i++ { // bound names used after the first
				get(bound + 20 + i)
			}
			if get(0) == first {
				t.Fatal("a leaf unused for longer than the bound stayed cached")
			}
		})
	}
}
