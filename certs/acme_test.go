package certs_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"froog.tech/froog/certs"
	"froog.tech/froog/certs/pebbletest"
	"froog.tech/froog/edge"
	"froog.tech/froog/edge/route"
	"froog.tech/froog/internal/loopback"
	"froog.tech/froog/internal/syncbuf"
	"froog.tech/froog/internal/testkit"
	"froog.tech/froog/internal/wait"
	"froog.tech/froog/store"
	"froog.tech/froog/store/pg"
	"froog.tech/froog/store/pg/pgtest"
)

var ctx = context.Background()

const domain = "froog.test"

// acmeRig: an edge with on-demand certificates from Pebble, on Postgres
// (reached through a proxy the test can cut), and a URL in the store.
type acmeRig struct {
	t      testing.TB
	ca     *pebbletest.CA
	routes *route.Table
	st     *pg.Store
	proxy  *pgProxy
	addr   string
	acct   store.Account
	sb     store.Sandbox
}

func newACMERig(t testing.TB, validity time.Duration, edit func(*certs.ACMEOptions)) *acmeRig {
	t.Helper()
	tlsLn, _ := net.Listen("tcp", "127.0.0.1:0")
	httpLn, _ := net.Listen("tcp", "127.0.0.1:0")
	ca := pebbletest.Start(t, httpLn.Addr().(*net.TCPAddr).Port, tlsLn.Addr().(*net.TCPAddr).Port, validity)
	o := pgtest.Options(t)
	proxy := startPGProxy(t, o.URL)
	o.URL = proxy.url
	st, err := pg.Open(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	r := &acmeRig{t: t, ca: ca, st: st, proxy: proxy, addr: tlsLn.Addr().String()}
	r.acct, _ = st.CreateAccount(ctx, store.Account{MaxSandboxes: 5, URLNamesPerDay: 20})
	r.sb, err = st.CreateSandbox(ctx, store.Sandbox{AccountID: r.acct.ID, Name: "box", DesiredState: store.StateStopped, State: store.StateStopped, CreatedAt: time.Now()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.DirectoryRootPEM)
	routes, err := route.New(route.Options{Store: st, Domain: domain})
	if err != nil {
		t.Fatal(err)
	}
	ao := certs.ACMEOptions{Store: st, Names: routes, CA: ca.Directory, Roots: roots,
		HTTPPort: httpLn.Addr().(*net.TCPAddr).Port, TLSPort: tlsLn.Addr().(*net.TCPAddr).Port,
		Logger: slog.New(slog.NewTextHandler(testkit.LogWriter(t), nil))} // why an order failed, when a test does
	if edit != nil {
		edit(&ao)
	}
	a, err := certs.NewACME(ao)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := edge.New(edge.Options{Routes: routes, Sandboxes: st, Dialer: fakeNoDialer{}, GetCertificate: a.GetCertificate, HTTPChallenge: a.HTTPChallenge})
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); routes.Run(cctx) }()
	go func() { defer wg.Done(); srv.ServeTLS(cctx, tlsLn) }()
	go func() { defer wg.Done(); srv.ServeRedirect(cctx, httpLn) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	<-routes.Ready()
	r.routes = routes
	return r
}

// known waits until the feed has brought name to the edge's route table.
func (r *acmeRig) known(name string) {
	r.t.Helper()
	wait.For(r.t, 10*time.Second, name+" reaches the edge", func() bool { _, err := r.routes.Owner(name); return err == nil })
}

// fakeNoDialer: these tests are about certificates; nothing is proxied.
type fakeNoDialer struct{}

func (fakeNoDialer) DialContext(context.Context, string, int) (net.Conn, error) {
	return nil, errors.New("no sandbox here")
}

// url makes a public URL with host label on the rig's sandbox.
func (r *acmeRig) url(label string, port int) store.URL { return r.urlOn(r.sb.ID, label, port) }

func (r *acmeRig) urlOn(sandboxID, label string, port int) store.URL {
	r.t.Helper()
	u, err := r.st.PutURL(ctx, sandboxID, port, func(*store.URL, *store.AuditEvent) (store.URL, error) {
		return store.URL{Hostname: label, Public: true, CreatedAt: time.Now(), UpdatedAt: time.Now()}, nil
	}, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	return u
}

// handshake dials the edge for name and returns the leaf it served.
func (r *acmeRig) handshake(name string) (*x509.Certificate, error) {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 20 * time.Second}, "tcp", r.addr, &tls.Config{ServerName: name, RootCAs: r.ca.IssuerRoots(), NextProtos: []string{"http/1.1"}})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0], nil
}

// eventually retries the handshake while the feed brings a change and
// the order goes through: a whole order (account, order, challenge,
// Pebble's check, finalization) under the race detector took over 20 s
// on a machine busy with TCG guests, and an order that fails is tried
// again by certmagic a minute later (its first retry interval), as in
// production. The rig's log (shown on failure) says why one failed.
func (r *acmeRig) eventually(name string) *x509.Certificate {
	r.t.Helper()
	var leaf *x509.Certificate
	var err error
	if !wait.Until(150*time.Second, func() bool { leaf, err = r.handshake(name); return err == nil }) {
		r.t.Fatalf("never a certificate for %s: %v", name, err)
	}
	return leaf
}

// 1,000 handshakes for names no URL holds: not one order, nothing stored.
func TestUnknownNamesOrderNothing(t *testing.T) {
	r := newACMERig(t, 0, nil)
	var refused atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 125; i++ {
				name := fmt.Sprintf("x%d-%d.%s", rand.Uint64(), i, domain)
				if _, err := r.handshake(name); err != nil {
					refused.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if refused.Load() != 1000 || r.ca.Orders() != 0 {
		t.Fatalf("%d of 1000 refused, %d orders", refused.Load(), r.ca.Orders())
	}
	if keys, _ := r.st.KVList(ctx, ""); len(keys) != 0 {
		t.Fatalf("unknown names left keys in the store: %v", keys)
	}
	// A name a URL holds is issued.
	r.url("known-1-aaaaaa", 3000)
	if leaf := r.eventually("known-1-aaaaaa." + domain); leaf.DNSNames[0] != "known-1-aaaaaa."+domain || r.ca.Orders() != 1 {
		t.Fatalf("known name: %v, %d orders", leaf.DNSNames, r.ca.Orders())
	}
}

// With the store unreachable, a new name gets no certificate and no order;
// once the store is back, it does.
func TestStoreOutageRefusesIssuance(t *testing.T) {
	r := newACMERig(t, 0, nil)
	r.url("outage-1-bbbbbb", 3000)
	r.known("outage-1-bbbbbb." + domain)
	r.proxy.cut(true)
	for i := 0; i < 3; i++ {
		if _, err := r.handshake("outage-1-bbbbbb." + domain); err == nil {
			t.Fatal("a certificate while the store is down")
		}
	}
	if r.ca.Orders() != 0 {
		t.Fatalf("%d orders while the store was down", r.ca.Orders())
	}
	r.proxy.cut(false)
	r.eventually("outage-1-bbbbbb." + domain)
	if r.ca.Orders() != 1 {
		t.Fatalf("%d orders once the store is back", r.ca.Orders())
	}
}

// A certificate near its end is renewed at the next handshake while its
// URL exists, and never after the URL is gone.
func TestRemovedURLIsNotRenewed(t *testing.T) {
	r := newACMERig(t, 30*time.Second, func(o *certs.ACMEOptions) { o.RenewalWindowRatio = 0.95 })
	u := r.url("renew-1-cccccc", 3000)
	r.eventually("renew-1-cccccc." + domain)
	// certmagic and Pebble read the real clock: the certificate is due
	// 1.5 s after it was issued (5 % of 30 s), and the handshakes go on
	// until one of them renews it.
	wait.For(t, 20*time.Second, "renewed (a second order)", func() bool {
		r.handshake("renew-1-cccccc." + domain)
		return r.ca.Orders() >= 2
	})
	r.eventually("renew-1-cccccc." + domain)
	if err := r.st.DeleteURL(ctx, r.sb.ID, u.Port, nil); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 10*time.Second, "the edge forgets the removed URL", func() bool {
		_, err := r.routes.Owner("renew-1-cccccc." + domain)
		return err != nil
	})
	orders := r.ca.Orders()
	// The certificate in memory serves handshakes until it is due again
	// (the real clock, as above), and one more, whose renewal the
	// decision refuses; then it is dropped.
	refused := wait.Until(15*time.Second, func() bool {
		_, err := r.handshake("renew-1-cccccc." + domain)
		return err != nil
	})
	if !refused || r.ca.Orders() != orders {
		t.Fatalf("after the URL was removed: still served %v, orders went from %d to %d", !refused, orders, r.ca.Orders())
	}
}

// pgProxy stands between the store and Postgres; cut(true) drops every
// connection and refuses new ones.
type pgProxy struct {
	url    string
	mu     sync.Mutex
	down   bool
	conns  map[net.Conn]bool
	target string
}

func startPGProxy(t testing.TB, dbURL string) *pgProxy {
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	p := &pgProxy{conns: map[net.Conn]bool{}, target: u.Host}
	port := loopback.Serve(t, func(c net.Conn) {
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			c.Close()
			return
		}
		p.conns[c] = true
		p.mu.Unlock()
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			return
		}
		go func() { io.Copy(up, c); up.Close() }()
		io.Copy(c, up)
		c.Close()
	})
	u.Host = fmt.Sprintf("127.0.0.1:%d", port)
	p.url = u.String()
	return p
}

func (p *pgProxy) cut(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
	if down {
		for c := range p.conns {
			c.Close()
		}
		clear(p.conns)
	}
}

// An account's allowance of new names a day is counted in the store, for
// every edge: past it a name is refused before any order, and the log
// names the host and the reason.
func TestAllowancePerAccount(t *testing.T) {
	var logs syncbuf.Buffer
	r := newACMERig(t, 0, func(o *certs.ACMEOptions) { o.Logger = slog.New(slog.NewJSONHandler(&logs, nil)) })
	small, _ := r.st.CreateAccount(ctx, store.Account{MaxSandboxes: 1, URLNamesPerDay: 2})
	sb, err := r.st.CreateSandbox(ctx, store.Sandbox{AccountID: small.ID, Name: "small", DesiredState: store.StateStopped, State: store.StateStopped, CreatedAt: time.Now()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Another edge of the cluster already spent one of today's two.
	day := time.Now().UTC().Format("2006-01-02")
	if err := r.st.KVPut(ctx, "froog/issuance/"+small.ID+"/"+day, []byte("1")); err != nil {
		t.Fatal(err)
	}
	r.urlOn(sb.ID, "small-1-dddddd", 3000)
	r.urlOn(sb.ID, "small-2-eeeeee", 3001)
	r.eventually("small-1-dddddd." + domain)
	r.known("small-2-eeeeee." + domain)
	for i := 0; i < 3; i++ {
		if _, err := r.handshake("small-2-eeeeee." + domain); err == nil {
			t.Fatal("a name past the allowance got a certificate")
		}
	}
	if r.ca.Orders() != 1 {
		t.Fatalf("%d orders, want 1", r.ca.Orders())
	}
	if l := logs.String(); !strings.Contains(l, `"host":"small-2-eeeeee.froog.test"`) || !strings.Contains(l, "has used its 2 new certificates") {
		t.Fatalf("the refusal is not in the log: %s", l)
	}
	// Unknown names are logged with their reason too.
	r.handshake("nobody-1-ffffff." + domain)
	if l := logs.String(); !strings.Contains(l, `"host":"nobody-1-ffffff.froog.test","reason":"no URL holds this name"`) {
		t.Fatalf("an unknown name's refusal is not in the log: %s", l)
	}
}

// The wildcard mode serves the operator's certificate to every
// single-label name, nothing else, and picks up a replaced file.
func TestWildcard(t *testing.T) {
	dir := t.TempDir()
	write := func(cn string) {
		ca, err := certs.OpenLocalCA(filepath.Join(dir, "ca-"+cn), "*."+domain)
		if err != nil {
			t.Fatal(err)
		}
		c, err := ca.GetCertificate(&tls.ClientHelloInfo{ServerName: "*." + domain})
		if err != nil {
			t.Fatal(err)
		}
		var chain []byte
		for _, der := range c.Certificate {
			chain = append(chain, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
		}
		key, _ := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
		os.WriteFile(filepath.Join(dir, "w.crt"), chain, 0o600)
		os.WriteFile(filepath.Join(dir, "w.key"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}), 0o600)
	}
	write("one")
	w, err := certs.OpenWildcard(filepath.Join(dir, "w.crt"), filepath.Join(dir, "w.key"), domain)
	if err != nil {
		t.Fatal(err)
	}
	first, err := w.GetCertificate(&tls.ClientHelloInfo{ServerName: "box-3000-abcdef." + domain})
	if err != nil || first.Leaf.VerifyHostname("box-3000-abcdef."+domain) != nil {
		t.Fatalf("a single-label name: %v", err)
	}
	for _, name := range []string{"a.b." + domain, domain, "box.other.test"} {
		if _, err := w.GetCertificate(&tls.ClientHelloInfo{ServerName: name}); err == nil {
			t.Errorf("%s got the wildcard", name)
		}
	}
	time.Sleep(10 * time.Millisecond) // a later modification time: what tells a replaced file
	write("two")
	wait.For(t, 10*time.Second, "the replaced wildcard is picked up", func() bool {
		c, _ := w.GetCertificate(&tls.ClientHelloInfo{ServerName: "x." + domain})
		return c.Leaf.SerialNumber.Cmp(first.Leaf.SerialNumber) != 0
	})
}

// One edge runs at most MaxOrders orders at once: three new names asked
// for together are ordered one after the other.
func TestOrdersPerEdge(t *testing.T) {
	r := newACMERig(t, 0, func(o *certs.ACMEOptions) { o.MaxOrders = 1 })
	names := []string{"one-1-aaaaaa", "two-1-bbbbbb", "three-1-cccccc"}
	for i, n := range names {
		r.url(n, 3000+i)
	}
	for _, n := range names {
		r.known(n + "." + domain)
	}
	var wg sync.WaitGroup
	for _, n := range names {
		wg.Add(1)
		go func() { defer wg.Done(); r.eventually(n + "." + domain) }()
	}
	wg.Wait()
	if r.ca.Orders() != 3 || r.ca.MostAtOnce() != 1 {
		t.Fatalf("%d orders, at most %d at once; want 3, one at a time", r.ca.Orders(), r.ca.MostAtOnce())
	}
}

// Both challenge types work through the edge's own listeners: HTTP-01 on
// its HTTP listener (the redirect server answers the challenge), and
// TLS-ALPN-01 on its TLS listener.
func TestEachChallenge(t *testing.T) {
	for _, ch := range []string{"http-01", "tls-alpn-01"} {
		t.Run(ch, func(t *testing.T) {
			r := newACMERig(t, 0, func(o *certs.ACMEOptions) { o.Challenges = []string{ch} })
			r.url("chal-1-aaaaaa", 3000)
			r.known("chal-1-aaaaaa." + domain)
			if leaf := r.eventually("chal-1-aaaaaa." + domain); leaf.DNSNames[0] != "chal-1-aaaaaa."+domain || r.ca.Orders() != 1 {
				t.Fatalf("%v, %d orders", leaf.DNSNames, r.ca.Orders())
			}
		})
	}
}
