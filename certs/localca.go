package certs

import (
	"container/list"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// LocalCA issues certificates for development from a root kept in a
// folder. It is safe for concurrent use.
type LocalCA struct {
	domains   []string
	names     Names // nil: any name under domains
	maxCached int
	key       *ecdsa.PrivateKey
	cert      *x509.Certificate
	certDER   []byte

	mu     sync.Mutex
	leaves map[string]*list.Element // of *leaf
	lru    *list.List               // most recently used first
}

type leaf struct {
	name string
	cert *tls.Certificate
}

// LocalCAOptions configure a LocalCA.
type LocalCAOptions struct {
	// Dir holds the root (ca.pem, ca-key.pem), created the first time.
	// Required.
	Dir string
	// Domains are where leaves may be issued: each domain itself and one
	// or more labels below it. Required.
	Domains []string
	// Names, when set, decides which names under Domains get a
	// certificate: only those it gives an owner for (the edge's route
	// table, as for ACME). nil issues for any name under Domains (tests,
	// peers in benchmarks).
	Names Names
	// MaxCached bounds the leaves kept in memory, least recently used
	// first out; 0 means 1024.
	MaxCached int
}

// OpenLocalCA is NewLocalCA for dir and domains, with no decision
// function and the default cache.
func OpenLocalCA(dir string, domains ...string) (*LocalCA, error) {
	return NewLocalCA(LocalCAOptions{Dir: dir, Domains: domains})
}

// NewLocalCA loads the root in o.Dir, creating it the first time.
func NewLocalCA(o LocalCAOptions) (*LocalCA, error) {
	dir, domains := o.Dir, o.Domains
	certPath, keyPath := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem")
	if o.MaxCached == 0 {
		o.MaxCached = 1024
	}
	ca := &LocalCA{names: o.Names, maxCached: o.MaxCached, leaves: map[string]*list.Element{}, lru: list.New()}
	for _, d := range domains {
		ca.domains = append(ca.domains, strings.ToLower(strings.TrimSuffix(d, ".")))
	}
	certPEM, err := os.ReadFile(certPath)
	if errors.Is(err, os.ErrNotExist) {
		return ca, ca.create(dir, certPath, keyPath)
	}
	if err != nil {
		return nil, fmt.Errorf("read local CA: %w", err)
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, fmt.Errorf("read local CA key: %w", err)
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, fmt.Errorf("local CA in %s: not PEM", dir)
	}
	if ca.cert, err = x509.ParseCertificate(cb.Bytes); err != nil {
		return nil, fmt.Errorf("local CA certificate: %w", err)
	}
	if ca.key, err = x509.ParseECPrivateKey(kb.Bytes); err != nil {
		return nil, fmt.Errorf("local CA key: %w", err)
	}
	ca.certDER = cb.Bytes
	return ca, nil
}

func (ca *LocalCA) create(dir, certPath, keyPath string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "froog dev local CA", Organization: []string{"froog (development only)"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return fmt.Errorf("create local CA: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return fmt.Errorf("write local CA key: %w", err)
	}
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return fmt.Errorf("write local CA: %w", err)
	}
	ca.key, ca.certDER = key, der
	ca.cert, err = x509.ParseCertificate(der)
	return err
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	return n
}

// allowed reports whether name is one of the CA's domains or below one.
func (ca *LocalCA) allowed(name string) bool {
	for _, d := range ca.domains {
		if name == d || strings.HasSuffix(name, "."+d) {
			return true
		}
	}
	return false
}

// GetCertificate serves tls.Config.GetCertificate: a cached leaf, or a
// new one for a name under the CA's domains that the decision function
// (if any) gives an owner for. The lock covers the cache alone: the
// decision (which may query the store) and the signing happen outside
// it, so a slow one holds up no other name's handshake.
func (ca *LocalCA) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	name := strings.ToLower(strings.TrimSuffix(hello.ServerName, "."))
	ip := reachedLoopback(hello)
	if ip != "" {
		name = ip // no name, this machine's address: the edge's own
	} else if name == "" || !ca.allowed(name) {
		return nil, fmt.Errorf("no certificate for %q", hello.ServerName)
	}
	if c := ca.cached(name); c != nil {
		return c, nil
	}
	if ca.names != nil && ip == "" {
		if _, err := ca.names.Owner(name); err != nil {
			return nil, fmt.Errorf("no certificate for %q: %w", name, err)
		}
	}
	c, err := ca.issue(name)
	if err != nil {
		return nil, err
	}
	ca.mu.Lock()
	defer ca.mu.Unlock()
	if el, ok := ca.leaves[name]; ok {
		// Another handshake issued one meanwhile: this one replaces it.
		el.Value.(*leaf).cert = c
		ca.lru.MoveToFront(el)
		return c, nil
	}
	ca.leaves[name] = ca.lru.PushFront(&leaf{name: name, cert: c})
	for ca.lru.Len() > ca.maxCached {
		old := ca.lru.Remove(ca.lru.Back()).(*leaf)
		delete(ca.leaves, old.name)
	}
	return c, nil
}

// cached gives the cached leaf for name while it has more than a day
// left, or nil (dropping one that has less).
func (ca *LocalCA) cached(name string) *tls.Certificate {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	el, ok := ca.leaves[name]
	if !ok {
		return nil
	}
	if c := el.Value.(*leaf).cert; time.Until(c.Leaf.NotAfter) > 24*time.Hour {
		ca.lru.MoveToFront(el)
		return c
	}
	ca.lru.Remove(el)
	delete(ca.leaves, name)
	return nil
}

// reachedLoopback gives the loopback address a client reached when it
// sent no name (as clients do for an address: curl https://127.0.0.1:8443),
// else "": froogd dev prints that address, and its answer needs a
// certificate. Loopback only: nobody else can reach it.
func reachedLoopback(hello *tls.ClientHelloInfo) string {
	if hello.ServerName != "" || hello.Conn == nil {
		return ""
	}
	a, ok := hello.Conn.LocalAddr().(*net.TCPAddr)
	if !ok || !a.IP.IsLoopback() {
		return ""
	}
	return a.IP.String()
}

// issue makes a leaf for name (a host name or an IP address), signed by
// the root.
func (ca *LocalCA) issue(name string) (*tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().AddDate(0, 0, 90),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if ip := net.ParseIP(name); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else {
		tmpl.DNSNames = []string{name}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("issue a certificate for %s: %w", name, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &tls.Certificate{Certificate: [][]byte{der, ca.certDER}, PrivateKey: key, Leaf: leaf}, nil
}

// Pool is a cert pool holding the root, for clients in tests.
func (ca *LocalCA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}
