package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/crypto/ssh"
	"golang.org/x/sync/errgroup"

	"froog.tech/froog/internal/health"
	"froog.tech/froog/internal/sshkey"
	"froog.tech/froog/internal/version"
	"froog.tech/froog/store"
	"froog.tech/froog/store/pg"
	"froog.tech/froog/tunnel"
)

// proc is one froogd process: the goroutines its roles start, and what
// closes once they have all ended.
type proc struct {
	ctx     context.Context // ends when the process stops, or one goroutine fails
	cancel  context.CancelFunc
	g       *errgroup.Group
	closers []func()
}

// runProc runs one process: start opens what it needs and starts its
// roles' goroutines in p; then runProc waits for them to end, and closes.
// A start that fails stops what it had started.
func runProc(ctx context.Context, start func(p *proc) error) error {
	ctx, cancel := context.WithCancel(ctx)
	g, ctx := errgroup.WithContext(ctx)
	p := &proc{ctx: ctx, cancel: cancel, g: g}
	err := start(p)
	if err == nil {
		sdNotify("READY=1")
		go func() { <-p.ctx.Done(); sdNotify("STOPPING=1") }()
	}
	return p.wait(err)
}

// Go runs f until the process stops.
func (p *proc) Go(f func(ctx context.Context) error) { p.g.Go(func() error { return f(p.ctx) }) }

// onClose runs f once every goroutine has ended, the last added first.
func (p *proc) onClose(f func()) { p.closers = append(p.closers, f) }

// wait waits for the goroutines, then closes; err, when set (a start that
// failed), stops the goroutines first and is what wait returns.
func (p *proc) wait(err error) error {
	if err != nil {
		p.cancel()
	}
	if werr := p.g.Wait(); err == nil {
		err = werr
	}
	p.cancel()
	for i := len(p.closers) - 1; i >= 0; i-- {
		p.closers[i]()
	}
	return err
}

// roleStore is the whole store the roles share: the embedded one or
// Postgres, each with its certificate area.
type roleStore interface {
	store.Store
	store.CertStorage
}

// parts are what the roles in one process share.
type parts struct {
	store roleStore
	key   ssh.Signer // the control plane's SSH key
	tun   *tunnel.Tunnel
	reg   *prometheus.Registry
	log   *slog.Logger
}

// controlKey reads the control plane's SSH key (the key the API and the
// edge log in to sandboxes with), creating it the first time when create
// is set.
func controlKey(path string, create bool) (ssh.Signer, error) {
	load := sshkey.Load
	if create {
		load = func(path string) (ssh.Signer, []byte, error) { return sshkey.LoadOrCreate(path, "froog control plane") }
	}
	s, _, err := load(path)
	if err != nil {
		return nil, fmt.Errorf("control key: %w", err)
	}
	return s, nil
}

// tunnelConfig is the tunnel's, in every role that reaches sandboxes.
type tunnelConfig struct{ KeepAliveSecs int }

func (c *tunnelConfig) bind(f flags) {
	f.num(&c.KeepAliveSecs, "tunnel-keepalive-secs", 15, "how often the connection to each sandbox's SSH server is checked; one that does not answer within as long again is closed (requests to the sandbox then say so, and the next one dials again)")
}

func (c tunnelConfig) validate() error {
	if c.KeepAliveSecs < 1 {
		return fmt.Errorf("--tunnel-keepalive-secs %d: want 1 or more", c.KeepAliveSecs)
	}
	return nil
}

// runPG runs a role against Postgres: it opens what every such role
// shares (the control key, the store, and the tunnel), then calls start,
// and waits.
func runPG(ctx context.Context, role, dbURL, keyFile string, tc tunnelConfig, stderr io.Writer, start func(p *proc, sh parts) error) error {
	return runProc(ctx, func(p *proc) error {
		key, err := controlKey(keyFile, false)
		if err != nil {
			return err
		}
		st, err := pg.Open(p.ctx, pg.Options{URL: dbURL})
		if err != nil {
			return err
		}
		p.onClose(func() { st.Close() })
		sh := parts{store: st, key: key, reg: newRegistry(role), log: slog.New(slog.NewJSONHandler(stderr, nil))}
		if err := openTunnel(p, &sh, tc); err != nil {
			return err
		}
		return start(p, sh)
	})
}

// openTunnel sets sh.tun: the tunnel to the sandboxes, kept current by the
// change feed while p runs.
func openTunnel(p *proc, sh *parts, tc tunnelConfig) error {
	tun, err := tunnel.New(tunnel.Options{Sandboxes: sh.store, Signer: sh.key, Logger: sh.log, Registerer: sh.reg,
		KeepAlive: time.Duration(tc.KeepAliveSecs) * time.Second})
	if err != nil {
		return err
	}
	p.onClose(func() { tun.Close() })
	p.Go(func(ctx context.Context) error { return tun.Watch(ctx, sh.store) })
	sh.tun = tun
	return nil
}

// serveHTTP serves h on ln until ctx ends, then shuts down gracefully.
func serveHTTP(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}

// serveAdmin serves the admin endpoints on ln (nil: none): /healthz,
// /readyz with the role's checks, and reg's metrics on /metrics. It
// answers until every other part of the process has stopped, so that a
// draining edge still says it is not ready.
func serveAdmin(p *proc, ln net.Listener, reg *prometheus.Registry, checks ...health.Check) {
	if ln == nil {
		return
	}
	h := health.Handler(health.Options{Checks: checks, Metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})})
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	p.onClose(func() { srv.Close() })
}

// storeCheck is ready when the store answers.
func storeCheck(st store.Store) health.Check {
	return health.Check{Name: "store", Run: func(ctx context.Context) error {
		if _, err := st.Head(ctx); err != nil {
			return fmt.Errorf("the store does not answer: %w", err)
		}
		return nil
	}}
}

// listen listens on each address ("" gives a nil listener); the listeners
// close with p.
func listen(p *proc, addrs ...string) ([]net.Listener, error) {
	lns := make([]net.Listener, len(addrs))
	for i, a := range addrs {
		if a == "" {
			continue
		}
		ln, err := net.Listen("tcp", a)
		if err != nil {
			return nil, fmt.Errorf("listen on %s: %w", a, err)
		}
		p.onClose(func() { ln.Close() })
		lns[i] = ln
	}
	return lns, nil
}

// listenQUIC opens HTTP/3's UDP socket at the HTTPS listener's address
// (its port number). For an address of port 0 that number is the one TCP
// gave, which UDP may have in use already: then both are opened again on
// another, a few times, and the new HTTPS listener is returned.
func listenQUIC(p *proc, addr string, tls net.Listener) (net.Listener, net.PacketConn, error) {
	_, asked, _ := net.SplitHostPort(addr)
	for try := 1; ; try++ {
		pc, err := net.ListenPacket("udp", tls.Addr().String())
		if err == nil {
			p.onClose(func() { pc.Close() })
			return tls, pc, nil
		}
		if asked != "0" || try == 10 {
			return nil, nil, fmt.Errorf("listen for HTTP/3 (--http3) on udp %s: %w", tls.Addr(), err)
		}
		tls.Close()
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, nil, fmt.Errorf("listen on %s: %w", addr, err)
		}
		p.onClose(func() { ln.Close() })
		tls = ln
	}
}

// port is a listener's TCP port.
func port(ln net.Listener) int { return ln.Addr().(*net.TCPAddr).Port }

// newRegistry is a process's metrics registry, with the Go runtime's and
// the process's own figures and froog_build_info for role.
func newRegistry(role string) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), version.Collector(role))
	return reg
}

// printAdmin says where the admin endpoints are, when ln is set.
func printAdmin(w io.Writer, ln net.Listener) {
	if ln != nil {
		fmt.Fprintf(w, "admin on http://%s (/healthz, /readyz, /metrics)\n", ln.Addr())
	}
}
