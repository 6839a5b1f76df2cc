package certs_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"froog.tech/froog/certs"
)

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    certs.Config
		want []string // parts of the error, one per problem; none: valid
	}{
		{"acme by default", certs.Config{Domain: domain}, nil},
		{"local CA", certs.Config{Domain: domain, LocalCADir: "ca"}, nil},
		{"wildcard", certs.Config{Domain: domain, WildcardCert: "w.crt", WildcardKey: "w.key"}, nil},
		{"acme in full", certs.Config{Domain: domain, ACME: certs.ACMEConfig{Directory: "https://ca.test/dir", Email: "a@b.test",
			EABKeyID: "kid", EABMACKey: "mac", RootsFile: "roots.pem", MaxOrders: 2}}, nil},
		{"a certificate without its key", certs.Config{WildcardCert: "w.crt"}, []string{"go together"}},
		{"a key without its certificate", certs.Config{WildcardKey: "w.key"}, []string{"go together"}},
		{"two sources", certs.Config{LocalCADir: "ca", WildcardCert: "w.crt", WildcardKey: "w.key"}, []string{"two sources"}},
		{"half a binding", certs.Config{ACME: certs.ACMEConfig{EABKeyID: "kid"}}, []string{"external account binding"}},
		{"every problem at once", certs.Config{LocalCADir: "ca", WildcardCert: "w.crt", ACME: certs.ACMEConfig{EABMACKey: "mac"}},
			[]string{"go together", "two sources", "external account binding"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.c.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("got %v, want no error", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("got no error, want %q", tc.want)
			}
			if got := strings.Count(err.Error(), "\n") + 1; got != len(tc.want) {
				t.Errorf("got %d problems (%v), want %d", got, err, len(tc.want))
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("got %v, want it to say %q", err, w)
				}
			}
		})
	}
}

// fakeStore stands in for the store where nothing may touch it: ACME
// reads it only when a certificate is needed.
type fakeStore struct{ certs.Store }

// writeWildcard writes a certificate for *.domain and its key, from a
// local CA of its own, and gives their paths.
func writeWildcard(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	dir := t.TempDir()
	ca, err := certs.OpenLocalCA(dir, "*."+domain)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ca.GetCertificate(&tls.ClientHelloInfo{ServerName: "*." + domain})
	if err != nil {
		t.Fatal(err)
	}
	key, err := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "w.crt"), filepath.Join(dir, "w.key")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate[0]}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}), 0o600)
	return certFile, keyFile
}

func TestOpen(t *testing.T) {
	const routed, stranger = "box-3000-abc123." + domain, "nobody-80-zzzzzz." + domain
	names := fakeNames{routed: "acct_1"}
	caDir := t.TempDir()
	wCert, wKey := writeWildcard(t)
	notPEM := filepath.Join(t.TempDir(), "roots.pem")
	os.WriteFile(notPEM, []byte("not a certificate"), 0o600)
	deps := certs.Deps{Store: fakeStore{}, Names: names, HTTPPort: 8081, TLSPort: 8443}
	for _, tc := range []struct {
		name    string
		c       certs.Config
		d       certs.Deps
		want    string // the source's kind; empty: Open fails
		serves  bool   // a handshake for the routed name gets a certificate, the stranger none
		wantErr string
	}{
		{name: "local CA", c: certs.Config{Domain: domain, LocalCADir: caDir}, d: deps, want: "local-ca", serves: true},
		{name: "local CA, no store needed", c: certs.Config{Domain: domain, LocalCADir: caDir}, d: certs.Deps{Names: names}, want: "local-ca", serves: true},
		{name: "wildcard", c: certs.Config{Domain: domain, WildcardCert: wCert, WildcardKey: wKey}, d: deps, want: "wildcard"},
		{name: "acme", c: certs.Config{Domain: domain}, d: deps, want: "acme"},
		{name: "acme with roots", c: certs.Config{Domain: domain, ACME: certs.ACMEConfig{RootsFile: caDir + "/ca.pem", MaxOrders: 1}}, d: deps, want: "acme"},
		{name: "invalid config", c: certs.Config{Domain: domain, LocalCADir: caDir, WildcardCert: wCert}, d: deps, wantErr: "go together"},
		{name: "no domain", c: certs.Config{LocalCADir: caDir}, d: deps, wantErr: "domain"},
		{name: "wildcard for another domain", c: certs.Config{Domain: "other.test", WildcardCert: wCert, WildcardKey: wKey}, d: deps, wantErr: "not a wildcard"},
		{name: "missing wildcard", c: certs.Config{Domain: domain, WildcardCert: wCert + ".gone", WildcardKey: wKey}, d: deps, wantErr: "wildcard"},
		{name: "acme without a store", c: certs.Config{Domain: domain}, d: certs.Deps{Names: names, HTTPPort: 1, TLSPort: 2}, wantErr: "store"},
		{name: "acme without ports", c: certs.Config{Domain: domain}, d: certs.Deps{Store: fakeStore{}, Names: names}, wantErr: "ports"},
		{name: "acme roots not PEM", c: certs.Config{Domain: domain, ACME: certs.ACMEConfig{RootsFile: notPEM}}, d: deps, wantErr: "no PEM"},
		{name: "acme roots missing", c: certs.Config{Domain: domain, ACME: certs.ACMEConfig{RootsFile: notPEM + ".gone"}}, d: deps, wantErr: "roots"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, err := certs.Open(tc.c, tc.d)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want an error saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("got %v, want a %s source", err, tc.want)
			}
			if got := src.Kind(); got != tc.want {
				t.Fatalf("got a %s source, want %s", got, tc.want)
			}
			if tc.want != "acme" {
				// Only ACME answers challenges; anything else is the edge's.
				w := httptest.NewRecorder()
				if src.HTTPChallenge(w, httptest.NewRequest("GET", "http://"+routed+"/.well-known/acme-challenge/x", nil)) {
					t.Error("a source other than ACME answered an HTTP-01 challenge")
				}
				c, err := src.GetCertificate(&tls.ClientHelloInfo{ServerName: routed})
				if err != nil || c.Leaf.VerifyHostname(routed) != nil {
					t.Fatalf("%s: got %v, want a certificate for it", routed, err)
				}
			}
			if tc.serves {
				if _, err := src.GetCertificate(&tls.ClientHelloInfo{ServerName: stranger}); err == nil {
					t.Errorf("%s: a certificate for a name no URL holds", stranger)
				}
			}
		})
	}
}
