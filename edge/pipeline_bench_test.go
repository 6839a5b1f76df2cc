//go:build bench

package edge

import (
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/valyala/fasthttp"
)

// benchHeaders is a browser's request to a private URL with its token
// cookie, as the hot path sees it.
var benchHeaders = [][2]string{
	{"User-Agent", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36"},
	{"Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"},
	{"Accept-Language", "en-US,en;q=0.9"},
	{"Accept-Encoding", "gzip, deflate, br"},
	{"Referer", "https://app.froog.test/list?page=2"},
	{"Cookie", "theme=dark; __Host-froog_url=" + benchToken + "; sid=abc"},
	{"Sec-Fetch-Mode", "navigate"},
	{"X-Forwarded-For", "6.6.6.6"},
	{"Connection", "keep-alive"},
}

// BenchmarkX is the hot path of one request to a private URL with its
// token cookie: decide alone, and the whole pipeline (decide, strip,
// header rewrite, proxy through an in-memory app, answer) for each
// protocol.
func BenchmarkX(b *testing.B) {
	s, _, _ := newFakeEdge(b, okApp)
	b.Run("decide", func(b *testing.B) {
		b.ReportAllocs()
		c := &call{host: "app.froog.test", method: "GET", path: "/list", query: "page=3", tokenCookies: []string{benchToken}, html: true}
		for b.Loop() {
			if d := s.decide(c); d.rt == nil || d.problem != nil {
				b.Fatal("refused")
			}
		}
	})
	b.Run("h1", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var ctx fasthttp.RequestCtx
			ctx.Init2(benchConn{}, discardLogger{}, false)
			ctx.Request.Header.DisableNormalizing()
			ctx.Request.Header.SetMethod("GET")
			ctx.Request.SetRequestURI("/list?page=3")
			ctx.Request.Header.SetHost("app.froog.test")
			for _, h := range benchHeaders {
				ctx.Request.Header.Set(h[0], h[1])
			}
			s.serveH1(&ctx)
			if ctx.Response.StatusCode() != 200 {
				b.Fatalf("status %d", ctx.Response.StatusCode())
			}
			ctx.Response.BodyWriteTo(io.Discard)
			ctx.Response.CloseBodyStream()
		}
	})
	b.Run("h2", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			r := httptest.NewRequest("GET", "https://app.froog.test/list?page=3", nil)
			r.Proto, r.ProtoMajor, r.ProtoMinor = "HTTP/2.0", 2, 0
			r.TLS = &tls.ConnectionState{ServerName: "app.froog.test"}
			for _, h := range benchHeaders[:8] {
				r.Header.Set(h[0], h[1])
			}
			w := httptest.NewRecorder()
			s.ServeHTTP(w, r)
			if w.Code != http.StatusOK {
				b.Fatalf("status %d", w.Code)
			}
		}
	})
}
