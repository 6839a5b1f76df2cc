package tunnel_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"froog.tech/froog/hostctl/local"
	"froog.tech/froog/internal/loopback"
	"froog.tech/froog/internal/syncbuf"
	"froog.tech/froog/internal/testkit"
	"froog.tech/froog/internal/testkit/live"
	"froog.tech/froog/internal/wait"
	"froog.tech/froog/store"
	"froog.tech/froog/store/embedded"
	"froog.tech/froog/tunnel"
)

// proxy sits between the tunnel and a sandbox's SSH server, so tests can
// count connections, cut them, or freeze them.
type proxy struct {
	ln      net.Listener
	target  string
	accepts atomic.Int32
	frozen  atomic.Bool
	mu      sync.Mutex
	conns   []net.Conn
}

func newProxy(t testing.TB, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target}
	t.Cleanup(func() { ln.Close(); p.cut() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.accepts.Add(1)
			u, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			go p.pipe(c, u)
			go p.pipe(u, c)
		}
	}()
	return p
}

func (p *proxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		for p.frozen.Load() { // a dead network: nothing moves
			time.Sleep(10 * time.Millisecond)
		}
		if n > 0 {
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			dst.Close()
			return
		}
	}
}

// cut kills every connection through the proxy.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *proxy) port() int { return p.ln.Addr().(*net.TCPAddr).Port }

type rig struct {
	store  *embedded.Store
	tun    *tunnel.Tunnel
	sb     store.Sandbox
	proxy  *proxy
	signer ssh.Signer
}

// newRig runs a sandbox of the local driver behind a proxy, records it as
// running in an embedded store, and makes a tunnel to it.
func newRig(t *testing.T, o tunnel.Options) *rig {
	t.Helper()
	ctx := context.Background()
	st := live.EmbeddedStore(t)
	drv, signer := live.Driver(t, local.Options{})
	a, _ := st.CreateAccount(ctx, store.Account{MaxSandboxes: 10})
	sb, err := st.CreateSandbox(ctx, store.Sandbox{AccountID: a.ID, Name: "box", DesiredState: store.StateRunning, State: store.StateRunning, CreatedAt: time.Now()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ep, err := drv.Start(ctx, &sb, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := newProxy(t, net.JoinHostPort(ep.Host, strconv.Itoa(ep.Port)))
	sb, err = st.UpdateSandbox(ctx, sb.ID, func(s *store.Sandbox, _ *store.AuditEvent) error {
		s.SSHHost, s.SSHPort, s.SSHHostKey = "127.0.0.1", p.port(), ep.HostKey
		return nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	o.Sandboxes, o.Signer = st, signer
	tun, err := tunnel.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tun.Close() })
	return &rig{store: st, tun: tun, sb: sb, proxy: p, signer: signer}
}

func (r *rig) httpClient() *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
		_, port, _ := net.SplitHostPort(addr)
		n, _ := strconv.Atoi(port)
		return r.tun.DialContext(ctx, r.sb.ID, n)
	}}}
}

func upstream(t *testing.T) (*httptest.Server, string) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello %s", r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	return srv, "http://" + srv.Listener.Addr().String()
}

func get(t *testing.T, c *http.Client, url string) string {
	t.Helper()
	res, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return string(b)
}

// Many requests, one SSH connection; and a single dial for a crowd.
func TestSharedConnection(t *testing.T) {
	r := newRig(t, tunnel.Options{})
	_, base := upstream(t)
	c := r.httpClient()
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if got := get(t, c, fmt.Sprintf("%s/%d", base, i)); got != fmt.Sprintf("hello /%d", i) {
				t.Errorf("got %q", got)
			}
		}(i)
	}
	wg.Wait()
	if n := r.proxy.accepts.Load(); n != 1 {
		t.Fatalf("%d SSH connections for 20 concurrent requests, want 1", n)
	}
}

func TestHostKeyMismatchRefused(t *testing.T) {
	r := newRig(t, tunnel.Options{})
	other := testkit.AuthorizedKey(testkit.NewKey(t))
	if _, err := r.store.UpdateSandbox(context.Background(), r.sb.ID, func(s *store.Sandbox, _ *store.AuditEvent) error { s.SSHHostKey = other; return nil }, nil); err != nil {
		t.Fatal(err)
	}
	_, err := r.tun.DialContext(context.Background(), r.sb.ID, 80)
	if !errors.Is(err, tunnel.ErrHostKeyMismatch) {
		t.Fatalf("another host key: got %v, want ErrHostKeyMismatch", err)
	}
}

func TestPortClosed(t *testing.T) {
	r := newRig(t, tunnel.Options{})
	if _, err := r.tun.DialContext(context.Background(), r.sb.ID, loopback.FreePort(t)); !errors.Is(err, tunnel.ErrPortClosed) {
		t.Fatalf("got %v, want ErrPortClosed", err)
	}
}

func TestNotRunning(t *testing.T) {
	r := newRig(t, tunnel.Options{})
	if _, err := r.store.UpdateSandbox(context.Background(), r.sb.ID, func(s *store.Sandbox, _ *store.AuditEvent) error { s.State = store.StateStopped; return nil }, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := r.tun.DialContext(context.Background(), r.sb.ID, 80); !errors.Is(err, tunnel.ErrNotRunning) {
		t.Fatalf("got %v, want ErrNotRunning", err)
	}
}

// The conn's deadlines work, though SSH channels have none.
func TestDeadlines(t *testing.T) {
	r := newRig(t, tunnel.Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 5)
		io.ReadFull(c, buf) // silent until it hears "hello"
		c.Write([]byte("world"))
		io.Copy(io.Discard, c)
	}()
	conn, err := r.tun.DialContext(context.Background(), r.sb.ID, ln.Addr().(*net.TCPAddr).Port)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	_, err = conn.Read(make([]byte, 1))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read past the deadline: got %v, want a timeout", err)
	}
	conn.SetDeadline(time.Time{})
	conn.Write([]byte("hello"))
	buf := make([]byte, 5)
	if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != "world" {
		t.Fatalf("after clearing the deadline: %q, %v", buf, err)
	}
	conn.SetWriteDeadline(time.Now().Add(-time.Second))
	if _, err := conn.Write([]byte("x")); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("write past the deadline: got %v", err)
	}
}

// A killed TCP connection: the stream through it fails, and the next dial
// connects again.
func TestRedialAfterCut(t *testing.T) {
	r := newRig(t, tunnel.Options{})
	_, base := upstream(t)
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go io.Copy(c, c) // echo
		}
	}()
	stream, err := r.tun.DialContext(context.Background(), r.sb.ID, ln.Addr().(*net.TCPAddr).Port)
	if err != nil {
		t.Fatal(err)
	}
	stream.Write([]byte("ping"))
	buf := make([]byte, 4)
	if _, err := io.ReadFull(stream, buf); err != nil {
		t.Fatal(err)
	}
	r.proxy.cut()
	stream.SetReadDeadline(time.Now().Add(10 * time.Second))
	var ne net.Error
	if _, err := stream.Read(buf); err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		t.Fatalf("read on a cut connection: %v, want an error at once", err)
	}
	c := r.httpClient()
	if !wait.Until(10*time.Second, func() bool {
		var res *http.Response
		if res, err = c.Get(base + "/again"); err != nil {
			return false
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if string(b) != "hello /again" {
			t.Fatalf("got %q", b)
		}
		return true
	}) {
		t.Fatalf("never redialled: %v", err)
	}
	if n := r.proxy.accepts.Load(); n != 2 {
		t.Fatalf("%d connections, want 2 (one redial)", n)
	}
}

// A connection that stops answering keepalives is closed, and the next
// dial makes a new one.
func TestKeepAliveClosesDeadConnection(t *testing.T) {
	var logs syncbuf.Buffer
	// A second: the keepalive's answer must come within it, and under
	// make test's load a real sshd took longer than the 100 ms this had
	// (the first GET, before the freeze, found the connection closed).
	r := newRig(t, tunnel.Options{KeepAlive: time.Second, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	_, base := upstream(t)
	c := r.httpClient()
	get(t, c, base+"/1")
	r.proxy.frozen.Store(true)
	wait.For(t, 10*time.Second, "the tunnel gives up on a connection that does not answer", func() bool {
		return strings.Contains(logs.String(), "does not answer keepalives")
	})
	r.proxy.frozen.Store(false)
	r.proxy.cut() // what is left of the old connection
	wait.For(t, 10*time.Second, "a new connection after the old one died", func() bool {
		if res, err := c.Get(base + "/2"); err == nil {
			res.Body.Close()
		}
		return r.proxy.accepts.Load() >= 2
	})
}

// Watch drops a sandbox's connection when it stops.
func TestWatchDropsOnStop(t *testing.T) {
	r := newRig(t, tunnel.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r.tun.Watch(ctx, r.store)
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			io.Copy(io.Discard, c)
		}
	}()
	// No need to wait for Watch to subscribe: if it does before the stop,
	// the feed tells it; if after, it checks the connections it has then.
	conn, err := r.tun.DialContext(ctx, r.sb.ID, ln.Addr().(*net.TCPAddr).Port)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.store.UpdateSandbox(ctx, r.sb.ID, func(s *store.Sandbox, _ *store.AuditEvent) error { s.State = store.StateStopping; return nil }, nil); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Read(make([]byte, 1)); err == nil {
		t.Fatal("read on a dropped connection succeeded")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the connection was not dropped when the sandbox stopped")
	}
}
