// Package pebbletest runs Let's Encrypt's Pebble, a real ACME CA, inside
// a test: its directory over HTTPS on loopback, its validation pointed at
// the ports the test names, and a DNS server of its own that sends every
// name to 127.0.0.1. It counts the orders it is sent.
package pebbletest

import (
	"crypto/x509"
	"encoding/pem"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/letsencrypt/pebble/v2/ca"
	"github.com/letsencrypt/pebble/v2/db"
	"github.com/letsencrypt/pebble/v2/va"
	"github.com/letsencrypt/pebble/v2/wfe"
	"github.com/miekg/dns"

	"froog.tech/froog/internal/testkit"
)

// CA is a running Pebble.
type CA struct {
	// Directory is the ACME directory URL.
	Directory string
	// DirectoryRootPEM is the PEM of the certificate the directory's
	// HTTPS uses: what an ACME client must trust to talk to Pebble.
	DirectoryRootPEM []byte
	ca               *ca.CAImpl
	orders           atomic.Int64
	mu               sync.Mutex
	open, maxOpen    int // orders between their creation and their finalisation
}

// settings sets Pebble's settings, which it reads from the environment:
// the same for every test, so set once for the process (t.Setenv would
// keep the tests that start Pebble from running in parallel).
var settings sync.Once

// Start runs Pebble until the test ends. Its validation connects to
// 127.0.0.1:httpPort (HTTP-01) and 127.0.0.1:tlsPort (TLS-ALPN-01);
// certificates it issues are valid for validity (0: Pebble's 90 days).
func Start(t testing.TB, httpPort, tlsPort int, validity time.Duration) *CA {
	t.Helper()
	settings.Do(func() {
		os.Setenv("PEBBLE_VA_NOSLEEP", "1")      // validate at once
		os.Setenv("PEBBLE_WFE_NONCEREJECT", "0") // no made-up badNonce errors
		os.Setenv("PEBBLE_AUTHZREUSE", "0")      // every order proves control again
	})
	logger := log.New(testkit.LogWriter(t), "pebble ", 0) // shown when the test fails
	resolver := serveDNS(t)
	store := db.NewMemoryStore()
	profiles := map[string]ca.Profile{"default": {Description: "test", ValidityPeriod: uint64(validity / time.Second)}}
	c := &CA{ca: ca.New(logger, store, "", "ecdsa", 0, 1, profiles)}
	v := va.New(logger, httpPort, tlsPort, false, resolver, store)
	w := wfe.New(logger, store, v, c.ca, []string{"pebble.letsencrypt.org"}, false, false, 0, 0)
	h := w.Handler()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/order-plz" {
			c.orders.Add(1)
			c.mu.Lock()
			c.open++
			c.maxOpen = max(c.maxOpen, c.open)
			c.mu.Unlock()
		}
		if r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/finalize-order/") {
			c.mu.Lock()
			c.open--
			c.mu.Unlock()
		}
		h.ServeHTTP(rw, r)
	}))
	t.Cleanup(srv.Close)
	c.Directory = srv.URL + wfe.DirectoryPath
	c.DirectoryRootPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	return c
}

// Orders is how many new orders Pebble has been sent.
func (c *CA) Orders() int64 { return c.orders.Load() }

// MostAtOnce is the most orders that were open (created, not yet
// finalised) at the same time.
func (c *CA) MostAtOnce() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.maxOpen
}

// IssuerRoots trusts the certificates Pebble issues.
func (c *CA) IssuerRoots() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c.ca.GetRootCert(0).Cert)
	return p
}

// serveDNS answers A queries for every name with 127.0.0.1 and every other
// query (AAAA, CAA) with nothing, over TCP as Pebble asks.
func serveDNS(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{Listener: ln, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(q)
		for _, question := range q.Question {
			if question.Qtype == dns.TypeA {
				m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: question.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 0}, A: net.IPv4(127, 0, 0, 1)})
			}
		}
		w.WriteMsg(m)
	})}
	go srv.ActivateAndServe()
	t.Cleanup(func() { srv.Shutdown() })
	return ln.Addr().String()
}
