package edge

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Dialer opens connections to a port inside a sandbox (package tunnel).
type Dialer interface {
	DialContext(ctx context.Context, sandboxID string, port int) (net.Conn, error)
}

// Options configure the edge. Zero values are documented per field.
type Options struct {
	Store  Store  // required
	Dialer Dialer // required
	// Domain is the public-URL domain. Required.
	Domain string
	// GetCertificate gives the TLS certificates (package certs). Required.
	GetCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	// HTTPChallenge, when set, answers ACME HTTP-01 challenges on the HTTP
	// listener; it reports whether it answered.
	HTTPChallenge func(http.ResponseWriter, *http.Request) bool
	// HTTPSPort is the HTTPS port visitors reach, for redirects from
	// HTTP; 0 or 443 leaves it out.
	HTTPSPort int
	// ReadHeaderTimeout bounds how long a client may take to send a
	// request's headers; 0 means 10 s.
	ReadHeaderTimeout time.Duration
	// RateLimit is how many requests a second one client address may
	// send on average, and RateBurst how many at once; 0 means 200 and
	// 2000, a negative RateLimit turns the limit off.
	RateLimit float64
	RateBurst int
	// Registerer gets the edge's metrics; nil registers none.
	Registerer prometheus.Registerer
	Logger     *slog.Logger     // access log; nil discards
	Now        func() time.Time // nil means time.Now
}

// Server is the edge.
type Server struct {
	o         Options
	routes    *routes
	limit     *limiter // nil: no limit
	proxy     *httputil.ReverseProxy
	upstreams upstreams
	m         metrics

	mu       sync.Mutex
	hijacked map[net.Conn]struct{}
	servers  []*http.Server
}

// New checks the options and builds the edge; it starts nothing.
func New(o Options) (*Server, error) {
	var errs []error
	if o.Store == nil {
		errs = append(errs, errors.New("edge: a store is required"))
	}
	if o.Dialer == nil {
		errs = append(errs, errors.New("edge: a dialer is required"))
	}
	if o.Domain == "" {
		errs = append(errs, errors.New("edge: a domain is required"))
	}
	if o.GetCertificate == nil {
		errs = append(errs, errors.New("edge: a certificate source is required"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.ReadHeaderTimeout == 0 {
		o.ReadHeaderTimeout = 10 * time.Second
	}
	o.Domain = strings.ToLower(strings.TrimSuffix(o.Domain, "."))
	s := &Server{o: o, m: newMetrics(o.Registerer), hijacked: map[net.Conn]struct{}{}}
	s.routes = &routes{store: o.Store, domain: o.Domain, log: o.Logger, now: o.Now, ready: make(chan struct{}),
		published: func(t *table) {
			s.m.routes.Set(float64(len(t.byURL)))
			s.upstreams.prune(t)
		}}
	s.proxy = s.newReverseProxy()
	s.upstreams.s = s
	switch {
	case o.RateLimit == 0:
		s.limit = newLimiter(200, 2000)
	case o.RateLimit > 0:
		s.limit = newLimiter(o.RateLimit, max(o.RateBurst, int(o.RateLimit)))
	}
	return s, nil
}

// Run keeps the route table current until ctx ends.
func (s *Server) Run(ctx context.Context) { s.routes.run(ctx) }

// ErrUnknownName and ErrNotCurrent are Owner's refusals.
var (
	ErrUnknownName = errors.New("no URL holds this name")
	ErrNotCurrent  = errors.New("the route table is not current: the store is unreachable")
)

// Owner says which account's URL holds the host name, from the route
// table in memory; certificates are ordered only for such names. While
// the table does not follow the store it refuses every name.
func (s *Server) Owner(name string) (string, error) {
	if !s.routes.current.Load() {
		return "", ErrNotCurrent
	}
	rt := s.routes.lookup(name)
	if rt == nil {
		return "", ErrUnknownName
	}
	return rt.accountID, nil
}

// Ready is closed once the route table has loaded.
func (s *Server) Ready() <-chan struct{} { return s.routes.ready }

// ServeTLS serves HTTPS on ln until ctx ends. After the TLS handshake,
// ALPN h2 goes to net/http's HTTP/2 server and everything else to
// fasthttp's HTTP/1.1 server behind the framing guard; both call the same
// core (decide).
func (s *Server) ServeTLS(ctx context.Context, ln net.Listener) error {
	cfg := &tls.Config{
		GetCertificate: s.o.GetCertificate,
		MinVersion:     tls.VersionTLS12,
		// acme-tls/1 stays offered for TLS-ALPN-01 challenges.
		NextProtos: []string{"h2", "http/1.1", "acme-tls/1"},
	}
	h1, h2 := newConnListener(ln.Addr()), newConnListener(ln.Addr())
	h2srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: s.o.ReadHeaderTimeout,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    maxHeader,
		ErrorLog:          discardLog,
	}
	h1srv := s.newH1Server()
	errc := make(chan error, 3)
	go func() { errc <- s.serve(ctx, h2srv, func() error { return h2srv.Serve(h2) }) }()
	go func() {
		err := h1srv.Serve(h1)
		if ctx.Err() != nil {
			err = nil
		}
		errc <- err
	}()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				errc <- nil
				return
			}
			go s.handshake(ctx, tls.Server(c, cfg), h1, h2)
		}
	}()
	<-ctx.Done()
	ln.Close()
	s.closeHijacked() // before the shutdown, which would wait for them
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	h1srv.ShutdownWithContext(sctx) // closes h1; the HTTP/2 server's Shutdown closes h2
	cancel()
	s.closeHijacked()
	var first error
	for range 3 {
		if err := <-errc; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// handshake completes TLS and hands the connection to the server of its
// protocol.
func (s *Server) handshake(ctx context.Context, c *tls.Conn, h1, h2 *connListener) {
	c.SetDeadline(time.Now().Add(s.o.ReadHeaderTimeout))
	if err := c.HandshakeContext(ctx); err != nil {
		c.Close()
		return
	}
	c.SetDeadline(time.Time{})
	switch c.ConnectionState().NegotiatedProtocol {
	case "h2":
		h2.put(c)
	case "acme-tls/1":
		c.Close() // the handshake was the answer
	default:
		h1.put(&framingConn{Conn: c})
	}
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
	srv := &http.Server{
		ReadHeaderTimeout: s.o.ReadHeaderTimeout,
		ErrorLog:          discardLog,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if s.o.HTTPChallenge != nil && s.o.HTTPChallenge(w, r) {
				return
			}
			host := r.Host
			if h, _, err := net.SplitHostPort(host); err == nil {
				host = h
			}
			if s.routes.lookup(host) == nil && parseHost(host, s.o.Domain) == "" {
				writeProblem(w, r, errNotFound, "")
				return
			}
			if p := s.o.HTTPSPort; p != 0 && p != 443 {
				host = net.JoinHostPort(host, strconv.Itoa(p))
			}
			http.Redirect(w, r, "https://"+host+r.URL.RequestURI(), http.StatusPermanentRedirect)
		}),
	}
	return s.serve(ctx, srv, func() error { return srv.Serve(ln) })
}

func (s *Server) serve(ctx context.Context, srv *http.Server, serve func() error) error {
	s.mu.Lock()
	s.servers = append(s.servers, srv)
	s.mu.Unlock()
	errc := make(chan error, 1)
	go func() { errc <- serve() }()
	select {
	case err := <-errc:
		if ctx.Err() == nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv.Shutdown(sctx)
	s.closeHijacked()
	return nil
}

// closeHijacked ends every websocket: Shutdown does not see them.
func (s *Server) closeHijacked() {
	s.mu.Lock()
	conns := make([]net.Conn, 0, len(s.hijacked))
	for c := range s.hijacked {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.Close() // takes s.mu itself
	}
}

func newRequestID() string {
	var b [8]byte
	rand.Read(b[:])
	return "req_" + hex.EncodeToString(b[:])
}

// track notes a hijacked connection (a websocket's, either side) so that
// shutdown closes it: the servers' Shutdown does not see them.
func (s *Server) track(c net.Conn) net.Conn {
	tc := &trackedConn{Conn: c, s: s}
	s.mu.Lock()
	s.hijacked[tc] = struct{}{}
	s.mu.Unlock()
	return tc
}

type trackedConn struct {
	net.Conn
	s    *Server
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.s.mu.Lock()
		delete(c.s.hijacked, c)
		c.s.mu.Unlock()
	})
	return c.Conn.Close()
}

type metrics struct {
	requests   *prometheus.CounterVec
	latency    prometheus.Histogram
	bytesIn    prometheus.Counter
	bytesOut   prometheus.Counter
	websockets prometheus.Gauge
	routes     prometheus.Gauge
}

func newMetrics(r prometheus.Registerer) metrics {
	m := metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "froog_edge_requests_total", Help: "Requests by status class."}, []string{"class"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "froog_edge_request_duration_seconds",
			Help: "From a request's head to the end of its answer (to the upgrade, for websockets).", Buckets: prometheus.ExponentialBuckets(0.0005, 2.5, 14)}),
		bytesIn:    prometheus.NewCounter(prometheus.CounterOpts{Name: "froog_edge_request_bytes_total", Help: "Request body bytes received."}),
		bytesOut:   prometheus.NewCounter(prometheus.CounterOpts{Name: "froog_edge_response_bytes_total", Help: "Response body bytes sent."}),
		websockets: prometheus.NewGauge(prometheus.GaugeOpts{Name: "froog_edge_websockets_open", Help: "Open websocket (upgraded) connections."}),
		routes:     prometheus.NewGauge(prometheus.GaugeOpts{Name: "froog_edge_routes", Help: "URLs in the route table."}),
	}
	if r != nil {
		r.MustRegister(m.requests, m.latency, m.bytesIn, m.bytesOut, m.websockets, m.routes)
	}
	return m
}
