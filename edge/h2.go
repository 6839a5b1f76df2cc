package edge

import (
	"bytes"
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"froog.tech/froog/edge/route"
	"froog.tech/froog/internal/requestid"
)

// The HTTP/2 front end: net/http's server and its ReverseProxy, around
// the same core as HTTP/1.1.

type ctxKey struct{}

// h2Request is what the reverse proxy's hooks need of one request.
type h2Request struct {
	d  *decision
	in countingReader // the request body, as read from the client
}

// discardLog takes the log lines of net/http's servers and proxy: they
// quote bytes of the exchange (a client's bad preface, an app's bad
// answer), which may hold a token.
var discardLog = log.New(io.Discard, "", 0)

func (s *Server) newReverseProxy() *httputil.ReverseProxy {
	s.h2up.s = s
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			d := pr.In.Context().Value(ctxKey{}).(*h2Request).d
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = d.rt.SandboxID + ":" + strconv.Itoa(d.rt.Port)
			pr.Out.Host = pr.In.Host
			pr.SetXForwarded() // replaces whatever X-Forwarded-* the client sent
			pr.Out.Header.Set("X-Forwarded-Proto", "https")
			pr.Out.Header.Set("X-Forwarded-Host", d.host)
		},
		Transport:     &s.h2up,
		FlushInterval: -1, // server-sent events and streams go out as they come
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				w.WriteHeader(499) // the client went away; nobody reads this
				return
			}
			rq := r.Context().Value(ctxKey{}).(*h2Request)
			p := s.proxyProblem(rq.d.rt, w.Header().Get("X-Request-Id"), err, &rq.in)
			writeProblem(w, r, p, w.Header().Get("X-Request-Id"))
		},
		ErrorLog: discardLog, // errors go through ErrorHandler; the log's would quote the exchange
	}
}

// ServeHTTP serves one request that came over HTTP/2 (or any net/http
// server): the core decides, then the reverse proxy.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.serveView(w, r) {
		return
	}
	x := &exchange{id: requestid.New(), start: time.Now(), host: r.Host, method: r.Method, path: r.URL.Path, proto: r.Proto, status: http.StatusOK}
	rec := &recorder{ResponseWriter: w, x: x}
	defer s.finish(x)
	// HTTP/2 has no upgrades (its server refuses Connection and Upgrade
	// headers), and its extended CONNECT is refused as a CONNECT.
	c := &call{host: r.Host, method: r.Method, path: r.URL.EscapedPath(), query: r.URL.RawQuery,
		tokenHeader:   trimOWS(r.Header.Get(tokenHeader)),
		requestMethod: r.Header.Get("Access-Control-Request-Method"),
		body:          r.ContentLength != 0, // -1: the stream stays open, length unknown
		html:          wantsHTML(r.Header.Get("Sec-Fetch-Mode"), r.Header.Get("Accept")),
	}
	if r.URL.Path == "*" || r.RequestURI == "*" {
		c.path = "*"
	}
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		c.ip = ap.Addr()
	}
	cookies := r.Header.Values("Cookie")
	for _, v := range cookies {
		c.tokenCookies = tokenCookies(v, c.tokenCookies)
	}
	w.Header().Set("X-Request-Id", x.id)
	d := s.decide(c)
	switch {
	case d.problem != nil:
		writeProblem(rec, r, *d.problem, x.id)
		return
	case d.location != "":
		d.redirect(rec.Header().Set)
		rec.WriteHeader(http.StatusFound)
		return
	}
	r.URL.RawQuery = stripQuery(r.URL.RawQuery)
	var hp hops
	for name, vs := range r.Header {
		if hp.drop(name) {
			delete(r.Header, name)
			continue
		}
		if name == "Cookie" {
			continue
		}
		kept := vs[:0]
		for _, v := range vs {
			if nv, keep := forwardValue(name, v, d.token); keep {
				kept = append(kept, nv)
			}
		}
		if len(kept) == 0 {
			delete(r.Header, name)
		} else {
			r.Header[name] = kept
		}
	}
	var kept []string
	changed := false
	for _, v := range cookies {
		rest, ch := stripTokenCookie(v, d.token)
		changed = changed || ch
		if rest != "" {
			kept = append(kept, rest)
		}
	}
	if changed {
		r.Header.Del("Cookie")
		for _, v := range kept {
			r.Header.Add("Cookie", v)
		}
	}
	r.Header.Set("X-Request-Id", x.id)
	if sb, held := s.needsHold(d.rt); held {
		if p := s.holdH2(r, http.NewResponseController(w), &d, sb, c.body, x.id); p != nil {
			writeProblem(rec, r, *p, x.id)
			return
		}
	}
	s.forgetStale(d.rt.SandboxID)
	rq := &h2Request{d: &d, in: countingReader{r: r.Body, n: &x.bytesIn}}
	s.paced(&rq.in, http.NewResponseController(w).SetReadDeadline)
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = struct {
			io.Reader
			io.Closer
		}{&rq.in, r.Body}
	}
	s.proxy.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), ctxKey{}, rq)))
}

// holdH2 holds a request while its sandbox starts (hold.go), with its
// body in memory; the hold ends when the client goes.
func (s *Server) holdH2(r *http.Request, rc *http.ResponseController, d *decision, sb *route.Sandbox, body bool, requestID string) *problem {
	if body {
		if r.ContentLength > maxHeldBody {
			return s.tooLargeToHold(d.rt, sb, d.wake, requestID)
		}
		var n int64
		in := countingReader{r: r.Body, n: &n}
		s.paced(&in, rc.SetReadDeadline)
		buf, err := io.ReadAll(io.LimitReader(&in, maxHeldBody+1))
		if err != nil {
			p := s.proxyProblem(d.rt, requestID, err, &in)
			return &p
		}
		if len(buf) > maxHeldBody {
			return s.tooLargeToHold(d.rt, sb, d.wake, requestID)
		}
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(buf)), int64(len(buf))
	}
	return s.hold(r.Context(), d.rt, sb, d.wake, requestID)
}

// writeProblem answers r with p over net/http.
func writeProblem(w http.ResponseWriter, r *http.Request, p problem, requestID string) {
	html := wantsHTML(r.Header.Get("Sec-Fetch-Mode"), r.Header.Get("Accept"))
	p.headers(html, w.Header().Set)
	w.WriteHeader(p.status)
	w.Write(p.body(html, requestID))
}

// recorder notes the status and size for the access log.
type recorder struct {
	http.ResponseWriter
	x *exchange
}

func (w *recorder) WriteHeader(code int) {
	if code >= 200 {
		w.x.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *recorder) Write(b []byte) (int, error) {
	n, err := w.ResponseWriter.Write(b)
	w.x.bytesOut += int64(n)
	return n, err
}

func (w *recorder) Flush() { http.NewResponseController(w.ResponseWriter).Flush() }

// h2Upstreams is HTTP/2's upstream pool: one http.Transport per sandbox,
// so that one sandbox's new run drops its own pooled connections and
// nobody else's (net/http's pool cannot be emptied by host). The "host"
// of an upstream request is SANDBOX:PORT; the tunnel reaches
// 127.0.0.1:PORT inside that sandbox. Connections are pooled per sandbox
// and port.
type h2Upstreams struct {
	s  *Server
	mu sync.RWMutex
	m  map[string]*http.Transport
}

func (p *h2Upstreams) RoundTrip(r *http.Request) (*http.Response, error) {
	id, _, _ := strings.Cut(r.URL.Host, ":")
	return p.transport(id).RoundTrip(r)
}

func (p *h2Upstreams) transport(sandboxID string) *http.Transport {
	p.mu.RLock()
	t := p.m[sandboxID]
	p.mu.RUnlock()
	if t != nil {
		return t
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if t = p.m[sandboxID]; t == nil {
		t = &http.Transport{
			DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
				_, port, err := net.SplitHostPort(addr)
				if err != nil {
					return nil, err
				}
				n, err := strconv.Atoi(port)
				if err != nil {
					return nil, err
				}
				return p.s.dial(ctx, sandboxID, n)
			},
			MaxIdleConnsPerHost:    64,
			IdleConnTimeout:        upstreamIdle,
			MaxResponseHeaderBytes: 64 << 10,
			DisableCompression:     true,
		}
		if p.m == nil {
			p.m = map[string]*http.Transport{}
		}
		p.m[sandboxID] = t
	}
	return t
}

// closeIdle closes the idle connections to one sandbox.
func (p *h2Upstreams) closeIdle(sandboxID string) {
	p.mu.RLock()
	t := p.m[sandboxID]
	p.mu.RUnlock()
	if t != nil {
		t.CloseIdleConnections()
	}
}

// prune forgets the pools of sandboxes keep does not keep.
func (p *h2Upstreams) prune(keep func(sandboxID string) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, t := range p.m {
		if !keep(id) {
			t.CloseIdleConnections()
			delete(p.m, id)
		}
	}
}
