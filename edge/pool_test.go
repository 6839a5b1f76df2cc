package edge

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"froog.tech/froog/edge/route"
	"froog.tech/froog/store"
)

// sandboxDialer reaches an app in memory over net.Pipe, counting the
// connections made to each sandbox and noting when one is closed.
type sandboxDialer struct {
	serve  func(net.Conn)
	mu     sync.Mutex
	dials  map[string]int
	closed chan string  // the sandbox of each app-side connection that ends
	writes atomic.Int64 // the edge's writes to its connections
}

// writeCountedConn counts the writes made to an app's connection.
type writeCountedConn struct {
	net.Conn
	n *atomic.Int64
}

func (c writeCountedConn) Write(p []byte) (int, error) {
	c.n.Add(1)
	return c.Conn.Write(p)
}

func (d *sandboxDialer) DialContext(ctx context.Context, sandboxID string, port int) (net.Conn, error) {
	d.mu.Lock()
	d.dials[sandboxID]++
	d.mu.Unlock()
	c, s := net.Pipe()
	go func() {
		d.serve(s)
		s.Close()
		select {
		case d.closed <- sandboxID:
		default:
		}
	}()
	return writeCountedConn{c, &d.writes}, nil
}

func (d *sandboxDialer) count(id string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.dials[id]
}

// newPoolEdge is an edge with two public URLs on two sandboxes, sb1
// (one.froog.test) and sb2 (two.froog.test), both running.
func newPoolEdge(t *testing.T, serve func(net.Conn)) (*Server, *fakeRoutes, *sandboxDialer) {
	t.Helper()
	rts := &fakeRoutes{
		routes: map[string]*route.Route{
			"one.froog.test": {URLID: "u1", AccountID: "a1", Host: "one", SandboxID: "sb1", Port: 8080, Public: true},
			"two.froog.test": {URLID: "u2", AccountID: "a1", Host: "two", SandboxID: "sb2", Port: 8080, Public: true},
		},
		boxes: map[string]*route.Sandbox{
			"sb1": {ID: "sb1", AccountID: "a1", State: store.StateRunning, DesiredState: store.StateRunning, Endpoint: "h1:22", StartedAt: time.Unix(1, 0)},
			"sb2": {ID: "sb2", AccountID: "a1", State: store.StateRunning, DesiredState: store.StateRunning, Endpoint: "h2:22", StartedAt: time.Unix(1, 0)},
		},
	}
	d := &sandboxDialer{serve: serve, dials: map[string]int{}, closed: make(chan string, 16)}
	s, err := New(Options{Routes: rts, Dialer: d, Sandboxes: fakeNoStarts{}, RateLimit: -1,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return nil, nil }, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, rts, d
}

func serveOK(c net.Conn) { fasthttp.ServeConn(c, okApp) }

// TestPoolSharedAndPerSandbox: both protocols take their connections to
// a sandbox's port from one pool; a sandbox's new run or endpoint closes
// its pooled connections and no other sandbox's, and a change that is
// neither (a new record of the same run) keeps them.
func TestPoolSharedAndPerSandbox(t *testing.T) {
	t.Parallel()
	s, rts, d := newPoolEdge(t, serveOK)
	get := func(proto, host string) {
		t.Helper()
		if a, _ := through(t, s, proto, "GET", host, "/", nil, ""); a.status != 200 {
			t.Fatalf("%s %s: %d %s", proto, host, a.status, a.body)
		}
	}
	for _, proto := range []string{"h1", "h2", "h1", "h2"} {
		get(proto, "one.froog.test")
		get(proto, "two.froog.test")
	}
	if d.count("sb1") != 1 || d.count("sb2") != 1 {
		t.Fatalf("dials %v: want one connection a sandbox, shared by HTTP/1.1 and HTTP/2", d.dials)
	}
	if n := s.upstreams.idleCount("sb1"); n != 1 {
		t.Fatalf("%d idle connections to sb1, want 1", n)
	}
	change := func(id string, edit func(*route.Sandbox)) {
		rts.mu.Lock()
		sb := *rts.boxes[id]
		edit(&sb)
		rts.boxes[id] = &sb
		rts.mu.Unlock()
	}
	change("sb1", func(sb *route.Sandbox) { sb.Name = "renamed" }) // a new record, the same run
	get("h2", "one.froog.test")
	if d.count("sb1") != 1 {
		t.Fatalf("a label change dropped sb1's connections (dials %v)", d.dials)
	}
	for i, edit := range []func(*route.Sandbox){
		func(sb *route.Sandbox) { sb.StartedAt = sb.StartedAt.Add(time.Minute) }, // a new run
		func(sb *route.Sandbox) { sb.Endpoint = "moved:22" },                     // a new endpoint
	} {
		change("sb1", edit)
		get("h2", "two.froog.test") // another sandbox's request drops nothing of sb1's or its own
		if d.count("sb2") != 1 {
			t.Fatalf("sb1's change dropped sb2's connections (dials %v)", d.dials)
		}
		select {
		case id := <-d.closed:
			t.Fatalf("a connection to %s closed before sb1 was asked again", id)
		default:
		}
		get([]string{"h1", "h2"}[i], "one.froog.test")
		if d.count("sb1") != 2+i {
			t.Fatalf("change %d: dials %v, want a new connection to sb1", i, d.dials)
		}
		if id := <-d.closed; id != "sb1" {
			t.Fatalf("closed a connection to %s, want sb1's old one", id)
		}
		get("h1", "two.froog.test")
		if d.count("sb2") != 1 {
			t.Fatalf("sb2 lost its connection (dials %v)", d.dials)
		}
	}
}

// readHead reads an HTTP/1.1 request's head from br.
func readHead(br *bufio.Reader) error {
	for {
		l, err := br.ReadString('\n')
		if err != nil {
			return err
		}
		if l == "\r\n" {
			return nil
		}
	}
}

// TestH2StreamCancelClosesUpstream: an HTTP/2 client that resets its
// stream (its request's context ends) while the app streams an answer
// ends the proxy's round trip at once, and the connection to the app is
// closed, not pooled: one request is cancelled, not its pool.
func TestH2StreamCancelClosesUpstream(t *testing.T) {
	t.Parallel()
	sent := make(chan struct{})
	s, _, d := newPoolEdge(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		if readHead(br) != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n9\r\ndata: 1\n\n\r\n")
		close(sent)
		io.Copy(io.Discard, br) // until the edge closes the connection
	})
	ctx, cancel := context.WithCancel(context.Background())
	r := httptest.NewRequestWithContext(ctx, "GET", "https://one.froog.test/events", nil)
	r.Proto, r.ProtoMajor, r.ProtoMinor = "HTTP/2.0", 2, 0
	r.RemoteAddr = "192.0.2.1:4000"
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.ServeHTTP(httptest.NewRecorder(), r)
	}()
	<-sent
	cancel()
	<-done
	if id := <-d.closed; id != "sb1" {
		t.Fatalf("closed %s", id)
	}
	if n := s.upstreams.idleCount("sb1"); n != 0 {
		t.Fatalf("the cancelled stream's connection was pooled (%d idle)", n)
	}
}

// TestH2BodyCountNoRace: the app answers an HTTP/2 request before it has
// read the body, and the body is still read on its way to the app after
// the exchange is logged; its byte count is shared with the log's read
// (run with -race).
func TestH2BodyCountNoRace(t *testing.T) {
	t.Parallel()
	s, _, _ := newPoolEdge(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		if readHead(br) != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		io.Copy(io.Discard, br)
	})
	pr, pw := io.Pipe()
	r := httptest.NewRequest("POST", "https://one.froog.test/upload", pr)
	r.Proto, r.ProtoMajor, r.ProtoMinor = "HTTP/2.0", 2, 0
	r.RemoteAddr = "192.0.2.1:4000"
	r.ContentLength = -1
	go pw.Write([]byte("first"))
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	if w.Code != 200 || w.Body.String() != "ok" {
		t.Fatalf("%d %q", w.Code, w.Body)
	}
	// The exchange is logged; the body's end comes now, to the proxy's
	// writer if it still reads.
	pw.Close()
}

// TestPoolSweepsWithoutRequests: idle connections are closed on the
// pool's own timer once they have idled out, though no request comes to
// prune them (a burst's connections must not outlive it), and the
// edge's Close closes those still idle.
func TestPoolSweepsWithoutRequests(t *testing.T) {
	t.Parallel()
	s, _, d := newPoolEdge(t, serveOK)
	for _, host := range []string{"one.froog.test", "two.froog.test"} {
		if a, _ := through(t, s, "h1", "GET", host, "/", nil, ""); a.status != 200 {
			t.Fatalf("%s: %d %s", host, a.status, a.body)
		}
	}
	u := &s.upstreams
	u.mu.Lock()
	armed := u.sweeper != nil
	for _, c := range u.idle[route.Port{SandboxID: "sb1", Port: 8080}] {
		c.since = c.since.Add(-s.o.UpstreamIdle) // sb1's connection has idled out; sb2's has not
	}
	u.mu.Unlock()
	if !armed {
		t.Fatal("an idle connection armed no sweep")
	}
	u.sweep() // what the timer runs
	if id := <-d.closed; id != "sb1" || u.idleCount("sb1") != 0 || u.idleCount("sb2") != 1 {
		t.Fatalf("after a sweep: closed %s; idle sb1 %d, sb2 %d; want sb1's closed, sb2's kept", id, u.idleCount("sb1"), u.idleCount("sb2"))
	}
	u.mu.Lock()
	armed = u.sweeper != nil
	u.mu.Unlock()
	if !armed {
		t.Fatal("a sweep that left a connection idle did not run again")
	}
	s.Close()
	if id := <-d.closed; id != "sb2" || u.idleCount("sb2") != 0 {
		t.Fatalf("after Close: closed %s, %d idle to sb2", id, u.idleCount("sb2"))
	}
}

// TestUploadInLargeWrites: a request body goes to the app in writes of
// up to 32 KiB (through the tunnel, one SSH packet each) as the client's
// reads deliver it, not in the 4 KiB of the head's buffer.
func TestUploadInLargeWrites(t *testing.T) {
	t.Parallel()
	const size = 1 << 20
	s, _, d := newPoolEdge(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		if readHead(br) != nil {
			return
		}
		n, _ := io.Copy(io.Discard, io.LimitReader(br, size))
		got := strconv.FormatInt(n, 10)
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(got), got)
	})
	// The client's body comes in reads of up to 64 KiB, as HTTP/2's
	// DATA frames queue up; none is a WriterTo.
	body := struct{ io.Reader }{io.LimitReader(zeros{}, size)}
	r := httptest.NewRequest("POST", "https://one.froog.test/upload", body)
	r.Proto, r.ProtoMajor, r.ProtoMinor = "HTTP/2.0", 2, 0
	r.RemoteAddr = "192.0.2.1:4000"
	r.ContentLength = size
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	if w.Code != 200 || w.Body.String() != strconv.Itoa(size) {
		t.Fatalf("%d %q", w.Code, w.Body)
	}
	// 32 writes of the body, the head's, and a few to spare; in 4 KiB
	// writes it took 256.
	if n := d.writes.Load(); n > 40 {
		t.Fatalf("a 1 MiB body took %d writes to the app, want at most 40", n)
	}
}

// zeros reads as endless zero bytes, at most 64 KiB a read.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	p = p[:min(len(p), 64<<10)]
	clear(p)
	return len(p), nil
}

// TestH1AnswersInItsOwnVersion: an app that answers in HTTP/1.0 is
// answered for in the edge's own version, HTTP/1.1 (RFC 9110 6.2), its
// body, which ends with the app's connection, chunked.
func TestH1AnswersInItsOwnVersion(t *testing.T) {
	t.Parallel()
	s, _, _ := newPoolEdge(t, func(c net.Conn) {
		if readHead(bufio.NewReader(c)) != nil {
			return
		}
		io.WriteString(c, "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nhello")
	})
	var ctx fasthttp.RequestCtx
	ctx.Init2(benchConn{}, discardLogger{}, false)
	ctx.Request.Header.SetMethod("GET")
	ctx.Request.SetRequestURI("/")
	ctx.Request.Header.SetHost("one.froog.test")
	s.serveH1(&ctx)
	var out bytes.Buffer
	bw := bufio.NewWriter(&out)
	if err := ctx.Response.Write(bw); err != nil {
		t.Fatal(err)
	}
	bw.Flush()
	wire := out.String()
	if !strings.HasPrefix(wire, "HTTP/1.1 200 OK\r\n") || !strings.HasSuffix(wire, "\r\n\r\n5\r\nhello\r\n0\r\n\r\n") {
		t.Fatalf("the client got %q, want an HTTP/1.1 answer with the body chunked", wire)
	}
}

// TestStreamedBodyNotSentTwice: a request whose body streams, found its
// pooled connection closed by the app, is not sent again on a new one
// (its body is spent: a PUT went again with none), though its method is
// idempotent; a request with no body is.
func TestStreamedBodyNotSentTwice(t *testing.T) {
	t.Parallel()
	const size = 100 << 10 // past what fasthttp reads with the head: it streams
	var conns, later atomic.Int64
	s, _, _ := newPoolEdge(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		if conns.Add(1) == 1 {
			// The first connection answers once, then takes the next
			// request and closes unanswered: an idle close that crossed it.
			if readHead(br) != nil {
				return
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			if readHead(br) == nil {
				io.CopyN(io.Discard, br, size)
			}
			return
		}
		if readHead(br) == nil {
			later.Add(1)
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
		}
	})
	if a, _ := through(t, s, "h1", "GET", "one.froog.test", "/", nil, ""); a.status != 200 {
		t.Fatalf("GET: %d %s", a.status, a.body)
	}
	var ctx fasthttp.RequestCtx
	ctx.Init2(benchConn{}, discardLogger{}, false)
	ctx.Request.Header.SetMethod("PUT")
	ctx.Request.SetRequestURI("/file")
	ctx.Request.Header.SetHost("one.froog.test")
	ctx.Request.SetBodyStream(io.LimitReader(zeros{}, size), size)
	s.serveH1(&ctx)
	if st := ctx.Response.StatusCode(); st != 502 || later.Load() != 0 {
		t.Fatalf("PUT on a connection the app closed: %d, and %d requests on a new one; want 502 and none", st, later.Load())
	}
}
