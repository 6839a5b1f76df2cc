package edge

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"froog.tech/froog/edge/route"
	"froog.tech/froog/store"
)

// fakeExchange is a request as the pipeline sees it, with no protocol
// under it: what reaches the sandbox is what forward is given.
type fakeExchange struct {
	method, host, target string
	hdr                  []field
	reqBody              string

	status   int
	resp     http.Header
	respBody []byte
	sent     string // what reached the sandbox: its target and headers, one a line, lowercase
	upgraded bool
	drained  bool
}

func (x *fakeExchange) head(c *call, hp *hops) bool {
	path, query, _ := strings.Cut(x.target, "?")
	*c = call{host: x.host, method: x.method, path: path, query: query, tokenCookies: c.tokenCookies, body: x.reqBody != ""}
	c.ip = mustAddr("192.0.2.1")
	var sc headScan
	for _, f := range x.hdr {
		sc.field(c, hp, f.name, f.value)
	}
	return sc.done(c, hp)
}

func (x *fakeExchange) headers(into []field) []field { return append(into, x.hdr...) }

func (x *fakeExchange) replace(name string, values []string) {
	kept := x.hdr[:0:0]
	for _, f := range x.hdr {
		if f.name != name {
			kept = append(kept, f)
		}
	}
	for _, v := range values {
		kept = append(kept, field{name, v})
	}
	x.hdr = kept
}

func (x *fakeExchange) set(name, value string) {
	kept := x.hdr[:0:0]
	for _, f := range x.hdr {
		if !strings.EqualFold(f.name, name) {
			kept = append(kept, f)
		}
	}
	x.hdr = append(kept, field{name, value})
}

func (x *fakeExchange) setQuery(q string) {
	path, _, _ := strings.Cut(x.target, "?")
	if x.target = path; q != "" {
		x.target += "?" + q
	}
}

func (x *fakeExchange) body() io.Reader {
	if x.reqBody == "" {
		return nil
	}
	return strings.NewReader(x.reqBody)
}

func (x *fakeExchange) bodyLen() int64                   { return int64(len(x.reqBody)) }
func (x *fakeExchange) setBody(b []byte)                 { x.reqBody = string(b) }
func (x *fakeExchange) setReadDeadline(time.Time) error  { return nil }
func (x *fakeExchange) watch() (context.Context, func()) { return context.Background(), func() {} }
func (x *fakeExchange) drain(*Server, bool)              { x.drained = true }
func (x *fakeExchange) upgrade(*decision, *record)       { x.upgraded, x.status = true, 101 }
func (x *fakeExchange) respond(status int, body []byte)  { x.status, x.respBody = status, body }
func (x *fakeExchange) frame(csp string)                 { x.setResponse(cspHeader, csp) }
func (x *fakeExchange) setResponse(name, value string) {
	if x.resp == nil {
		x.resp = http.Header{}
	}
	x.resp.Set(name, value)
}

func (x *fakeExchange) forward(d *decision, in *countingReader, rec *record) (bool, error) {
	var b strings.Builder
	b.WriteString("target: " + x.target + "\n")
	for _, f := range x.hdr {
		b.WriteString(strings.ToLower(f.name) + ": " + f.value + "\n")
	}
	if in.r != nil {
		io.Copy(io.Discard, in)
	}
	x.sent, x.status = b.String(), 200
	return false, nil
}

// echoApp answers with what it got: its target and headers, one a line,
// lowercase names.
func echoApp(ctx *fasthttp.RequestCtx) {
	var b strings.Builder
	b.WriteString("target: " + string(ctx.Request.Header.RequestURI()) + "\n")
	for k, v := range ctx.Request.Header.All() {
		b.WriteString(strings.ToLower(string(k)) + ": " + string(v) + "\n")
	}
	ctx.WriteString(b.String())
}

// answer is what a client got, whatever the protocol.
type answer struct {
	status int
	header http.Header
	body   string
}

// through sends one request through each protocol's adapter (over
// net.Pipe to echoApp) or the fake exchange.
func through(t *testing.T, s *Server, proto, method, host, target string, hdr []field, body string) (answer, string) {
	t.Helper()
	switch proto {
	case "fake":
		x := &fakeExchange{method: method, host: host, target: target, hdr: append([]field(nil), hdr...), reqBody: body}
		s.serve(x, &flow{}, "fake")
		return answer{x.status, x.resp, string(x.respBody)}, x.sent
	case "h1":
		var ctx fasthttp.RequestCtx
		ctx.Init2(benchConn{}, discardLogger{}, false)
		ctx.Request.Header.DisableNormalizing()
		ctx.Request.Header.SetMethod(method)
		ctx.Request.SetRequestURI(target)
		ctx.Request.Header.SetHost(host)
		for _, f := range hdr {
			ctx.Request.Header.Add(f.name, f.value)
		}
		if body != "" {
			ctx.Request.SetBodyString(body)
			ctx.Request.Header.SetContentLength(len(body)) // as the server reads it from the head
		}
		s.serveH1(&ctx)
		a := answer{status: ctx.Response.StatusCode(), header: http.Header{}}
		for k, v := range ctx.Response.Header.All() {
			a.header.Add(string(k), string(v))
		}
		var out bytes.Buffer
		ctx.Response.BodyWriteTo(&out)
		ctx.Response.CloseBodyStream()
		a.body = out.String()
		if a.status == 200 {
			return a, a.body
		}
		return a, ""
	default: // h2
		var rb io.Reader
		if body != "" {
			rb = strings.NewReader(body)
		}
		r := httptest.NewRequest(method, "https://"+host+target, rb)
		r.Proto, r.ProtoMajor, r.ProtoMinor = "HTTP/2.0", 2, 0
		r.RemoteAddr = "192.0.2.1:4000"
		r.TLS = &tls.ConnectionState{ServerName: host}
		for _, f := range hdr {
			r.Header.Add(f.name, f.value)
		}
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		a := answer{w.Code, w.Header(), w.Body.String()}
		if a.status == 200 {
			return a, a.body
		}
		return a, ""
	}
}

// TestPipeline is the edge's decisions, one row each, through the fake
// exchange and both protocols' adapters (an app behind net.Pipe): what
// the client gets, and what reaches the sandbox.
func TestPipeline(t *testing.T) {
	t.Parallel()
	const app, pub = "app.froog.test", "pub.froog.test"
	tokCookie := field{"Cookie", "theme=dark; __Host-froog_url=" + benchToken + "; sid=1"}
	tests := []struct {
		name           string
		only           string // one protocol only ("fake", "h1")
		method, host   string
		target         string
		hdr            []field
		body           string
		status         int
		code           string // the problem's code in its body
		html           bool   // the problem is a page
		header         map[string]string
		sentHas        []string // lines (lowercase names) the sandbox must get
		sentLacks      []string // substrings it must not
		upgraded, none bool     // passed as an upgrade; nothing reaches the sandbox
	}{
		{name: "no token", method: "GET", host: app, target: "/", status: 401, code: "token_required", none: true},
		{name: "no token, a navigation gets a page", method: "GET", host: app, target: "/", hdr: []field{{"Sec-Fetch-Mode", "navigate"}}, status: 401, html: true, none: true},
		{name: "no token, Accept html gets a page", method: "GET", host: app, target: "/", hdr: []field{{"Accept", "text/html,*/*"}}, status: 401, html: true, none: true},
		{name: "wrong header token", method: "GET", host: app, target: "/", hdr: []field{{"X-Froog-Url-Token", "nope"}}, status: 401, code: "token_invalid", none: true},
		{name: "wrong cookie token", method: "GET", host: app, target: "/", hdr: []field{{"Cookie", "__Host-froog_url=nope"}}, status: 401, code: "token_invalid", none: true},
		{name: "wrong query token", method: "GET", host: app, target: "/?_token=nope", status: 401, code: "token_invalid", none: true},
		{name: "unknown host", method: "GET", host: "nope.froog.test", target: "/", status: 404, code: "not_found", none: true},
		{name: "CONNECT", only: "fake", method: "CONNECT", host: app, target: "/", status: 403, code: "forbidden", none: true},
		{name: "absolute-form target", only: "fake", method: "GET", host: app, target: "http://evil/", status: 400, code: "bad_request", none: true},
		{name: "header token", method: "GET", host: app, target: "/x?a=1", hdr: []field{{"X-Froog-Url-Token", benchToken}}, status: 200,
			sentHas: []string{"target: /x?a=1", "x-forwarded-proto: https", "x-forwarded-host: app.froog.test", "x-forwarded-for: 192.0.2.1"}, sentLacks: []string{benchToken, "x-froog-url-token"}},
		{name: "cookie token, other cookies kept", method: "GET", host: app, target: "/", hdr: []field{tokCookie}, status: 200,
			sentHas: []string{"cookie: theme=dark; sid=1"}, sentLacks: []string{benchToken, "froog_url"}},
		{name: "query token on a navigation redirects", method: "GET", host: app, target: "/p?x=1&_token=" + benchToken, status: 302, none: true,
			header: map[string]string{"Location": "https://app.froog.test/p?x=1", "Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}},
		{name: "query token on a POST goes inline", method: "POST", host: app, target: "/p?_token=" + benchToken + "&x=1", body: "hi", status: 200,
			sentHas: []string{"target: /p?x=1"}, sentLacks: []string{benchToken}},
		{name: "preflight needs no token", method: "OPTIONS", host: app, target: "/api", hdr: []field{{"Origin", "https://o.example"}, {"Access-Control-Request-Method", "PUT"}}, status: 200,
			sentHas: []string{"access-control-request-method: PUT"}},
		{name: "a preflight with a body is checked", method: "OPTIONS", host: app, target: "/api", hdr: []field{{"Access-Control-Request-Method", "PUT"}}, body: "x", status: 401, code: "token_required", none: true},
		{name: "a preflight asking an upgrade is checked", only: "fake", method: "OPTIONS", host: app, target: "/api", hdr: []field{{"Access-Control-Request-Method", "GET"}, {"Upgrade", "websocket"}}, status: 401, none: true},
		{name: "client claims of where it is dropped", method: "GET", host: pub, target: "/",
			hdr:    []field{{"X-Forwarded-For", "6.6.6.6"}, {"X-Real-Ip", "6.6.6.6"}, {"Forwarded", "for=6.6.6.6"}, {"X-Forwarded-Host", "evil"}, {"True-Client-Ip", "6.6.6.6"}, {"X-Request-Id", "mine"}},
			status: 200, sentHas: []string{"x-forwarded-for: 192.0.2.1", "x-forwarded-host: pub.froog.test"}, sentLacks: []string{"6.6.6.6", "evil", "mine"}},
		{name: "a Referer loses its token and fragment", method: "GET", host: app, target: "/",
			hdr: []field{tokCookie, {"Referer", "https://app.froog.test/a?_token=" + benchToken + "&k=v#" + benchToken}}, status: 200,
			sentHas: []string{"referer: https://app.froog.test/a?k=v"}, sentLacks: []string{benchToken}},
		{name: "any header holding the token dropped", method: "GET", host: app, target: "/",
			hdr: []field{tokCookie, {"Authorization", "Bearer " + benchToken}, {"X-App", "keep"}}, status: 200,
			sentHas: []string{"x-app: keep"}, sentLacks: []string{benchToken, "authorization"}},
		{name: "Connection names end at the edge", only: "fake", method: "GET", host: pub, target: "/", hdr: []field{{"Connection", "x-secret"}, {"X-Secret", "s"}, {"Keep-Alive", "5"}}, status: 200,
			sentLacks: []string{"x-secret", "keep-alive", "connection"}},
		{name: "too many Connection names", method: "GET", host: pub, target: "/", only: "h1", hdr: []field{{"Connection", strings.Repeat("a,b,c,d,e,f,g,h,", 5)}}, status: 400, none: true},
		{name: "a websocket upgrade passes", only: "fake", method: "GET", host: pub, target: "/ws", hdr: []field{{"Connection", "Upgrade"}, {"Upgrade", "websocket"}}, upgraded: true, status: 101},
		{name: "a websocket upgrade on a private URL needs the token", only: "fake", method: "GET", host: app, target: "/ws", hdr: []field{{"Connection", "Upgrade"}, {"Upgrade", "websocket"}}, status: 401, none: true},
		{name: "h2c is not passed: an ordinary request", only: "fake", method: "GET", host: pub, target: "/", hdr: []field{{"Connection", "Upgrade, HTTP2-Settings"}, {"Upgrade", "h2c"}, {"HTTP2-Settings", "AAA"}}, status: 200,
			sentLacks: []string{"upgrade", "h2c", "http2-settings"}},
		{name: "an upgrade with a body is not one", only: "fake", method: "POST", host: pub, target: "/", hdr: []field{{"Connection", "Upgrade"}, {"Upgrade", "websocket"}}, body: "x", status: 200,
			sentLacks: []string{"upgrade"}},
	}
	for _, proto := range []string{"fake", "h1", "h2"} {
		s, _, _ := newFakeEdge(t, echoApp)
		for _, tt := range tests {
			if tt.only != "" && tt.only != proto {
				continue
			}
			t.Run(proto+"/"+tt.name, func(t *testing.T) {
				a, sent := through(t, s, proto, tt.method, tt.host, tt.target, tt.hdr, tt.body)
				if a.status != tt.status {
					t.Fatalf("status %d, want %d (body %q)", a.status, tt.status, a.body)
				}
				if a.header.Get("X-Request-Id") == "" {
					t.Error("no X-Request-Id")
				}
				if tt.code != "" && !strings.Contains(a.body, `"code":"`+tt.code+`"`) {
					t.Errorf("body %q, want code %s", a.body, tt.code)
				}
				if ct := a.header.Get("Content-Type"); tt.html && !strings.HasPrefix(ct, "text/html") || tt.code != "" && ct != "application/json" {
					t.Errorf("Content-Type %q (page: %v)", ct, tt.html)
				}
				for k, v := range tt.header {
					if got := a.header.Get(k); got != v {
						t.Errorf("%s: %q, want %q", k, got, v)
					}
				}
				if tt.status == 302 && !strings.Contains(a.header.Get("Set-Cookie"), "__Host-froog_url="+benchToken) {
					t.Errorf("Set-Cookie %q", a.header.Get("Set-Cookie"))
				}
				if proto == "fake" && tt.upgraded != (a.status == 101) {
					t.Errorf("upgraded %v", !tt.upgraded)
				}
				if tt.none && sent != "" {
					t.Errorf("reached the sandbox:\n%s", sent)
				}
				low := strings.ToLower(sent)
				for _, h := range tt.sentHas {
					if !strings.Contains(sent, h+"\n") {
						t.Errorf("the sandbox did not get %q:\n%s", h, sent)
					}
				}
				for _, h := range tt.sentLacks {
					if strings.Contains(low, strings.ToLower(h)) {
						t.Errorf("the sandbox got %q:\n%s", h, sent)
					}
				}
				if strings.Contains(a.body, benchToken) || strings.Contains(a.header.Get("Location"), benchToken) {
					t.Error("the answer quotes the token")
				}
			})
		}
	}
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

// TestPipelineHeld: a request for a sandbox that is starting waits, body
// and all, and reaches it once it runs, on both protocols: at the port
// its path routes to, which the hold waits for, not the URL's own.
func TestPipelineHeld(t *testing.T) {
	t.Parallel()
	for _, proto := range []string{"fake", "h1", "h2"} {
		t.Run(proto, func(t *testing.T) {
			t.Parallel()
			s, rts, dialer := newFakeEdge(t, func(ctx *fasthttp.RequestCtx) { ctx.Write(ctx.Request.Body()) })
			rts.mu.Lock()
			rts.routes["app.froog.test"] = route.NewRoute(&store.URL{ID: "u1", AccountID: "a1", Hostname: "app", SandboxID: "sb1", Port: 8080,
				TokenHash: store.HashSecret(benchToken), Routes: []store.PathRoute{{Prefix: "/api/", Port: 8000}}}, nil, time.Now())
			rts.boxes["sb1"] = &route.Sandbox{ID: "sb1", State: store.StateStopped, DesiredState: store.StateRunning, AutoStart: true}
			rts.mu.Unlock()
			time.AfterFunc(150*time.Millisecond, func() {
				rts.mu.Lock()
				rts.boxes["sb1"] = &route.Sandbox{ID: "sb1", State: store.StateRunning, DesiredState: store.StateRunning, AutoStart: true, Endpoint: "h:22"}
				rts.mu.Unlock()
				rts.changed.Wake()
			})
			a, sent := through(t, s, proto, "POST", "app.froog.test", "/api/hook", []field{{"X-Froog-Url-Token", benchToken}}, "payload")
			if a.status != 200 {
				t.Fatalf("held POST: %d %s", a.status, a.body)
			}
			if proto != "fake" && sent != "payload" {
				t.Fatalf("the app got %q", sent)
			}
			dialer.mu.Lock()
			defer dialer.mu.Unlock()
			if len(dialer.ports) == 0 || slices.ContainsFunc(dialer.ports, func(p int) bool { return p != 8000 }) {
				t.Fatalf("dialled ports %v, want 8000 alone (the hold's and the forward's)", dialer.ports)
			}
		})
	}
}
