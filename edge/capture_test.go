package edge

import (
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"froog.tech/froog/edge/route"
	"froog.tech/froog/internal/traffic"
)

// recordText is every string a kept exchange holds, bodies included.
func recordText(x traffic.Exchange) string {
	parts := []string{x.ID, x.ReplayOf, x.Proto, x.Method, x.Path, x.Query}
	if c := x.Capture; c != nil {
		for _, m := range []traffic.Message{c.Request, c.Response} {
			for _, h := range m.Headers {
				parts = append(parts, h.Name, h.Value)
			}
			parts = append(parts, string(m.Body))
		}
	}
	return strings.Join(parts, "\n")
}

// only keeps the bytes of s that ok allows, at most 512 of them (the
// fake app's fasthttp reads a head of 4 KiB, and stops reading the
// pipe past it); "x" when none is left.
func only(s string, ok func(byte) bool) string {
	var b strings.Builder
	for i := range min(len(s), 512) {
		if ok(s[i]) {
			b.WriteByte(s[i])
		}
	}
	if b.Len() == 0 {
		return "x"
	}
	return b.String()
}

// cookieOctet is RFC 6265's cookie-octet: what a cookie's value may hold.
func cookieOctet(c byte) bool {
	return c == 0x21 || c >= 0x23 && c <= 0x2b || c >= 0x2d && c <= 0x3a || c >= 0x3c && c <= 0x5b || c >= 0x5d && c <= 0x7e
}

// visible is a header value's visible ASCII.
func visible(c byte) bool { return c > 0x20 && c < 0x7f }

// No token, cookie value or Authorization value ever appears in a
// captured record, over either protocol: the values the request sends
// (in their headers, in the body, in the query) and the answer sets or
// echoes. Where they are sent, they read traffic.Redacted; a value of
// minSecret bytes or more appears nowhere else either.
func FuzzCaptureRedaction(f *testing.F) {
	f.Add("cookie-value-1", "Bearer abcdefgh12", "set-cookie-value", []byte("a body"), "q=1")
	f.Add("a", "x", "y", []byte{}, "")
	f.Add(`"quoted-value-9"`, "Basic dXNlcjpwYXNzd29yZA==", "v=w=z", []byte(benchToken), "_token="+benchToken)
	f.Add("ted]]]]]]]]", "[redacted]]]]]", "d][redacte", []byte("[redacte[redacted]d]]]]"), "")
	f.Add("sid", "sid=sid", "sid", []byte("sid=sid; sid"), "sid=sid")
	f.Fuzz(func(t *testing.T, cookie, auth, setCookie string, body []byte, query string) {
		cookie, setCookie = only(cookie, cookieOctet), only(setCookie, cookieOctet)
		scheme, cred, _ := strings.Cut(auth, " ")
		auth = only(scheme, visible)
		if cred != "" {
			cred = only(cred, visible)
			auth += " " + cred
		}
		query = only(query, func(c byte) bool { return visible(c) && c != '#' })
		app := func(ctx *fasthttp.RequestCtx) {
			ctx.Response.Header.Set("Set-Cookie", "back="+setCookie+"; Path=/")
			ctx.Response.Header.Set("X-Echo", string(ctx.Request.Header.Peek("Authorization")))
			ctx.Write(ctx.Request.Header.Header())
			ctx.Write(ctx.Request.Body())
			ctx.WriteString(setCookie)
		}
		s, rts, _ := newFakeEdge(t, app)
		setRoute(rts, "app.froog.test", func(rt *route.Route) { rt.Capture = true })
		hdr := []field{{"Cookie", "sid=" + cookie + "; __Host-froog_url=" + benchToken}, {"Authorization", auth}}
		sent := string(body) + cookie + auth + benchToken + setCookie
		for _, proto := range []string{"h1", "h2"} {
			through(t, s, proto, "POST", "app.froog.test", "/p?"+query, hdr, sent)
		}
		list, _ := s.Requests("u1", traffic.Query{})
		if len(list) == 0 {
			t.Fatal("nothing kept")
		}
		secrets := []string{cookie, auth, cred, setCookie, benchToken}
		for _, x := range list {
			if x.Status != 200 {
				continue // refused before it went: nothing captured
			}
			if x.Capture == nil {
				t.Fatalf("%s: not captured", x.Proto)
			}
			// The placeholders aside: a secret may be a piece of one.
			text := strings.ReplaceAll(recordText(x), traffic.Redacted, "\x00")
			for _, sec := range secrets {
				if scrubbed(sec) && strings.Contains(text, sec) {
					t.Fatalf("%s: the record holds %q:\n%s", x.Proto, sec, text)
				}
			}
			if v := header(x.Capture.Request.Headers, "Cookie"); v != "" && v != "sid="+traffic.Redacted && v != traffic.Redacted {
				t.Fatalf("%s: Cookie reads %q", x.Proto, v)
			}
			if v := header(x.Capture.Request.Headers, "Authorization"); v != "" && v != traffic.Redacted {
				t.Fatalf("%s: Authorization reads %q", x.Proto, v)
			}
			if v := header(x.Capture.Response.Headers, "Set-Cookie"); v != "back="+traffic.Redacted+"; Path=/" && v != traffic.Redacted {
				t.Fatalf("%s: Set-Cookie reads %q", x.Proto, v)
			}
		}
	})
}
