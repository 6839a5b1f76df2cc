package edge

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"froog.tech/froog/tunnel"
)

// The HTTP/2 front end: net/http's server and its ReverseProxy, around
// the same core as HTTP/1.1.

type ctxKey struct{}

func (s *Server) newReverseProxy() *httputil.ReverseProxy {
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
			return s.o.Dialer.DialContext(ctx, id, p)
		},
		MaxIdleConnsPerHost:    64,
		IdleConnTimeout:        90 * time.Second,
		MaxResponseHeaderBytes: 64 << 10,
		DisableCompression:     true,
	}
	return &httputil.ReverseProxy{
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
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				w.WriteHeader(499) // the client went away; nobody reads this
				return
			}
			p := s.proxyProblem(r.Context().Value(ctxKey{}).(*route), w.Header().Get("X-Request-Id"), err)
			writeProblem(w, r, p, w.Header().Get("X-Request-Id"))
		},
		ErrorLog: slog.NewLogLogger(s.o.Logger.Handler(), slog.LevelWarn),
	}
}

// ServeHTTP serves one request that came over HTTP/2 (or any net/http
// server): the core decides, then the reverse proxy.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	x := &exchange{id: newRequestID(), start: time.Now(), host: r.Host, method: r.Method, path: r.URL.Path, proto: r.Proto, status: http.StatusOK}
	rec := &recorder{ResponseWriter: w, x: x}
	defer s.finish(x)
	c := &call{host: r.Host, method: r.Method, path: r.URL.EscapedPath(), query: r.URL.RawQuery,
		tokenHeader: r.Header.Get(tokenHeader),
		upgrade:     hasToken(strings.Join(r.Header.Values("Connection"), ","), "upgrade") && r.Header.Get("Upgrade") != "",
		preflight:   isPreflight(r.Method, r.Header.Get("Access-Control-Request-Method")),
		html:        wantsHTML(r.Header.Get("Sec-Fetch-Mode"), r.Header.Get("Accept")),
	}
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		c.ip = ap.Addr()
	}
	for _, ck := range r.Cookies() {
		if ck.Name == tokenCookie {
			c.tokenCookies = append(c.tokenCookies, ck.Value)
		}
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
	for name := range r.Header {
		if name != "Connection" && name != "Upgrade" && isHop(name, "", false) {
			r.Header.Del(name) // ReverseProxy drops the hop-by-hop ones itself
		}
	}
	stripCookie(r.Header)
	r.Header.Set("X-Request-Id", x.id)
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = struct {
			io.Reader
			io.Closer
		}{&countingReader{r: r.Body, n: &x.bytesIn}, r.Body}
	}
	s.proxy.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), ctxKey{}, d.rt)))
}

// writeProblem answers r with p over net/http.
func writeProblem(w http.ResponseWriter, r *http.Request, p problem, requestID string) {
	html := wantsHTML(r.Header.Get("Sec-Fetch-Mode"), r.Header.Get("Accept"))
	p.headers(html, w.Header().Set)
	w.WriteHeader(p.status)
	w.Write(p.body(html, requestID))
}

// stripCookie removes the token cookie from Cookie headers, keeping the
// others as sent.
func stripCookie(h http.Header) {
	vals := h.Values("Cookie")
	if len(vals) == 0 {
		return
	}
	var out []string
	for _, v := range vals {
		var kept []string
		for _, c := range strings.Split(v, ";") {
			if name, _, _ := strings.Cut(strings.TrimSpace(c), "="); name != tokenCookie {
				kept = append(kept, strings.TrimSpace(c))
			}
		}
		if len(kept) > 0 {
			out = append(out, strings.Join(kept, "; "))
		}
	}
	h.Del("Cookie")
	for _, v := range out {
		h.Add("Cookie", v)
	}
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

// proxyProblem maps a failure to reach the sandbox to the page to show.
func (s *Server) proxyProblem(rt *route, requestID string, err error) problem {
	switch {
	case errors.Is(err, tunnel.ErrNotRunning):
		return errStopped
	case errors.Is(err, tunnel.ErrPortClosed): // expected while the app starts: no log line
		return errBadGateway(rt.port)
	}
	s.o.Logger.Warn("proxy", slog.String("request_id", requestID), slog.String("sandbox", rt.sandboxID), slog.String("error", err.Error()))
	return errBadGateway(rt.port)
}
