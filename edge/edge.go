package edge

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"froog.tech/froog/edge/route"
	"froog.tech/froog/wake"
)

// Dialer opens connections to a port inside a sandbox (package tunnel).
type Dialer interface {
	DialContext(ctx context.Context, sandboxID string, port int) (net.Conn, error)
}

// Routes is the route table the edge reads (package route).
type Routes interface {
	// Lookup finds the route of a Host header, or nil.
	Lookup(host string) *route.Route
	// Recheck looks host up again once the table has caught up with the
	// store, for a request Lookup's route refused (route.Table.Recheck).
	Recheck(host, key string, ok func(*route.Route) bool) *route.Route
	// URL finds the route of a URL by its id, or nil (the request rings
	// follow their URLs with it: traffic.go).
	URL(id string) *route.Route
	// Serves reports whether some route still points at a sandbox's port.
	Serves(p route.Port) bool
	// Sandbox gives the state and auto_start of a sandbox, or nil.
	Sandbox(id string) *route.Sandbox
	// Domain is the public-URL domain, lowercase.
	Domain() string
	// Changed returns a channel closed when the table next changes
	// (the hold waits on it for a sandbox to run).
	Changed() <-chan struct{}
}

var _ Routes = (*route.Table)(nil)

// Options configure the edge. Zero values are documented per field.
type Options struct {
	Routes Routes // required
	Dialer Dialer // required
	// Sandboxes takes the edge's one write: a stopped sandbox's start,
	// asked by a request to one of its URLs. Required.
	Sandboxes Sandboxes
	// BodyIdleTimeout is how long a request body may go without a byte,
	// and MinBodyRate the bytes a second it must average once it has
	// taken that long; 0 means 30 s and 1024. A trickled body would
	// otherwise hold a connection, a tunnel channel and an upstream
	// connection for as long as its sender likes.
	BodyIdleTimeout time.Duration
	MinBodyRate     float64
	// MaxConnsPerIP bounds one client address's open connections; 0
	// means 512.
	MaxConnsPerIP int
	// Views serves froog's view hosts (names.IsView: desktops, browser
	// views, walls), over HTTP/1.1 and HTTP/2 through net/http; nil means
	// they are not served (404).
	Views http.Handler
	// HoldTimeout bounds how long a request waits for its sandbox to
	// start; 0 means 20 s.
	HoldTimeout time.Duration
	// GetCertificate gives the TLS certificates (package certs). Required.
	GetCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	// HTTPChallenge, when set, answers ACME HTTP-01 challenges on the HTTP
	// listener; it reports whether it answered.
	HTTPChallenge func(http.ResponseWriter, *http.Request) bool
	// HTTPSPort is the HTTPS port visitors reach, for redirects from
	// HTTP; 0 or 443 leaves it out.
	HTTPSPort int
	// HTTP3 says the edge serves HTTP/3 (ServeQUIC) on the UDP port of
	// HTTPSPort's number: its HTTP/1.1 and HTTP/2 answers then carry
	// Alt-Svc h3=":HTTPSPort" (443 for 0), which browsers follow. False:
	// they carry none. Either way an app's own Alt-Svc never reaches
	// the client: it would speak for the edge.
	HTTP3 bool
	// DrainDelay is how long the edge keeps accepting after its Serve
	// contexts end, with Draining true, so that load balancers polling
	// readiness take it out first; 0 means none. DrainTimeout bounds how
	// long requests in flight may then take to finish before their
	// connections are cut; 0 means 30 s. (Websockets get a close frame,
	// 1001, when the listener closes.)
	DrainDelay, DrainTimeout time.Duration
	// ReadHeaderTimeout bounds how long a client may take to send a
	// request's headers; 0 means 10 s.
	ReadHeaderTimeout time.Duration
	// IdleTimeout is how long a keep-alive connection may wait for its
	// next request (an HTTP/2 connection, with no stream open) before the
	// edge closes it, quietly (HTTP/2: GOAWAY); 0 means 2 min.
	IdleTimeout time.Duration
	// UpstreamIdle is how long a pooled connection to a sandbox's port may
	// stay idle before it is closed (idle ones are swept as often): long
	// enough to be reused between a page's bursts, short enough that a
	// burst's connections do not linger; under an app's own keep-alive
	// timeout (Node's is 5 s) when the app closes first. 0 means 30 s.
	UpstreamIdle time.Duration
	// RateLimit is how many requests a second one client address may
	// send on average, and RateBurst how many at once; 0 means 200 and
	// 2000, a negative RateLimit turns the limit off.
	RateLimit float64
	RateBurst int
	// Inbox stores the requests of URLs' webhook inboxes and hands them
	// to DeliverInboxes; nil turns inboxes off (their requests go to the
	// app as any other).
	Inbox Inbox
	// OpenSecret opens an inbox's sealed verify secret (bound to its URL's
	// id); nil: an inbox that verifies answers 503, storing nothing.
	OpenSecret func(sealed []byte, urlID string) (string, error)
	// Tickets seal the TLS session tickets with the keys every edge
	// shares (tickets.go), so that a session resumes at any edge; the
	// caller runs them (TicketKeys.Run). nil: Go's own keys, made by each
	// edge process, which resume only there.
	Tickets *TicketKeys
	// Registerer gets the edge's metrics; nil registers none.
	Registerer prometheus.Registerer
	Logger     *slog.Logger     // access log; nil discards
	Now        func() time.Time // nil means time.Now
}

// Server is the edge.
type Server struct {
	o         Options
	domain    string
	limit     *limiter   // nil: no limit
	altSvc    string     // the TCP answers' Alt-Svc; "": none (Options.HTTP3)
	urlLimits urlLimits  // URLs' own rate limits (policy.go)
	bandwidth bandwidths // URLs' bandwidth caps (bandwidth.go)
	proxy     *httputil.ReverseProxy
	upstreams upstreams   // both protocols' connections to sandboxes
	listening listenCache // what listens in sandboxes, for the pages
	traffic   rings       // the owner's request rings (traffic.go)
	starts    starts
	conns     connCounts
	// seen is the run (runKey) each sandbox id was last proxied to, for
	// forgetStale.
	seen sync.Map
	m    metrics
	ib   inboxState

	draining   atomic.Bool
	drainOnce  sync.Once
	drainUntil time.Time // the end of the drain delay, set once

	mu       sync.Mutex
	hijacked map[io.Closer]struct{}
	done     chan struct{} // closed by Close
	closer   sync.Once
}

// New checks the options and builds the edge; it starts nothing.
func New(o Options) (*Server, error) {
	var errs []error
	if o.Routes == nil {
		errs = append(errs, errors.New("edge: a route table is required"))
	}
	if o.Sandboxes == nil {
		errs = append(errs, errors.New("edge: a sandbox store is required (auto-start writes to it)"))
	}
	if o.Dialer == nil {
		errs = append(errs, errors.New("edge: a dialer is required"))
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
	if o.BodyIdleTimeout == 0 {
		o.BodyIdleTimeout = 30 * time.Second
	}
	if o.MinBodyRate == 0 {
		o.MinBodyRate = 1024
	}
	if o.MaxConnsPerIP == 0 {
		o.MaxConnsPerIP = 512
	}
	if o.HoldTimeout == 0 {
		o.HoldTimeout = wake.URLTimeout
	}
	if o.ReadHeaderTimeout == 0 {
		o.ReadHeaderTimeout = 10 * time.Second
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = 2 * time.Minute
	}
	if o.DrainTimeout == 0 {
		o.DrainTimeout = 30 * time.Second
	}
	if o.UpstreamIdle == 0 {
		o.UpstreamIdle = 30 * time.Second
	}
	s := &Server{o: o, domain: o.Routes.Domain(), m: newMetrics(o.Registerer), hijacked: map[io.Closer]struct{}{}, done: make(chan struct{})}
	var err error
	if s.starts, err = newStarts(&o); err != nil {
		return nil, err
	}
	s.ib = newInboxState()
	if o.HTTP3 {
		s.altSvc = altSvc(o.HTTPSPort)
	}
	s.proxy = s.newReverseProxy()
	s.upstreams.s = s
	registerTraffic(o.Registerer, &s.traffic)
	switch {
	case o.RateLimit == 0:
		s.limit = newLimiter(200, 2000)
	case o.RateLimit > 0:
		s.limit = newLimiter(o.RateLimit, max(o.RateBurst, int(o.RateLimit)))
	}
	return s, nil
}

// Draining reports whether the edge is shutting down: its Serve contexts
// have ended (SIGTERM), and it is finishing what is in flight. Readiness
// is false from then on.
func (s *Server) Draining() bool { return s.draining.Load() }

// drain marks the edge draining and waits out the drain delay, counted
// from the first call (each server's Serve calls it); Close cuts it short.
func (s *Server) drain() {
	s.drainOnce.Do(func() {
		s.draining.Store(true)
		s.drainUntil = time.Now().Add(s.o.DrainDelay)
		s.o.Logger.Info("edge draining", slog.Duration("delay", s.o.DrainDelay), slog.Duration("timeout", s.o.DrainTimeout))
	})
	if d := time.Until(s.drainUntil); d > 0 {
		select {
		case <-time.After(d):
		case <-s.done:
		}
	}
}

// Close ends every Serve call and every connection they hold, websockets
// included. It may be called more than once.
func (s *Server) Close() error {
	s.closer.Do(func() { close(s.done) })
	s.closeHijacked()
	s.upstreams.close()
	return nil
}
