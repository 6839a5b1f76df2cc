package certs

import (
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"froog.tech/froog/names"
)

// Wildcard serves an operator's certificate for *.DOMAIN to every
// single-label name under the domain; no certificate is ordered. The
// files are read again when either changes (checked at most every few
// seconds), so a renewal done outside froog needs no restart.
type Wildcard struct {
	certFile, keyFile, domain string

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   string // the files' sizes and times when cert was read
	checked time.Time
}

// OpenWildcard reads the certificate and key for domain's wildcard.
func OpenWildcard(certFile, keyFile, domain string) (*Wildcard, error) {
	w := &Wildcard{certFile: certFile, keyFile: keyFile, domain: strings.ToLower(strings.TrimSuffix(domain, "."))}
	if err := w.load(); err != nil {
		return nil, err
	}
	if err := w.cert.Leaf.VerifyHostname("x." + w.domain); err != nil {
		return nil, fmt.Errorf("certs: %s is not a wildcard for *.%s: %w", certFile, w.domain, err)
	}
	return w, nil
}

func (w *Wildcard) stampNow() string {
	var b strings.Builder
	for _, f := range []string{w.certFile, w.keyFile} {
		if fi, err := os.Stat(f); err == nil {
			fmt.Fprintf(&b, "%d/%d;", fi.Size(), fi.ModTime().UnixNano())
		}
	}
	return b.String()
}

func (w *Wildcard) load() error {
	stamp := w.stampNow()
	c, err := tls.LoadX509KeyPair(w.certFile, w.keyFile)
	if err != nil {
		return fmt.Errorf("certs: wildcard certificate: %w", err)
	}
	w.cert, w.stamp = &c, stamp
	return nil
}

// GetCertificate serves the wildcard for a name one label under the
// domain, and nothing for any other name.
func (w *Wildcard) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	if names.Label(hello.ServerName, w.domain) == "" {
		return nil, errors.New("certs: the wildcard does not cover " + hello.ServerName)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if time.Since(w.checked) > 2*time.Second {
		w.checked = time.Now()
		if w.stampNow() != w.stamp {
			if err := w.load(); err != nil {
				// Keep serving the one we have; the operator's half-written
				// files are read again at the next check.
				w.stamp = ""
			}
		}
	}
	return w.cert, nil
}
