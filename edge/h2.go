package edge

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"strconv"
	"sync"
	"time"
)

// The HTTP/2 adapter: net/http's server and its ReverseProxy behind an
// exchange (pipeline.go). HTTP/3 (h3.go) comes through it too: quic-go's
// server gives net/http's request and answer types.

// discardLog takes the log lines of net/http's servers and proxy: they
// quote bytes of the exchange (a client's bad preface, an app's bad
// answer), which may hold a token.
var discardLog = log.New(io.Discard, "", 0)

// ServeHTTP serves one request that came over HTTP/2 or HTTP/3 (or any
// net/http server) through the pipeline. An answer over TCP says where
// HTTP/3 is, when the edge serves it (Options.HTTP3).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	proto := r.Proto
	switch {
	case r.ProtoMajor == 3:
		proto = "HTTP/3.0" // an extended CONNECT's Proto is its :protocol
	case s.altSvc != "":
		w.Header().Set("Alt-Svc", s.altSvc)
	}
	x := &h2Exchange{s: s, w: w, r: r}
	defer x.end()
	s.serve(x, &x.f, proto)
}

// h2Exchange is one net/http request as the pipeline sees it.
type h2Exchange struct {
	s *Server
	w http.ResponseWriter
	r *http.Request
	f flow // one allocation for the exchange and its flow

	// ended: the handler has returned, and net/http has freed the
	// stream. The proxy's writer of the request body, a goroutine that
	// can outlive the handler (net/http's ReverseProxy says so), sets
	// the stream's read deadline as it reads: set after the return, it
	// was a nil dereference in net/http that ended the process.
	mu    sync.Mutex
	ended bool
}

// end marks the handler's return: no read deadline is set after it.
func (x *h2Exchange) end() {
	x.mu.Lock()
	x.ended = true
	x.mu.Unlock()
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
	// HTTP/2 and HTTP/3 have no upgrades (their servers refuse a
	// Connection header), and their extended CONNECT (websockets over
	// HTTP/2 or HTTP/3) is refused as any CONNECT is.
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
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.ended {
		return errExchangeEnded
	}
	return http.NewResponseController(x.w).SetReadDeadline(t)
}

// errExchangeEnded: the request's handler has returned.
var errExchangeEnded = errors.New("the exchange has ended")

// watch: the request's context ends when its client goes.
func (x *h2Exchange) watch() (context.Context, func()) { return x.r.Context(), func() {} }

// frame: the answer's head is rewritten as it is written.
func (x *h2Exchange) frame(csp string) { x.w = &reframer{ResponseWriter: x.w, csp: csp} }

func (x *h2Exchange) respond(status int, body []byte) {
	x.w.WriteHeader(status)
	x.w.Write(body)
}

// The reverse proxy: net/http's, whose transport is the pool
// (poolTransport).

type ctxKey struct{}

// h2Request is what the reverse proxy's hooks need of one request.
type h2Request struct {
	d   *decision
	rec *record
	err error // the round trip's failure, for the pipeline to answer
}

// forwardedHeaders are the edge's own, set by the pipeline; the reverse
// proxy takes them off the outgoing request before Rewrite.
var forwardedHeaders = []string{"X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host"}

func (s *Server) newReverseProxy() *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			d := pr.In.Context().Value(ctxKey{}).(*h2Request).d
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = d.rt.SandboxID + ":" + strconv.Itoa(d.port)
			pr.Out.Host = pr.In.Host
			for _, h := range forwardedHeaders {
				pr.Out.Header[h] = pr.In.Header[h]
			}
		},
		Transport:      (*poolTransport)(s),
		BufferPool:     copyBuffers{},
		FlushInterval:  -1, // server-sent events and streams go out as they come
		ModifyResponse: dropEdgeHeaders,
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

// copyBuffers lends the reverse proxy the buffers it copies bodies
// through (32 KiB, upCopies'), which it would otherwise allocate for
// every request it proxies.
type copyBuffers struct{}

func (copyBuffers) Get() []byte  { return *upCopies.Get().(*[]byte) }
func (copyBuffers) Put(b []byte) { upCopies.Put(&b) }

// forwardH2 passes a net/http request through the reverse proxy.
func (s *Server) forwardH2(w http.ResponseWriter, r *http.Request, d *decision, in *countingReader, rec *record) (bool, error) {
	if in.r != nil {
		r.Body = struct {
			io.Reader
			io.Closer
		}{in, r.Body}
	}
	rq := &h2Request{d: d, rec: rec}
	s.proxy.ServeHTTP(&recorder{ResponseWriter: w, x: rec}, r.WithContext(context.WithValue(r.Context(), ctxKey{}, rq)))
	return false, rq.err
}

// recorder notes the status and size for the access log.
type recorder struct {
	http.ResponseWriter
	x *record
}

func (w *recorder) WriteHeader(code int) {
	if code >= 200 {
		w.x.status = code
		w.x.answerH2(w.Header())
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *recorder) Write(b []byte) (int, error) {
	w.x.bw.take(len(b))
	n, err := w.ResponseWriter.Write(b)
	w.x.bytesOut.Add(int64(n))
	w.x.responseTap().write(b[:n])
	return n, err
}

func (w *recorder) Flush() { http.NewResponseController(w.ResponseWriter).Flush() }
