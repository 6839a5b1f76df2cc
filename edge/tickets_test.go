package edge

import (
	"bytes"
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"froog.tech/froog/certs"
	"froog.tech/froog/internal/syncbuf"
	"froog.tech/froog/internal/testkit"
	"froog.tech/froog/store/embedded"
)

// ticketRig is edges (their TLS configurations, as tlsConfig makes them)
// sharing one store, a CA and a clock.
type ticketRig struct {
	t     testing.TB
	st    *embedded.Store
	ca    *certs.LocalCA
	clock *testkit.FakeClock
	logs  *syncbuf.Buffer
}

func newTicketRig(t testing.TB) *ticketRig {
	t.Helper()
	st, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ca, err := certs.OpenLocalCA(t.TempDir(), "froog.test")
	if err != nil {
		t.Fatal(err)
	}
	return &ticketRig{t: t, st: st, ca: ca, clock: testkit.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), logs: &syncbuf.Buffer{}}
}

// edge is one edge's TLS configuration with the deployment's secret,
// its keys read.
func (r *ticketRig) edge(secret []byte) (*tls.Config, *TicketKeys) {
	r.t.Helper()
	k, err := NewTicketKeys(r.st, secret, r.clock.Now, slog.New(slog.NewTextHandler(r.logs, nil)))
	if err != nil {
		r.t.Fatal(err)
	}
	if err := k.Refresh(context.Background()); err != nil {
		r.t.Fatal(err)
	}
	s := &Server{o: Options{GetCertificate: r.ca.GetCertificate, Tickets: k}}
	return s.tlsConfig(), k
}

// connect makes a connection to the server of cfg with the client's
// session cache and reports whether it resumed; it reads the server's
// first byte, so that a TLS 1.3 ticket sent after the handshake is in
// the cache.
func (r *ticketRig) connect(cfg *tls.Config, version uint16, cache tls.ClientSessionCache) bool {
	r.t.Helper()
	sc, cc := net.Pipe()
	go func() {
		defer sc.Close()
		c := tls.Server(sc, cfg)
		if c.Handshake() == nil {
			c.Write([]byte{1})
		}
	}()
	c := tls.Client(cc, &tls.Config{ServerName: "a.froog.test", RootCAs: r.ca.Pool(), MinVersion: version, MaxVersion: version, ClientSessionCache: cache})
	defer c.Close()
	if err := c.Handshake(); err != nil {
		r.t.Fatal(err)
	}
	if _, err := c.Read(make([]byte, 1)); err != nil {
		r.t.Fatal(err)
	}
	return c.ConnectionState().DidResume
}

var versions = map[string]uint16{"TLS 1.2": tls.VersionTLS12, "TLS 1.3": tls.VersionTLS13}

func secretKey(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }

// A session that began at one edge resumes at another of the deployment.
func TestTicketResumesAtAnotherEdge(t *testing.T) {
	t.Parallel()
	for name, v := range versions {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := newTicketRig(t)
			a, _ := r.edge(secretKey(1))
			b, _ := r.edge(secretKey(1))
			cache := tls.NewLRUClientSessionCache(4)
			if r.connect(a, v, cache) {
				t.Fatal("the first connection resumed")
			}
			if !r.connect(b, v, cache) {
				t.Fatal("a ticket of one edge does not resume at another")
			}
			if names, _ := r.st.KVList(context.Background(), ticketKeyPrefix); len(names) != 1 {
				t.Fatalf("two edges made keys %q: want the first one's only", names)
			}
		})
	}
}

// The keys' lifetime: a key seals new tickets for ticketKeyRotate and
// opens them until it is ticketKeyRetire old; after that a ticket does
// not resume, at any edge, and the retired key leaves the store.
func TestTicketKeyRotatesAndRetires(t *testing.T) {
	t.Parallel()
	r := newTicketRig(t)
	a, ka := r.edge(secretKey(1))
	b, kb := r.edge(secretKey(1))
	// Clients with tickets of the first key: a connection that does not
	// resume gets a new ticket, so each is checked once after the
	// retirement.
	old, oldA, oldB := tls.NewLRUClientSessionCache(4), tls.NewLRUClientSessionCache(4), tls.NewLRUClientSessionCache(4)
	for _, c := range []tls.ClientSessionCache{old, oldA, oldB} {
		r.connect(a, tls.VersionTLS13, c)
	}

	r.clock.Advance(ticketKeyRotate)
	if err := ka.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	names, _ := r.st.KVList(context.Background(), ticketKeyPrefix)
	if len(names) != 2 {
		t.Fatalf("keys after %v: %q, want the first and a new one", ticketKeyRotate, names)
	}
	// b has not read the new key yet: the old one still opens.
	if !r.connect(b, tls.VersionTLS13, old) {
		t.Fatal("a ticket of a key that rotated but has not retired does not resume")
	}
	kb.Refresh(context.Background())
	fresh := tls.NewLRUClientSessionCache(4)
	r.connect(b, tls.VersionTLS13, fresh) // sealed with the new key
	if ka.keys[0].name != names[1] || kb.keys[0].name != names[1] {
		t.Fatalf("the edges seal with %s and %s, want the new key %s", ka.keys[0].name, kb.keys[0].name, names[1])
	}

	// The first key retires: its ticket no longer resumes (before any
	// edge has read the store again: the clock decides, at each use);
	// the new one's does.
	r.clock.Advance(ticketKeyRetire - ticketKeyRotate)
	if r.connect(a, tls.VersionTLS13, oldA) || r.connect(b, tls.VersionTLS13, oldB) {
		t.Fatal("a ticket of a retired key resumed")
	}
	ka.Refresh(context.Background()) // and the second is due for rotation: a third
	if now, _ := r.st.KVList(context.Background(), ticketKeyPrefix); len(now) != 2 || now[0] != names[1] {
		t.Fatalf("keys after the first retired: %q, want the second and a new one", now)
	}
	if !r.connect(a, tls.VersionTLS13, fresh) {
		t.Fatal("a ticket of the key that replaced the retired one does not resume")
	}
}

// staleList is a store whose list of keys was read before another edge
// changed it.
type staleList struct {
	TicketStore
	names []string
}

func (s staleList) KVList(context.Context, string) ([]string, error) { return s.names, nil }

// Two edges that retire the same key at once: the second finds it gone,
// and its refresh goes on.
func TestTicketKeyRetiredByAnotherEdge(t *testing.T) {
	t.Parallel()
	r := newTicketRig(t)
	_, ka := r.edge(secretKey(1))
	names, _ := r.st.KVList(context.Background(), ticketKeyPrefix)
	r.clock.Advance(ticketKeyRetire)
	if err := ka.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	kb, err := NewTicketKeys(staleList{r.st, names}, secretKey(1), r.clock.Now, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := kb.Refresh(context.Background()); err != nil {
		t.Fatalf("a refresh that retires a key another edge retired: %v", err)
	}
}

// An edge whose secret key is another's (another deployment's, or a
// mistake) opens none of the store's keys: it says so, without the key,
// seals with its spare one, and resumes nothing the others sealed.
func TestTicketKeysOfAnotherSecret(t *testing.T) {
	t.Parallel()
	r := newTicketRig(t)
	a, _ := r.edge(secretKey(1))
	b, _ := r.edge(secretKey(2))
	cache := tls.NewLRUClientSessionCache(4)
	r.connect(a, tls.VersionTLS13, cache)
	if r.connect(b, tls.VersionTLS13, cache) {
		t.Fatal("an edge of another secret key resumed a ticket")
	}
	if !strings.Contains(r.logs.String(), "does not open") {
		t.Fatalf("no warning about the key it cannot open; the log:\n%s", r.logs)
	}
	names, _ := r.st.KVList(context.Background(), ticketKeyPrefix)
	for _, name := range names {
		kv, err := r.st.KVGet(context.Background(), name)
		if err != nil || strings.Contains(r.logs.String(), string(kv.Value)) {
			t.Fatalf("the log holds the sealed key %s (or it cannot be read: %v)", name, err)
		}
	}
}

// Until an edge has read a key (the store out of reach at its start),
// its tickets are sealed with a spare key nothing opens: the handshake
// goes on, and the next one is a full one.
func TestTicketWithoutAKey(t *testing.T) {
	t.Parallel()
	r := newTicketRig(t)
	k, err := NewTicketKeys(r.st, secretKey(1), r.clock.Now, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := (&Server{o: Options{GetCertificate: r.ca.GetCertificate, Tickets: k}}).tlsConfig()
	cache := tls.NewLRUClientSessionCache(4)
	r.connect(cfg, tls.VersionTLS13, cache)
	if r.connect(cfg, tls.VersionTLS13, cache) {
		t.Fatal("a ticket sealed with no key resumed")
	}
}

// A ticket that is not one the edge sealed (short, another key's id,
// tampered, or sealed but not a session) is not resumed and fails no
// handshake: unwrap answers nil, nil.
func FuzzTicketUnwrap(f *testing.F) {
	st, err := embedded.Open(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	defer st.Close()
	k, err := NewTicketKeys(st, secretKey(1), nil, nil)
	if err != nil {
		f.Fatal(err)
	}
	if err := k.Refresh(context.Background()); err != nil {
		f.Fatal(err)
	}
	key := k.keys[0]
	nonce := make([]byte, key.aead.NonceSize())
	sealed := key.aead.Seal(append(key.id[:], nonce...), nonce, []byte("not a session"), key.id[:])
	tampered := bytes.Clone(sealed)
	tampered[len(tampered)-1] ^= 1
	for _, seed := range [][]byte{sealed, tampered, key.id[:], {}, make([]byte, 40)} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, ticket []byte) {
		if ss, err := k.unwrap(ticket, tls.ConnectionState{}); ss != nil || err != nil {
			t.Fatalf("unwrap of %x: %v, %v", ticket, ss, err)
		}
	})
}
