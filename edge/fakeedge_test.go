package edge

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"froog.tech/froog/edge/route"
	"froog.tech/froog/store"
)

// fakeRoutes is a route table in memory.
type fakeRoutes struct {
	mu     sync.Mutex
	routes map[string]*route.Route
	boxes  map[string]*route.Sandbox
	// changed is woken by a test that changes boxes, as the feed wakes
	// a route table's waiters.
	changed store.Signal
}

func (f *fakeRoutes) Lookup(host string) *route.Route {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.routes[host]
}

func (f *fakeRoutes) URL(id string) *route.Route {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, rt := range f.routes {
		if rt.URLID == id {
			return rt
		}
	}
	return nil
}

func (f *fakeRoutes) Serves(p route.Port) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, rt := range f.routes {
		if rt.SandboxID == p.SandboxID && rt.Port == p.Port {
			return true
		}
	}
	return false
}

func (f *fakeRoutes) Changed() <-chan struct{} { return f.changed.Changed() }

func (f *fakeRoutes) Sandbox(id string) *route.Sandbox {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.boxes[id]
}

func (f *fakeRoutes) Domain() string { return "froog.test" }

// fakePipeDialer reaches an app served in memory over net.Pipe; it counts
// the connections it made, and keeps the ports they were for.
type fakePipeDialer struct {
	app   fasthttp.RequestHandler
	mu    sync.Mutex
	dials int
	ports []int
}

func (d *fakePipeDialer) DialContext(ctx context.Context, sandboxID string, port int) (net.Conn, error) {
	d.mu.Lock()
	d.dials++
	d.ports = append(d.ports, port)
	d.mu.Unlock()
	c, s := net.Pipe()
	go fasthttp.ServeConn(s, d.app)
	return c, nil
}

type fakeNoStarts struct{ store.SandboxUpdater }

const benchToken = "tok-0123456789abcdef0123456789abcdef"

// newFakeEdge is an edge whose route table holds app (private, token
// benchToken) and pub (public), both on sandbox sb1 port 8080, running.
func newFakeEdge(tb testing.TB, app fasthttp.RequestHandler) (*Server, *fakeRoutes, *fakePipeDialer) {
	tb.Helper()
	rts := &fakeRoutes{
		routes: map[string]*route.Route{
			"app.froog.test": {URLID: "u1", AccountID: "a1", Host: "app", SandboxID: "sb1", Port: 8080, TokenHash: store.HashSecret(benchToken)},
			"pub.froog.test": {URLID: "u2", AccountID: "a1", Host: "pub", SandboxID: "sb1", Port: 8080, Public: true},
		},
		boxes: map[string]*route.Sandbox{"sb1": {ID: "sb1", AccountID: "a1", State: store.StateRunning, DesiredState: store.StateRunning, Endpoint: "h:22"}},
	}
	d := &fakePipeDialer{app: app}
	s, err := New(Options{Routes: rts, Dialer: d, Sandboxes: fakeNoStarts{}, RateLimit: -1,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return nil, nil }, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s, rts, d
}

func okApp(ctx *fasthttp.RequestCtx) {
	ctx.Response.Header.Set("Content-Type", "text/plain")
	ctx.WriteString("hello")
}

// benchConn is the client's connection for a fasthttp.RequestCtx made by
// hand: deadlines do nothing.
type benchConn struct{ net.Conn }

func (benchConn) RemoteAddr() net.Addr             { return &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 4000} }
func (benchConn) LocalAddr() net.Addr              { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 443} }
func (benchConn) SetReadDeadline(time.Time) error  { return nil }
func (benchConn) SetWriteDeadline(time.Time) error { return nil }
func (benchConn) SetDeadline(time.Time) error      { return nil }
func (benchConn) Close() error                     { return nil }
func (benchConn) Read([]byte) (int, error)         { return 0, io.EOF }
func (benchConn) Write(b []byte) (int, error)      { return len(b), nil }

func (f *fakeRoutes) Recheck(host, key string, ok func(*route.Route) bool) *route.Route {
	return f.Lookup(host)
}
