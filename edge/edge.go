package edge

import (
	"bufio"
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

	"froog.tech/froog/tunnel"
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
	// HTTPSPort is the HTTPS port visitors reach, for redirects from
	// HTTP; 0 or 443 leaves it out.
	HTTPSPort int
	// ReadHeaderTimeout bounds how long a client may take to send a
	// request's headers; 0 means 10 s.
	ReadHeaderTimeout time.Duration
	// Registerer gets the edge's metrics; nil registers none.
	Registerer prometheus.Registerer
	Logger     *slog.Logger     // access log; nil discards
	Now        func() time.Time // nil means time.Now
}

// Server is the edge.
type Server struct {
	o      Options
	routes *routes
	proxy  *httputil.ReverseProxy
	m      metrics

	mu       sync.Mutex
	hijacked map[net.Conn]struct{}
	servers  []*http.Server
}

type ctxKey struct{}

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
		published: func(n int) { s.m.routes.Set(float64(n)) }}
	transport := &http.Transport{
		// The "host" of an upstream request is SANDBOX:PORT; the tunnel
		// reaches 127.0.0.1:PORT inside that sandbox. Connections are
		// pooled per sandbox and port.
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			id, port, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			p, err := strconv.Atoi(port)
			if err != nil {
				return nil, err
			}
			return o.Dialer.DialContext(ctx, id, p)
		},
		MaxIdleConnsPerHost:    64,
		IdleConnTimeout:        90 * time.Second,
		MaxResponseHeaderBytes: 64 << 10,
		DisableCompression:     true,
	}
	s.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			rt := pr.In.Context().Value(ctxKey{}).(*route)
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = rt.sandboxID + ":" + strconv.Itoa(rt.port)
			pr.Out.Host = pr.In.Host
			pr.SetXForwarded()                              // replaces whatever X-Forwarded-* the client sent
			pr.Out.Header.Set("X-Forwarded-Proto", "https") // the edge serves only HTTPS
		},
		Transport:     transport,
		FlushInterval: -1, // server-sent events and streams go out as they come
		ErrorHandler:  s.proxyError,
		ErrorLog:      slog.NewLogLogger(o.Logger.Handler(), slog.LevelWarn),
	}
	return s, nil
}

// Run keeps the route table current until ctx ends.
func (s *Server) Run(ctx context.Context) { s.routes.run(ctx) }

// Ready is closed once the route table has loaded.
func (s *Server) Ready() <-chan struct{} { return s.routes.ready }

// ServeTLS serves HTTPS on ln until ctx ends. After the TLS handshake,
// ALPN h2 goes to an HTTP/2 server and everything else to an HTTP/1.1
// server behind the framing guard; both call the same ServeHTTP.
func (s *Server) ServeTLS(ctx context.Context, ln net.Listener) error {
	cfg := &tls.Config{
		GetCertificate: s.o.GetCertificate,
		MinVersion:     tls.VersionTLS12,
		// acme-tls/1 stays offered for TLS-ALPN-01 challenges.
		NextProtos: []string{"h2", "http/1.1", "acme-tls/1"},
	}
	h1, h2 := newConnListener(ln.Addr()), newConnListener(ln.Addr())
	base := func() *http.Server {
		return &http.Server{
			Handler:           s,
			ReadHeaderTimeout: s.o.ReadHeaderTimeout,
			IdleTimeout:       2 * time.Minute,
			MaxHeaderBytes:    64<<10 + 4096,
			ErrorLog:          slog.NewLogLogger(s.o.Logger.Handler(), slog.LevelDebug),
		}
	}
	h1srv, h2srv := base(), base()
	h1srv.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){} // HTTP/1.1 only
	errc := make(chan error, 3)
	go func() { errc <- s.serve(ctx, h1srv, func() error { return h1srv.Serve(h1) }) }()
	go func() { errc <- s.serve(ctx, h2srv, func() error { return h2srv.Serve(h2) }) }()
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
	ln.Close() // the servers' Shutdown closes h1 and h2
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
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			host := r.Host
			if h, _, err := net.SplitHostPort(host); err == nil {
				host = h
			}
			if s.routes.lookup(host) == nil && parseHost(host, s.o.Domain) == "" {
				render(w, r, errNotFound, "")
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

// ServeHTTP is the edge's one core, whatever the protocol: route, auth,
// pages, then the proxy.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	id := newRequestID()
	rec := &recorder{ResponseWriter: w, s: s, status: http.StatusOK}
	rt := s.routes.lookup(r.Host)
	defer func() {
		s.m.requests.WithLabelValues(strconv.Itoa(rec.status/100) + "xx").Inc()
		s.m.bytesOut.Add(float64(rec.bytes))
		// Never the query (it may carry a token), a cookie or a header.
		s.o.Logger.LogAttrs(r.Context(), slog.LevelInfo, "request",
			slog.String("request_id", id), slog.String("host", r.Host), slog.String("method", r.Method),
			slog.String("path", r.URL.Path), slog.Int("status", rec.status), slog.Int64("bytes", rec.bytes),
			slog.Duration("duration", time.Since(start)), slog.String("proto", r.Proto))
	}()
	w.Header().Set("X-Request-Id", id)
	if rt == nil {
		render(rec, r, errNotFound, id)
		return
	}
	if !rt.public && !isPreflight(r) {
		v, tok, life := rt.authorize(r, s.o.Now())
		switch v {
		case missing:
			render(rec, r, errTokenMissing, id)
			return
		case invalid:
			render(rec, r, errTokenInvalid, id)
			return
		case redirect:
			rec.Header().Set("Set-Cookie", tokenCookieValue(tok, life))
			rec.Header().Set("Cache-Control", "no-store")
			rec.Header().Set("Referrer-Policy", "no-referrer")
			loc := r.URL.Path
			if q := stripQuery(r.URL.RawQuery); q != "" {
				loc += "?" + q
			}
			http.Redirect(rec, r, loc, http.StatusFound)
			return
		}
	}
	strip(r)
	r.Header.Del("X-Request-Id")
	r.Header.Set("X-Request-Id", id)
	s.proxy.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), ctxKey{}, rt)))
}

// proxyError answers when the sandbox could not be reached.
func (s *Server) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	rt := r.Context().Value(ctxKey{}).(*route)
	id := w.Header().Get("X-Request-Id")
	switch {
	case r.Context().Err() != nil:
		w.WriteHeader(499) // the client went away; nobody reads this
	case errors.Is(err, tunnel.ErrNotRunning):
		render(w, r, errStopped, id)
	case strings.Contains(err.Error(), "connect failed"): // the SSH server found nothing on the port
		render(w, r, errBadGateway(rt.port), id)
	default:
		s.o.Logger.Warn("proxy", slog.String("request_id", id), slog.String("sandbox", rt.sandboxID), slog.String("error", err.Error()))
		render(w, r, errBadGateway(rt.port), id)
	}
}

// recorder notes the status and size for the access log, and tracks
// hijacked connections (websockets) so shutdown closes them.
type recorder struct {
	http.ResponseWriter
	s      *Server
	status int
	bytes  int64
}

func (w *recorder) WriteHeader(code int) {
	if code >= 200 || code == http.StatusSwitchingProtocols {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *recorder) Write(b []byte) (int, error) {
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

func (w *recorder) Flush() { http.NewResponseController(w.ResponseWriter).Flush() }

func (w *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	w.status = http.StatusSwitchingProtocols
	tc := &trackedConn{Conn: c, s: w.s}
	w.s.mu.Lock()
	w.s.hijacked[tc] = struct{}{}
	w.s.mu.Unlock()
	w.s.m.websockets.Inc()
	return tc, brw, nil
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
		c.s.m.websockets.Dec()
	})
	return c.Conn.Close()
}

type metrics struct {
	requests   *prometheus.CounterVec
	bytesOut   prometheus.Counter
	websockets prometheus.Gauge
	routes     prometheus.Gauge
}

func newMetrics(r prometheus.Registerer) metrics {
	m := metrics{
		requests:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "froog_edge_requests_total", Help: "Requests by status class."}, []string{"class"}),
		bytesOut:   prometheus.NewCounter(prometheus.CounterOpts{Name: "froog_edge_response_bytes_total", Help: "Response body bytes sent."}),
		websockets: prometheus.NewGauge(prometheus.GaugeOpts{Name: "froog_edge_websockets_open", Help: "Open websocket (upgraded) connections."}),
		routes:     prometheus.NewGauge(prometheus.GaugeOpts{Name: "froog_edge_routes", Help: "URLs in the route table."}),
	}
	if r != nil {
		r.MustRegister(m.requests, m.bytesOut, m.websockets, m.routes)
	}
	return m
}
