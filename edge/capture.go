package edge

import (
	"bytes"
	"cmp"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/valyala/fasthttp"

	"froog.tech/froog/internal/traffic"
)

// Capture: with its owner's capture on, a URL's exchanges keep their
// headers and the first traffic.MaxBody bytes of each body, taken where
// the pipeline already has them (the request once stripped, as it goes to
// the app; the answer as it comes back) and redacted once the exchange
// is over, before the ring keeps it: cookie values (Cookie, Set-Cookie),
// Authorization, Proxy-Authorization and froog's token header are
// replaced by traffic.Redacted, and those values, with the URL token the
// request came with, are scrubbed from everything else kept (path,
// query, other headers, bodies) when they are minSecret bytes or longer.
// With capture off none of this runs: a record is a few fields.

// minSecret is the shortest value scrubbed wherever it appears: shorter
// ones (a cookie "theme=dark") are only redacted where they are sent.
const minSecret = 8

// capture is what the edge keeps of one exchange while it runs, not yet
// redacted.
type capture struct {
	reqHeaders, respHeaders []traffic.Header
	req, resp               bodyTap
	reqLen                  int64  // the request body's declared length; -1 unknown
	token                   string // the URL token the request came with, if any
}

// bodyTap keeps the first traffic.MaxBody bytes written to it. A
// request body may be read by the proxy's writer while the exchange
// ends: it locks.
type bodyTap struct {
	mu  sync.Mutex
	b   []byte
	cut bool
}

func (t *bodyTap) write(p []byte) {
	if t == nil || len(p) == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if room := traffic.MaxBody - len(t.b); len(p) > room {
		p, t.cut = p[:room], true
	}
	t.b = append(t.b, p...)
}

func (t *bodyTap) take() ([]byte, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.b, t.cut
}

// startCapture begins the capture of a request its URL's owner captures:
// its headers as they go to the app; its body is captured as it is read
// (requestTap), or whole (captureHeadBody). An upgrade (a websocket) is
// not captured.
func (s *Server) startCapture(ex exchange, f *flow) {
	c, d := &f.c, &f.d
	if !d.rt.Capture || c.upgrade {
		return
	}
	cp := &capture{reqLen: ex.bodyLen(), token: strings.Clone(d.token)}
	for _, h := range ex.headers(nil) {
		cp.reqHeaders = append(cp.reqHeaders, traffic.Header{Name: strings.Clone(h.name), Value: strings.Clone(h.value)})
	}
	f.rec.cap = cp
}

// captureHeadBody captures a request body HTTP/1.1 read whole with the
// head (or held in memory while its sandbox started): it goes to the app
// without passing a reader.
func (r *record) captureHeadBody(ex exchange) {
	if r.cap == nil || ex.body() != nil {
		return
	}
	if hb, ok := ex.(interface{ headBody() []byte }); ok {
		r.cap.req.write(hb.headBody())
	}
}

// requestTap is where a request body's reader copies what it reads:
// nil when the exchange is not captured.
func (r *record) requestTap() *bodyTap {
	if r.cap == nil {
		return nil
	}
	return &r.cap.req
}

// responseTap is requestTap for the answer's body.
func (r *record) responseTap() *bodyTap {
	if r.cap == nil {
		return nil
	}
	return &r.cap.resp
}

// answerH1 captures the headers of an app's answer over HTTP/1.1, as the
// client gets them.
func (r *record) answerH1(h *fasthttp.ResponseHeader) {
	if r.cap == nil {
		return
	}
	for k, v := range h.All() {
		r.cap.respHeaders = append(r.cap.respHeaders, traffic.Header{Name: string(k), Value: string(v)})
	}
}

// answerH2 captures the headers of an app's answer over HTTP/2 or
// HTTP/3, as the client gets them.
func (r *record) answerH2(h http.Header) {
	if r.cap == nil {
		return
	}
	for k, vs := range h {
		for _, v := range vs {
			r.cap.respHeaders = append(r.cap.respHeaders, traffic.Header{Name: k, Value: v})
		}
	}
}

// redact puts cp, redacted, in x, and scrubs x's path and query of the
// secrets it found.
func (cp *capture) redact(x *traffic.Exchange) {
	sc := scrubber{secrets: cp.secrets()}
	reqBody, reqCut := cp.req.take()
	respBody, respCut := cp.resp.take()
	out := &traffic.Capture{
		Request: traffic.Message{Headers: sc.headers(cp.reqHeaders), Body: sc.body(reqBody),
			Truncated: reqCut || int64(len(reqBody)) < max(x.BytesIn, cp.reqLen)},
		Response: traffic.Message{Headers: sc.headers(cp.respHeaders), Body: sc.body(respBody),
			Truncated: respCut || int64(len(respBody)) < x.BytesOut},
	}
	x.Method, x.Path, x.Query = sc.text(x.Method), sc.text(x.Path), sc.text(x.Query)
	x.Capture = out
}

// sensitive reports whether a header's whole value is a secret: it is
// redacted where it is sent, and scrubbed everywhere else.
func sensitive(name string) bool {
	for _, n := range []string{"Authorization", "Proxy-Authorization", tokenHeader} {
		if strings.EqualFold(name, n) {
			return true
		}
	}
	return false
}

// secrets are the values the capture must not keep: the URL token, each
// cookie's value (sent or set), and each credential (the whole value,
// and what follows its scheme), longest first.
func (cp *capture) secrets() []string {
	var out []string
	add := func(v string) {
		if v = trimOWS(v); v != "" {
			out = append(out, v)
		}
	}
	add(cp.token)
	for _, h := range cp.reqHeaders {
		switch {
		case strings.EqualFold(h.Name, "Cookie"):
			for _, part := range strings.Split(h.Value, ";") {
				_, v := cookiePart(part)
				add(v)
				if _, raw, ok := strings.Cut(part, "="); ok {
					add(raw)
				}
			}
		case sensitive(h.Name):
			add(h.Value)
			if _, cred, ok := strings.Cut(trimOWS(h.Value), " "); ok {
				add(cred)
			}
		}
	}
	for _, h := range cp.respHeaders {
		if strings.EqualFold(h.Name, "Set-Cookie") {
			pair, _, _ := strings.Cut(h.Value, ";")
			_, v := cookiePart(pair)
			add(v)
			if _, raw, ok := strings.Cut(pair, "="); ok {
				add(raw)
			}
		}
	}
	slices.SortFunc(out, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	return slices.Compact(out)
}

// scrubber takes secrets out of what a capture keeps.
type scrubber struct{ secrets []string }

// scrubbed reports whether a secret is taken out wherever it appears:
// minSecret bytes or more, and not a piece of the placeholder itself.
func scrubbed(sec string) bool {
	return len(sec) >= minSecret && !strings.Contains(traffic.Redacted, sec)
}

// text replaces every scrubbed secret in s; should one survive
// (replacements that meet), s is replaced whole.
func (sc scrubber) text(s string) string {
	for _, sec := range sc.secrets {
		if scrubbed(sec) && strings.Contains(s, sec) {
			s = strings.ReplaceAll(s, sec, traffic.Redacted)
		}
	}
	if sc.holds(s) {
		return traffic.Redacted
	}
	return s
}

// holds reports whether s holds a scrubbed secret outside the
// placeholders.
func (sc scrubber) holds(s string) bool {
	if strings.Contains(s, traffic.Redacted) {
		s = strings.ReplaceAll(s, traffic.Redacted, "\x00")
	}
	for _, sec := range sc.secrets {
		if scrubbed(sec) && strings.Contains(s, sec) {
			return true
		}
	}
	return false
}

// body is text for a body.
func (sc scrubber) body(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	for _, sec := range sc.secrets {
		if scrubbed(sec) && bytes.Contains(b, []byte(sec)) {
			b = bytes.ReplaceAll(b, []byte(sec), []byte(traffic.Redacted))
		}
	}
	if sc.holds(b2s(b)) {
		return []byte(traffic.Redacted)
	}
	return bytes.Clone(b)
}

// headers redacts a side's headers: a cookie's value, a credential, the
// token header's value replaced; every other value scrubbed.
func (sc scrubber) headers(hs []traffic.Header) []traffic.Header {
	out := make([]traffic.Header, 0, len(hs))
	for _, h := range hs {
		v := h.Value
		switch {
		case strings.EqualFold(h.Name, "Cookie"):
			v = redactCookies(v)
		case strings.EqualFold(h.Name, "Set-Cookie"):
			v = redactSetCookie(v)
		case sensitive(h.Name):
			v = traffic.Redacted
		}
		out = append(out, traffic.Header{Name: sc.text(h.Name), Value: sc.text(v)})
	}
	return out
}

// redactCookies keeps a Cookie header's names and replaces each value.
func redactCookies(v string) string {
	var b strings.Builder
	for _, part := range strings.Split(v, ";") {
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		if name, _, ok := strings.Cut(trimOWS(part), "="); ok {
			b.WriteString(trimOWS(name))
			b.WriteByte('=')
		}
		b.WriteString(traffic.Redacted)
	}
	return b.String()
}

// redactSetCookie replaces a Set-Cookie's value and keeps its name and
// attributes (Path, Secure, Max-Age...).
func redactSetCookie(v string) string {
	pair, attrs, hasAttrs := strings.Cut(v, ";")
	out := traffic.Redacted
	if name, _, ok := strings.Cut(pair, "="); ok {
		out = trimOWS(name) + "=" + traffic.Redacted
	}
	if hasAttrs {
		out += ";" + attrs
	}
	return out
}

// captureSize is what a capture is counted (ringCaptured, edgeTraffic).
func captureSize(c *traffic.Capture) int64 {
	if c == nil {
		return 0
	}
	n := len(c.Request.Body) + len(c.Response.Body)
	for _, hs := range [][]traffic.Header{c.Request.Headers, c.Response.Headers} {
		for _, h := range hs {
			n += len(h.Name) + len(h.Value) + 32
		}
	}
	return int64(n)
}
