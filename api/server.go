package api

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"froog.tech/froog/internal/requestid"
	"froog.tech/froog/sandboxio"
	"froog.tech/froog/store"
)

// Options configure a Server. Zero values are documented per field.
type Options struct {
	Store store.Store // required
	// Domain is the public-URL domain, e.g. froogusercontent.com. Required.
	Domain string
	// PublicPort is the edge's HTTPS port as visitors reach it; 0 or 443
	// leaves it out of links.
	PublicPort int
	// SecretKey (32 bytes) encrypts URL tokens in the store. Required.
	SecretKey []byte
	// Sessions runs commands in sandboxes; nil answers 503 to exec, wait
	// and jobs.
	Sessions Sessions
	// Waker starts stopped sandboxes that have auto_start and waits for
	// them and their ports (package wake); nil answers 503 to a call that
	// must wait (exec, jobs and files of a stopped sandbox, wait).
	Waker Waker
	// Traffic is the edges' request rings (URLs' recent exchanges,
	// capture, replay): the edge of this process, or every edge's over
	// its internal listener; nil answers 501 traffic_unavailable to the
	// requests routes (traffic.go).
	Traffic Traffic
	// Logger gets the access log; nil discards it.
	Logger *slog.Logger
	// RateLimit is requests per IP per RateWindow; 0 means 10,000 per 60 s.
	RateLimit  int
	RateWindow time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// APIURL is this API's address as clients reach it, for signed file
	// links (https://api.example.com); empty takes the request's host.
	APIURL string
	// MaxFileBytes bounds a file sent or received whole (files/content,
	// archives, links); 0 means the docs' 100 MiB.
	MaxFileBytes int64
	// Webhooks configure the webhook sender (webhooks_send.go).
	Webhooks WebhookOptions
}

// WebhookOptions configure the webhook sender. The zero value is
// production's: public HTTPS endpoints, the system's roots and resolver.
type WebhookOptions struct {
	// RootCAs verify endpoints' certificates; nil: the system's.
	RootCAs *x509.CertPool
	// Lookup resolves endpoints' names; nil: the system's resolver.
	Lookup func(ctx context.Context, host string) ([]netip.Addr, error)
	// AllowPrivateTargets is for tests alone: it lets endpoints be on
	// loopback and private addresses, which the SSRF rule refuses. froogd
	// sets it only in test builds (the froogtest tag).
	AllowPrivateTargets bool
}

// Server serves /v1.
type Server struct {
	store   store.Store
	domain  string
	port    int
	sealer  *sealer
	log     *slog.Logger
	limiter *ipLimiter
	clock   func() time.Time
	mux     *http.ServeMux

	// commands, jobs and fileSessions are sandboxio's (nil without
	// Sessions).
	commands     Commands
	jobs         Jobs
	fileSessions FileSessions
	waker        Waker
	traffic      Traffic
	slots        slots
	fileSlots    waitSlots
	apiURL       string
	maxFile      int64
	uses         keyUses // API keys' requests, written in batches (apikeys.go)

	allowPrivateHooks bool
	hookClient        *http.Client
}

// New checks the options and builds the handler; it starts nothing.
func New(o Options) (*Server, error) {
	var errs []error
	if o.Store == nil {
		errs = append(errs, errors.New("api: a store is required"))
	}
	if o.Domain == "" {
		errs = append(errs, errors.New("api: a public-URL domain is required"))
	}
	sl, err := newSealer(o.SecretKey)
	if err != nil {
		errs = append(errs, fmt.Errorf("api: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.RateLimit == 0 {
		o.RateLimit = 10000
	}
	if o.RateWindow == 0 {
		o.RateWindow = 60 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxFileBytes == 0 {
		o.MaxFileBytes = maxFileBytes
	}
	s := &Server{
		store:   o.Store,
		domain:  strings.ToLower(strings.TrimSuffix(o.Domain, ".")),
		port:    o.PublicPort,
		sealer:  sl,
		log:     o.Logger,
		limiter: newIPLimiter(o.RateLimit, o.RateWindow),
		clock:   o.Now,
		mux:     http.NewServeMux(),

		waker:   o.Waker,
		traffic: o.Traffic,
		apiURL:  strings.TrimSuffix(o.APIURL, "/"),
		maxFile: o.MaxFileBytes,

		allowPrivateHooks: o.Webhooks.AllowPrivateTargets,
		hookClient:        newWebhookClient(newWebhookDialer(o.Webhooks.AllowPrivateTargets, o.Webhooks.Lookup), o.Webhooks.RootCAs),
	}
	if o.Sessions != nil {
		sh := sandboxio.New(o.Sessions)
		s.commands, s.jobs, s.fileSessions = sh, sh, shellFiles{sh}
	}
	methods := map[string][]string{} // pattern → its methods
	for _, rt := range routes {
		s.mux.Handle(rt.Method+" "+rt.Pattern, s.endpoint(rt))
		methods[rt.Pattern] = append(methods[rt.Pattern], rt.Method)
	}
	for p, ms := range methods {
		slices.Sort(ms)
		allow := strings.Join(ms, ", ")
		// A 405 says which methods the path has (RFC 9110, 15.5.6).
		s.mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			writeError(w, r, errorf(http.StatusMethodNotAllowed, "method_not_allowed", "%s is not allowed here: %s", r.Method, allow))
		})
	}
	// Operational endpoints, outside /v1 and the OpenAPI document.
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	s.mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if _, err := s.store.Head(r.Context()); err != nil {
			writeError(w, r, errorf(http.StatusServiceUnavailable, "store_unavailable", "the store does not answer"))
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, r, errorf(http.StatusNotFound, "not_found", "no such endpoint"))
	})
	return s, nil
}

// now is the server's clock, to the microsecond the store keeps.
func (s *Server) now() time.Time { return store.Micro(s.clock()) }

// ServeHTTP adds the request id and rate limit to every request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	id := requestid.New()
	r = r.WithContext(context.WithValue(r.Context(), reqIDCtx, id))
	w.Header().Set("X-Request-Id", id)
	rec := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	if r.Body != nil && r.Body != http.NoBody {
		rec.body = &bodyWatch{ReadCloser: r.Body}
		r.Body = rec.body
	}
	if e := s.limiter.take(clientIP(r), s.clock(), w.Header()); e != nil {
		writeError(rec, r, e)
	} else {
		s.mux.ServeHTTP(rec, r)
	}
	// The path names sandboxes but holds no secret; the query is left out.
	s.log.LogAttrs(r.Context(), slog.LevelInfo, "request",
		slog.String("request_id", id), slog.String("method", r.Method), slog.String("path", r.URL.Path),
		slog.Int("status", rec.status), slog.String("ip", clientIP(r)), slog.Duration("duration", time.Since(start)))
}

type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
	body   *bodyWatch // nil without a body
}

// WriteHeader closes the connection after an answer given before the
// request body was read to its end: a request refused before its body
// (no key, a limit, an unknown route) costs the server nothing more.
// Without it, net/http reads up to 256 KiB of the body (and waits for a
// slow one) before sending the answer, to keep the connection.
func (w *statusWriter) WriteHeader(code int) {
	if w.wrote {
		return
	}
	w.wrote, w.status = true, code
	if w.body != nil && !w.body.eof.Load() {
		w.Header().Set("Connection", "close")
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.ResponseWriter.Write(b)
}

// bodyWatch notes that a request body was read to its end.
type bodyWatch struct {
	io.ReadCloser
	eof atomic.Bool
}

func (b *bodyWatch) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.eof.Store(true)
	}
	return n, err
}

// Unwrap lets http.ResponseController reach Flush (streamed exec).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// endpoint wraps a route: authentication, its action, and error rendering.
func (s *Server) endpoint(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := func() error {
			if rt.Public {
				return rt.handle(s, w, r)
			}
			k, err := s.authenticate(r)
			if err != nil {
				return err
			}
			if rt.Action != "" {
				if err := requireAction(k, rt.Action); err != nil {
					return err
				}
			}
			r = r.WithContext(context.WithValue(r.Context(), keyCtx, k))
			return rt.handle(s, w, r)
		}()
		if err != nil {
			e := toError(err, s.clock())
			if e.Status >= 500 {
				s.log.LogAttrs(r.Context(), slog.LevelError, "request failed",
					slog.String("request_id", requestID(r)), slog.String("error", err.Error()))
			}
			writeError(w, r, e)
		}
	})
}

func requestID(r *http.Request) string {
	id, _ := r.Context().Value(reqIDCtx).(string)
	return id
}

func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// audit starts an audit event for the request's key.
func (s *Server) audit(r *http.Request, action, target string, detail map[string]string) *store.AuditEvent {
	k := keyFrom(r.Context())
	return &store.AuditEvent{
		AccountID: k.AccountID, At: s.now(), Action: action, Target: target,
		Actor: k.ID, ActorLabel: k.Name, IP: clientIP(r), RequestID: requestID(r), Detail: detail,
	}
}
