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
)

// The HTTP/2 adapter: net/http's server and its ReverseProxy behind an
// exchange (pipeline.go).

type ctxKey struct{}

// h2Request is what the reverse proxy's hooks need of one request.
type h2Request struct {
	d   *decision
	err error // the round trip's failure, for the pipeline to answer
}

// discardLog takes the log lines of net/http's servers and proxy: they
// quote bytes of the exchange (a client's bad preface, an app's bad
// answer), which may hold a token.
var discardLog = log.New(io.Discard, "", 0)

// forwardedHeaders are the edge's own, set by the pipeline; the reverse
// proxy takes them off the outgoing request before Rewrite.
var forwardedHeaders = []string{"X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host"}

func (s *Server) newReverseProxy() *httputil.ReverseProxy {
	s.h2up.s = s
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			d := pr.In.Context().Value(ctxKey{}).(*h2Request).d
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = d.rt.SandboxID + ":" + strconv.Itoa(d.rt.Port)
			pr.Out.Host = pr.In.Host
			for _, h := range forwardedHeaders {
				pr.Out.Header[h] = pr.In.Header[h]
			}
		},
		Transport:     &s.h2up,
		FlushInterval: -1, // server-sent events and streams go out as they come
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				w.WriteHeader(499) // the client went away; nobody reads this
				return
			}
			r.Context().Value(ctxKey{}).(*h2Request).err = err
		},
		ErrorLog: discardLog, // errors go to the pipeline; the log's would quote the exchange
	}
}

// ServeHTTP serves one request that came over HTTP/2 (or any net/http
// server) through the pipeline.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	x := &h2Exchange{s: s, w: w, r: r}
	s.serve(x, &x.f, r.Proto)
}

// h2Exchange is one net/http request as the pipeline sees it.
type h2Exchange struct {
	s *Server
	w http.ResponseWriter
	r *http.Request
	f flow // one allocation for the exchange and its flow
}

func (x *h2Exchange) head(c *call, hp *hops) bool {
	r := x.r
	*c = call{host: r.Host, method: r.Method, path: r.URL.EscapedPath(), query: r.URL.RawQuery, tokenCookies: c.tokenCookies,
		body: r.ContentLength != 0, // -1: the stream stays open, length unknown
	}
	if r.URL.Path == "*" || r.RequestURI == "*" {
		c.path = "*"
	}
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		c.ip = ap.Addr()
	}
	var sc headScan
	for k, vs := range r.Header {
		for _, v := range vs {
			sc.field(c, hp, k, v)
		}
	}
	ok := sc.done(c, hp)
	// HTTP/2 has no upgrades (its server refuses Connection and Upgrade
	// headers), and its extended CONNECT is refused as a CONNECT.
	c.upgrade = false
	return ok
}

func (x *h2Exchange) headers(into []field) []field {
	for k, vs := range x.r.Header {
		for _, v := range vs {
			into = append(into, field{k, v})
		}
	}
	return into
}

// replace: the names are the header map's keys, as headers gave them.
func (x *h2Exchange) replace(name string, values []string) {
	if len(values) == 0 {
		delete(x.r.Header, name)
	} else {
		x.r.Header[name] = values
	}
}

func (x *h2Exchange) set(name, value string)     { x.r.Header.Set(name, value) }
func (x *h2Exchange) setQuery(q string)          { x.r.URL.RawQuery = q }
func (x *h2Exchange) setResponse(name, v string) { x.w.Header().Set(name, v) }
func (x *h2Exchange) bodyLen() int64             { return x.r.ContentLength }
func (x *h2Exchange) drain(*Server, bool)        {} // net/http reads or resets the stream

func (x *h2Exchange) body() io.Reader {
	if x.r.Body == nil || x.r.Body == http.NoBody {
		return nil
	}
	return x.r.Body
}

func (x *h2Exchange) setBody(b []byte) {
	x.r.Body, x.r.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
}

func (x *h2Exchange) setReadDeadline(t time.Time) error {
	return http.NewResponseController(x.w).SetReadDeadline(t)
}

// watch: the request's context ends when its client goes.
func (x *h2Exchange) watch() (context.Context, func()) { return x.r.Context(), func() {} }

func (x *h2Exchange) respond(status int, body []byte) {
	x.w.WriteHeader(status)
	x.w.Write(body)
}

func (x *h2Exchange) forward(d *decision, in *countingReader, rec *record) (bool, error) {
	r := x.r
	if in.r != nil {
		r.Body = struct {
			io.Reader
			io.Closer
		}{in, r.Body}
	}
	rq := &h2Request{d: d}
	x.s.proxy.ServeHTTP(&recorder{ResponseWriter: x.w, x: rec}, r.WithContext(context.WithValue(r.Context(), ctxKey{}, rq)))
	return false, rq.err
}

func (x *h2Exchange) upgrade(*decision, *record) {} // HTTP/2 has none (head)

// recorder notes the status and size for the access log.
type recorder struct {
	http.ResponseWriter
	x *record
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

// writeProblem answers r with p over net/http, outside the pipeline (the
// HTTP listener's redirects).
func writeProblem(w http.ResponseWriter, r *http.Request, p problem, requestID string) {
	html := wantsHTML(r.Header.Get("Sec-Fetch-Mode"), r.Header.Get("Accept"))
	p.headers(html, w.Header().Set)
	w.WriteHeader(p.status)
	w.Write(p.body(html, requestID))
}
