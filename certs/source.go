package certs

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"

	"github.com/prometheus/client_golang/prometheus"
)

// Config says where the edge's certificates come from: a local CA when
// LocalCADir is set, an operator's wildcard when WildcardCert is, ACME
// otherwise. It is plain data, filled from flags; Validate checks it and
// Open acts on it.
type Config struct {
	// Domain is the public-URL domain; certificates are for the names one
	// label below it. Required.
	Domain string
	// LocalCADir holds a local CA (ca.pem, created the first time) that
	// signs the edge's certificates: development and tests. Empty: none.
	LocalCADir string
	// WildcardCert and WildcardKey are PEM files of a certificate for
	// *.Domain and its key, served for every name instead of ordering one
	// per name, and reread when they change. Both or neither.
	WildcardCert, WildcardKey string
	// ACME configures on-demand certificates, the source when neither of
	// the above is set.
	ACME ACMEConfig
}

// ACMEConfig is the ACME part of Config.
type ACMEConfig struct {
	// Directory is the ACME directory URL; empty means Let's Encrypt.
	Directory string
	// Email is the ACME account's contact address; empty: none.
	Email string
	// EABKeyID and EABMACKey (base64url) bind the ACME account to an
	// external one, for CAs that want it. Both or neither.
	EABKeyID, EABMACKey string
	// RootsFile is a PEM file of roots to trust, beside the system's, for
	// the CA's own HTTPS (a private CA, tests). Empty: the system's.
	RootsFile string
	// MaxOrders bounds the orders this edge runs at once; 0 (or less)
	// means 4.
	MaxOrders int
}

// Validate reports every problem of c at once.
func (c Config) Validate() error {
	var errs []error
	if (c.WildcardCert == "") != (c.WildcardKey == "") {
		errs = append(errs, errors.New("certs: a wildcard certificate and its key go together"))
	}
	if c.LocalCADir != "" && c.WildcardCert != "" {
		errs = append(errs, errors.New("certs: a local CA and a wildcard certificate are two sources of certificates: give one"))
	}
	if (c.ACME.EABKeyID == "") != (c.ACME.EABMACKey == "") {
		errs = append(errs, errors.New("certs: an external account binding needs both its key id and its MAC key"))
	}
	return errors.Join(errs...)
}

// Deps are what Open's sources work with, beyond the configuration.
type Deps struct {
	// Store keeps ACME's certificates, accounts and locks, and the
	// accounts' allowances. Required for ACME.
	Store Store
	// Names is the edge's route table: ACME orders, and the local CA
	// issues, only for names it gives an owner for. Required for ACME;
	// nil lets the local CA issue for any name under the domain.
	Names Names
	// HTTPPort and TLSPort are the edge's listeners' ports, where ACME
	// challenges are answered. Required for ACME.
	HTTPPort, TLSPort int
	Registerer        prometheus.Registerer
	Logger            *slog.Logger
}

// Source is the certificate source Open chose.
type Source struct {
	kind  string // "local-ca", "wildcard" or "acme"
	get   func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	acme  *ACME     // nil but for ACME
	ca    *LocalCA  // nil but for the local CA
	wild  *Wildcard // nil but for the wildcard
	store Store     // ACME's certificate storage
}

// Open chooses the source c names and opens it: it reads the local CA's
// root (creating it the first time), or the wildcard's files, or builds
// the ACME issuer, which contacts nobody until a certificate is needed.
func Open(c Config, d Deps) (*Source, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.Domain == "" {
		return nil, errors.New("certs: a domain is required")
	}
	switch {
	case c.LocalCADir != "":
		ca, err := NewLocalCA(LocalCAOptions{Dir: c.LocalCADir, Domains: []string{c.Domain}, Names: d.Names})
		if err != nil {
			return nil, err
		}
		return &Source{kind: "local-ca", get: ca.GetCertificate, ca: ca}, nil
	case c.WildcardCert != "":
		w, err := OpenWildcard(c.WildcardCert, c.WildcardKey, c.Domain)
		if err != nil {
			return nil, err
		}
		return &Source{kind: "wildcard", get: w.GetCertificate, wild: w}, nil
	}
	roots, err := readRoots(c.ACME.RootsFile)
	if err != nil {
		return nil, err
	}
	a, err := NewACME(ACMEOptions{Store: d.Store, Names: d.Names, CA: c.ACME.Directory, Email: c.ACME.Email,
		EABKeyID: c.ACME.EABKeyID, EABMACKey: c.ACME.EABMACKey, Roots: roots, MaxOrders: c.ACME.MaxOrders,
		HTTPPort: d.HTTPPort, TLSPort: d.TLSPort, Registerer: d.Registerer, Logger: d.Logger})
	if err != nil {
		return nil, err
	}
	return &Source{kind: "acme", get: a.GetCertificate, acme: a, store: d.Store}, nil
}

// readRoots gives the system's roots and those in file, or nil (the
// system's) when file is empty.
func readRoots(file string) (*x509.CertPool, error) {
	if file == "" {
		return nil, nil
	}
	pemBytes, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("certs: ACME CA roots: %w", err)
	}
	roots, err := x509.SystemCertPool()
	if err != nil {
		roots = x509.NewCertPool()
	}
	if !roots.AppendCertsFromPEM(pemBytes) {
		return nil, fmt.Errorf("certs: ACME CA roots %s: no PEM certificate in it", file)
	}
	return roots, nil
}

// GetCertificate gives the certificate for a TLS handshake
// (tls.Config.GetCertificate).
func (s *Source) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	return s.get(hello)
}

// Close stops the source's background work (ACME's certificate
// maintenance; the other sources have none). It may be called more than
// once.
func (s *Source) Close() error {
	if s.acme != nil {
		return s.acme.Close()
	}
	return nil
}

// HTTPChallenge answers an ACME HTTP-01 challenge on the edge's HTTP
// listener, reporting whether r was one; a source other than ACME answers
// none.
func (s *Source) HTTPChallenge(w http.ResponseWriter, r *http.Request) bool {
	return s.acme != nil && s.acme.HTTPChallenge(w, r)
}
