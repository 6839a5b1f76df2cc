package edge

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"syscall"
	"time"

	"froog.tech/froog/names"
)

// Listening: the TLS handshake and the split by ALPN between the two
// protocols' servers, the plain-HTTP listener that redirects to HTTPS,
// and the connections that outlive their servers' view (websockets),
// tracked so that shutdown and Close end them.

// withDone is ctx, also ended by Close.
func (s *Server) withDone(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-s.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// ServeTLS serves HTTPS on ln until ctx ends. After the TLS handshake, a
// view host's connection (by SNI) goes to the views' server; otherwise
// ALPN h2 goes to net/http's HTTP/2 server and everything else to
// fasthttp's HTTP/1.1 server behind the framing guard; both serve through
// the one pipeline.
func (s *Server) ServeTLS(ctx context.Context, ln net.Listener) error {
	ctx, stop := s.withDone(ctx)
	defer stop()
	cfg := s.tlsConfig()
	hctx, hcancel := s.withDone(context.Background())
	defer hcancel()
	h1, h2, views := newConnListener(ln.Addr()), newConnListener(ln.Addr()), newConnListener(ln.Addr())
	h2srv, viewsSrv := s.newH2Server(s), s.newH2Server(http.HandlerFunc(s.serveView))
	h1srv := s.newH1Server()
	errc := make(chan error, 3)
	go func() { errc <- s.runServer(ctx, "HTTP/2", h2srv, func() error { return h2srv.Serve(h2) }) }()
	go func() { errc <- s.runServer(ctx, "views", viewsSrv, func() error { return viewsSrv.Serve(views) }) }()
	go func() {
		err := h1srv.Serve(h1)
		if ctx.Err() != nil {
			err = nil
		}
		errc <- err
	}()
	acceptc := make(chan error, 1)
	go func() {
		acceptc <- s.accept(hctx, ln, func(c net.Conn) {
			// Not ctx: during the drain delay the listener still
			// accepts, and those handshakes must complete. Close (done)
			// and the handshake's deadline bound it.
			go s.handshake(hctx, tls.Server(c, cfg), h1, h2, views)
		})
	}()
	var first error // what ServeTLS returns: the first failure
	acceptDone := false
	select {
	case <-ctx.Done():
	case first = <-acceptc: // the listener failed for good: the edge stops, and says why
		acceptDone = true
		stop()
	}
	s.shutdown("HTTP/1.1", func() {
		ln.Close()
		s.closeHijacked() // before the shutdown, which would wait for them
	}, h1srv.ShutdownWithContext) // closes h1; the HTTP/2 server's Shutdown closes h2
	s.closeHijacked()
	if !acceptDone {
		first = <-acceptc
	}
	// Nothing more comes to the servers' listeners. A server whose Serve
	// began after its shutdown (an edge stopped as it starts) waits on
	// its listener until it is closed.
	h1.Close()
	h2.Close()
	views.Close()
	for range 3 {
		if err := <-errc; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// accept hands each connection ln accepts to serve, until ln is closed
// (or ctx ends while it waits). A temporary failure (EMFILE under a connection flood above all) is
// waited out, 5 ms doubling up to 1 s, as net/http's Server does: the
// connections waiting in the backlog are taken once descriptors are
// free. Any other failure is returned.
func (s *Server) accept(ctx context.Context, ln net.Listener, serve func(net.Conn)) error {
	var delay time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			if !temporary(err) {
				return fmt.Errorf("edge: accept on %s: %w", ln.Addr(), err)
			}
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			s.m.acceptRetries.Inc()
			if delay == time.Second {
				s.o.Logger.Warn("edge accept failing: retrying", slog.String("error", err.Error()), slog.Duration("delay", delay))
			}
			select {
			case <-time.After(delay):
			case <-ctx.Done():
				return nil
			}
			continue
		}
		delay = 0
		if c = s.conns.admit(c, s.o.MaxConnsPerIP); c == nil {
			continue // one address has too many open: refused before TLS
		}
		serve(c)
	}
}

// temporary reports whether an accept error passes: out of descriptors
// or memory, or what the system calls temporary.
func temporary(err error) bool {
	if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) || errors.Is(err, syscall.ENOBUFS) ||
		errors.Is(err, syscall.ENOMEM) || errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.EINTR) {
		return true
	}
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}

// aeadSuites are the TLS 1.2 cipher suites the edge accepts: AEAD only,
// as Caddy's defaults. Go's defaults add two CBC suites
// (ECDHE-ECDSA-AES128-SHA, -AES256-SHA), whose MAC-then-encrypt
// construction is open to padding-oracle timing (Lucky13). TLS 1.3's
// suites are all AEAD, and Go does not let them be chosen.
var aeadSuites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// tlsConfig is the TLS of the edge's HTTPS listener (froogd's only one:
// the API and metrics listeners are plain HTTP, for a proxy or loopback).
func (s *Server) tlsConfig() *tls.Config {
	cfg := &tls.Config{
		GetCertificate: s.o.GetCertificate,
		MinVersion:     tls.VersionTLS12,
		CipherSuites:   aeadSuites,
		// acme-tls/1 stays offered for TLS-ALPN-01 challenges.
		NextProtos: []string{"h2", "http/1.1", "acme-tls/1"},
	}
	if t := s.o.Tickets; t != nil {
		cfg.WrapSession, cfg.UnwrapSession = t.wrap, t.unwrap
	}
	return cfg
}

// handshake completes TLS and hands the connection to the server of its
// protocol, or (SNI a view host) to the views' server, whatever its
// protocol: views are dispatched here, once.
func (s *Server) handshake(ctx context.Context, c *tls.Conn, h1, h2, views *connListener) {
	c.SetDeadline(time.Now().Add(s.o.ReadHeaderTimeout))
	if err := c.HandshakeContext(ctx); err != nil {
		c.Close()
		return
	}
	c.SetDeadline(time.Time{})
	st := c.ConnectionState()
	switch {
	case st.NegotiatedProtocol == "acme-tls/1":
		c.Close() // the handshake was the answer
	case s.isView(st.ServerName):
		views.put(c)
	case st.NegotiatedProtocol == "h2":
		h2.put(c)
	default:
		h1.put(&framingConn{Conn: c, headTimeout: s.o.ReadHeaderTimeout})
	}
}

// newH2Server is a net/http server (HTTP/2, and HTTP/1.1 for views).
func (s *Server) newH2Server(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: s.o.ReadHeaderTimeout,
		IdleTimeout:       s.o.IdleTimeout,
		MaxHeaderBytes:    maxHeader,
		ErrorLog:          discardLog,
	}
}

// isView reports whether a host name is one of froog's view hosts (a
// sandbox's desktop or browser view, an account's wall).
func (s *Server) isView(host string) bool {
	return s.o.Views != nil && names.IsView(names.Label(host, s.domain))
}

// connListener is a net.Listener fed with connections by put.
type connListener struct {
	addr   net.Addr
	conns  chan net.Conn
	done   chan struct{}
	closer sync.Once
}

func newConnListener(addr net.Addr) *connListener {
	return &connListener{addr: addr, conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *connListener) put(c net.Conn) {
	select {
	case l.conns <- c:
	case <-l.done:
		c.Close()
	}
}

func (l *connListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *connListener) Close() error {
	l.closer.Do(func() { close(l.done) })
	return nil
}

func (l *connListener) Addr() net.Addr { return l.addr }

// ServeRedirect serves plain HTTP on ln: browsers are sent to HTTPS.
func (s *Server) ServeRedirect(ctx context.Context, ln net.Listener) error {
	ctx, cancel := s.withDone(ctx)
	defer cancel()
	srv := &http.Server{
		ReadHeaderTimeout: s.o.ReadHeaderTimeout,
		IdleTimeout:       s.o.IdleTimeout, // without it, a keep-alive connection is kept for ever
		ErrorLog:          discardLog,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if s.o.HTTPChallenge != nil && s.o.HTTPChallenge(w, r) {
				return
			}
			host := r.Host
			if h, _, err := net.SplitHostPort(host); err == nil {
				host = h
			}
			if s.o.Routes.Lookup(host) == nil && names.Label(host, s.domain) == "" {
				writeProblem(w, r, errNotFound, "")
				return
			}
			if p := s.o.HTTPSPort; p != 0 && p != 443 {
				host = net.JoinHostPort(host, strconv.Itoa(p))
			}
			http.Redirect(w, r, "https://"+host+r.URL.RequestURI(), http.StatusPermanentRedirect)
		}),
	}
	return s.runServer(ctx, "HTTP redirect", srv, func() error { return srv.Serve(ln) })
}

// runServer serves srv (serve) until ctx ends, then drains it (shutdown,
// named what).
func (s *Server) runServer(ctx context.Context, what string, srv *http.Server, serve func() error) error {
	errc := make(chan error, 1)
	go func() { errc <- serve() }()
	select {
	case err := <-errc:
		if ctx.Err() == nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
	case <-ctx.Done():
	}
	s.shutdown(what, func() {}, func(ctx context.Context) error {
		err := srv.Shutdown(ctx) // closes its listener
		if err != nil {
			srv.Close() // past the drain timeout: cut what is left
		}
		return err
	})
	s.closeHijacked()
	return nil
}

// shutdown is the drain every listener's server ends with: through the
// drain delay (drain) it serves on; then stop takes no new connection,
// and finish lets what is in flight end within its context, which ends
// at the drain timeout (or Close), cutting what is left, and says so
// (an error), which the log then does.
func (s *Server) shutdown(what string, stop func(), finish func(context.Context) error) {
	s.drain()
	stop()
	ctx, cancel := s.withDone(context.Background())
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, s.o.DrainTimeout)
	defer cancelTimeout()
	if err := finish(ctx); err != nil {
		s.o.Logger.Warn("edge drain: requests still in flight at the drain timeout are cut",
			slog.String("server", what), slog.Duration("timeout", s.o.DrainTimeout))
	}
}

// closeHijacked ends every websocket: Shutdown does not see them.
func (s *Server) closeHijacked() {
	s.mu.Lock()
	conns := make([]io.Closer, 0, len(s.hijacked))
	for c := range s.hijacked {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// track notes a websocket so that shutdown ends it: the servers'
// Shutdown does not see hijacked connections.
func (s *Server) track(c io.Closer) {
	s.mu.Lock()
	s.hijacked[c] = struct{}{}
	s.mu.Unlock()
}

func (s *Server) untrack(c io.Closer) {
	s.mu.Lock()
	delete(s.hijacked, c)
	s.mu.Unlock()
}

// connCounts counts each client address's open connections, TCP and
// QUIC together: one budget per address, whatever the protocol.
type connCounts struct {
	mu sync.Mutex
	m  map[netip.Addr]int
}

// enter counts one more connection from ip, unless it has max open
// already (false).
func (cc *connCounts) enter(ip netip.Addr, max int) bool {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.m == nil {
		cc.m = map[netip.Addr]int{}
	}
	if cc.m[ip] >= max {
		return false
	}
	cc.m[ip]++
	return true
}

// leave counts one of ip's connections out.
func (cc *connCounts) leave(ip netip.Addr) {
	cc.mu.Lock()
	if cc.m[ip]--; cc.m[ip] <= 0 {
		delete(cc.m, ip)
	}
	cc.mu.Unlock()
}

// open is how many connections ip has open.
func (cc *connCounts) open(ip netip.Addr) int {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.m[ip]
}

// admit counts c against its address and returns it wrapped so that
// closing it counts it out; past max it closes c and returns nil.
func (cc *connCounts) admit(c net.Conn, max int) net.Conn {
	ip, ok := addrIP(c.RemoteAddr())
	if !ok {
		return c
	}
	if !cc.enter(ip, max) {
		c.Close()
		return nil
	}
	return &countedConn{Conn: c, cc: cc, ip: ip}
}

// addrIP is a connection's address without its port, IPv4-mapped IPv6
// read as IPv4 (one client, one count).
func addrIP(a net.Addr) (netip.Addr, bool) {
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.Addr{}, false
	}
	return ap.Addr().Unmap(), true
}

type countedConn struct {
	net.Conn
	cc   *connCounts
	ip   netip.Addr
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.cc.leave(c.ip) })
	return c.Conn.Close()
}
