package certs_test

import (
	"crypto/tls"
	"runtime"
	"strings"
	"testing"
	"time"

	"froog.tech/froog/certs"
	"froog.tech/froog/internal/wait"
)

// fakeSlowNames gives every name an owner; a name in slow waits until
// its channel closes, telling entered first.
type fakeSlowNames struct {
	slow    map[string]chan struct{}
	entered chan string
}

func (n fakeSlowNames) Owner(name string) (string, error) {
	if c, ok := n.slow[name]; ok {
		n.entered <- name
		<-c
	}
	return "acct_1", nil
}

// goroutinesIn counts the goroutines whose stacks name fn, from a dump
// of them all: a buffer the dump fills may have cut it short, so it
// grows until the dump fits.
func goroutinesIn(fn string) int {
	for size := 1 << 20; ; size *= 2 {
		buf := make([]byte, size)
		if n := runtime.Stack(buf, true); n < size {
			return strings.Count(string(buf[:n]), fn)
		}
	}
}

// settledGoroutinesIn is goroutinesIn once the count holds for 100 ms:
// the caches of earlier tests may still be ending theirs.
func settledGoroutinesIn(t *testing.T, fn string) int {
	n := goroutinesIn(fn)
	if !wait.Until(10*time.Second, func() bool {
		time.Sleep(100 * time.Millisecond)
		m := goroutinesIn(fn)
		defer func() { n = m }()
		return m == n
	}) {
		t.Fatalf("the count of %s goroutines never settled", fn)
	}
	return n
}

// The ACME source's certmagic cache runs a maintenance goroutine from
// its construction; Close ends it, and may be called again (issue #33).
func TestACMECloseStopsMaintenance(t *testing.T) {
	// Not parallel: it counts the process's certmagic goroutines.
	const maintenance = "certmagic.(*Cache).maintainAssets"
	before := settledGoroutinesIn(t, maintenance)
	src, err := certs.Open(certs.Config{Domain: domain}, certs.Deps{Store: fakeStore{}, Names: fakeSlowNames{}, HTTPPort: 80, TLSPort: 443})
	if err != nil {
		t.Fatal(err)
	}
	// Counted again once settled: an earlier test's cache may have ended
	// its goroutine meanwhile, as one did in a clean-clone run.
	open := settledGoroutinesIn(t, maintenance)
	if open < 1 || open > before+1 {
		t.Fatalf("%d maintenance goroutines after Open (%d before), want one more", open, before)
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	if !wait.Until(5*time.Second, func() bool { return goroutinesIn(maintenance) == open-1 }) {
		t.Fatalf("after Close: %d maintenance goroutines, want %d", goroutinesIn(maintenance), open-1)
	}
	if err := src.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
}

// The local CA decides and signs outside its lock: a name whose decision
// is slow (a store query) holds up no other handshake (issue #33).
func TestLocalCADecidesOutsideItsLock(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	names := fakeSlowNames{slow: map[string]chan struct{}{"slow." + domain: release}, entered: make(chan string, 1)}
	ca, err := certs.NewLocalCA(certs.LocalCAOptions{Dir: t.TempDir(), Domains: []string{domain}, Names: names})
	if err != nil {
		t.Fatal(err)
	}
	slow := make(chan error, 1)
	go func() {
		_, err := ca.GetCertificate(&tls.ClientHelloInfo{ServerName: "slow." + domain})
		slow <- err
	}()
	<-names.entered
	fast := make(chan error, 1)
	go func() {
		_, err := ca.GetCertificate(&tls.ClientHelloInfo{ServerName: "fast." + domain})
		fast <- err
	}()
	select {
	case err := <-fast:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		close(release)
		t.Fatal("a handshake waited 5 s for another name's decision")
	}
	close(release)
	if err := <-slow; err != nil {
		t.Fatal(err)
	}
}
