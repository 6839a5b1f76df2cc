package e2e_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"froog.tech/froog/internal/wait"
)

// rawApp is the app behind the attack corpus: it appends every byte it
// receives to raw.log and answers each request "ok". Asked for a
// websocket or for h2c it agrees (101) and echoes, as a careless app
// would: the edge must be what stands between a stranger and that.
const rawApp = `import socket, threading, sys
lock = threading.Lock()
def log(b):
    with lock:
        with open("raw.log", "ab") as f: f.write(b)
def serve(c):
    buf = b""
    try:
        while True:
            while b"\r\n\r\n" not in buf:
                x = c.recv(65536)
                if not x: return
                log(x); buf += x
            head, buf = buf.split(b"\r\n\r\n", 1)
            h = head.lower()
            if b"\r\ncontent-length:" in h:
                n = int(h.split(b"\r\ncontent-length:")[1].split(b"\r\n")[0])
                while len(buf) < n:
                    x = c.recv(65536)
                    if not x: return
                    log(x); buf += x
                buf = buf[n:]
            elif b"\r\ntransfer-encoding:" in h:
                while b"0\r\n\r\n" not in buf:
                    x = c.recv(65536)
                    if not x: return
                    log(x); buf += x
                buf = buf.split(b"0\r\n\r\n", 1)[1]
            for proto in (b"websocket", b"h2c"):
                if b"\r\nupgrade: " + proto in h:
                    c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: " + proto + b"\r\nConnection: Upgrade\r\n\r\n")
                    while True:
                        x = c.recv(65536)
                        if not x: return
                        log(x); c.sendall(x)
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    except Exception: pass
    finally: c.close()
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(64)
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
`

// attackRig is froogd dev with the raw app on a private URL and on a
// public one, each with a GitHub-verified inbox at /inbox/ (inboxSecret);
// the public one routes /api/ to another raw app, which logs to
// api/raw.log; and on guarded, a private URL whose allow_ips leave out
// the corpus's own address (127.0.0.1).
type attackRig struct {
	t                      *testing.T
	c                      client
	edge                   string
	pool                   *x509.CertPool
	private, public, token string
	guarded, guardedToken  string
}

const inboxSecret = "corpus-inbox-secret"

func newAttackRig(t *testing.T) *attackRig {
	d := startDev(t, devOptions{args: []string{"--rate-limit", "0"}})
	r := &attackRig{t: t, c: d.c, edge: d.edge, pool: d.pool}
	newSandbox(t, r.c, "atk", 15*time.Second)
	script, _ := json.Marshal(rawApp)
	r.c.call("POST", "/v1/sandboxes/atk/exec", `{"command": "cat > app.py && mkdir api", "stdin": `+string(script)+`}`, 200, nil)
	// host starts the app in folder dir on a new port, gives the port a
	// URL with the members given, and returns its port, host and token
	// ("" when public).
	host := func(dir, members string) (int, string, string) {
		port := serveIn(t, r.c, "atk", "cd "+dir+" && python3 ~/app.py %d")
		var u struct{ URL, Host string }
		r.c.call("POST", "/v1/sandboxes/atk/urls", fmt.Sprintf(`{"port": %d, %s}`, port, members), 201, &u)
		lu, _ := url.Parse(u.URL)
		return port, u.Host, lu.Query().Get("_token")
	}
	inbox := `"inbox": {"match": "POST /inbox/", "verify": {"provider": "github", "secret": "` + inboxSecret + `"}}`
	_, r.private, r.token = host(".", `"public": false, `+inbox)
	api, _, _ := host("api", `"public": true`)
	_, r.public, _ = host(".", fmt.Sprintf(`"public": true, "routes": [{"prefix": "/api/", "port": %d}], %s`, api, inbox))
	_, r.guarded, r.guardedToken = host(".", `"public": false, "allow_ips": ["127.0.0.2/32", "2001:db8::/32"]`)
	if r.token == "" || r.guardedToken == "" {
		t.Fatal("no token in a private link")
	}
	return r
}

// appSaw returns what the app received since the last call, and clears it.
func (r *attackRig) appSaw() string {
	var out struct{ Stdout string }
	r.c.call("POST", "/v1/sandboxes/atk/exec", `{"command": "cat raw.log 2>/dev/null; : > raw.log"}`, 200, &out)
	return out.Stdout
}

// h1 sends raw over one TLS connection (HTTP/1.1) and returns everything
// the edge answers until it closes or goes quiet.
func (r *attackRig) h1(host, raw string) string {
	conn, err := tls.Dial("tcp", r.edge, &tls.Config{RootCAs: r.pool, ServerName: host, NextProtos: []string{"http/1.1"}})
	if err != nil {
		r.t.Fatal(err)
	}
	defer conn.Close()
	conn.Write([]byte(raw))
	var got bytes.Buffer
	buf := make([]byte, 64<<10)
	// The first answer may be seconds away on a loaded machine (one came
	// after the 1.5 s of quiet that end the exchange once it has begun).
	quiet := 30 * time.Second
	for {
		conn.SetReadDeadline(time.Now().Add(quiet))
		n, err := conn.Read(buf)
		got.Write(buf[:n])
		if err != nil {
			return got.String()
		}
		quiet = 1500 * time.Millisecond
	}
}

// h2 sends one request over HTTP/2 with the header fields as given
// (names and values unchanged), and returns the status and the body.
func (r *attackRig) h2(host string, fields [][2]string, body string) (string, string) {
	t := r.t
	conn, err := tls.Dial("tcp", r.edge, &tls.Config{RootCAs: r.pool, ServerName: host, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(conn, http2.ClientPreface)
	fr := http2.NewFramer(conn, conn)
	fr.WriteSettings()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range fields {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true, EndStream: body == ""})
	if body != "" {
		fr.WriteData(1, true, []byte(body))
	}
	var status string
	var resp bytes.Buffer
	dec := hpack.NewDecoder(4096, func(f hpack.HeaderField) {
		if f.Name == ":status" {
			status = f.Value
		}
	})
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return status + " (" + err.Error() + ")", resp.String()
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				fr.WriteSettingsAck()
			}
		case *http2.HeadersFrame:
			dec.Write(f.HeaderBlockFragment())
			if f.StreamEnded() {
				return status, resp.String()
			}
		case *http2.DataFrame:
			resp.Write(f.Data())
			if f.StreamEnded() {
				return status, resp.String()
			}
		case *http2.RSTStreamFrame:
			return status + " (reset: " + f.ErrCode.String() + ")", resp.String()
		case *http2.GoAwayFrame:
			return status + " (goaway: " + f.ErrCode.String() + ")", resp.String()
		}
	}
}

func statusLine(answer string) string {
	line, _, _ := strings.Cut(answer, "\r\n")
	return line
}

// The attack corpus: hostile requests replayed against the real binary
// over raw TLS, for both protocols. Each case says what the client gets
// and what the app received — never the token, never a request the edge
// did not check. New shapes found later join the tables.
//
// An HTTP/1.1 case whose connection stays open ends in 1.5 s of quiet (a
// second answer, a smuggled request's, would come in it): the cases are
// dealt out to four rigs, each a froogd of its own, that go at once.
func TestAttackCorpus(t *testing.T) {
	t.Parallel()
	const shards = 4
	for shard := range shards {
		t.Run(fmt.Sprint(shard), func(t *testing.T) {
			t.Parallel()
			attackCorpus(t, func(i int) bool { return i%shards == shard })
		})
	}
}

// attackCorpus runs the corpus's cases whose index in their table is
// mine, on a rig of its own.
func attackCorpus(t *testing.T, mine func(i int) bool) {
	r := newAttackRig(t)
	priv, pub, tok := r.private, r.public, r.token
	grd, gtok := r.guarded, r.guardedToken
	// A webhook's body, signed as GitHub signs it: the signature covers
	// the body, not the path it is sent to.
	hook := `{"zen":"corpus"}`
	mac := hmac.New(sha256.New, []byte(inboxSecret))
	mac.Write([]byte(hook))
	hookSig := "sha256=" + hex.EncodeToString(mac.Sum(nil))
	signed := func(host, target string) string {
		return "POST " + target + " HTTP/1.1\r\nHost: " + host + "\r\nX-Hub-Signature-256: " + hookSig + "\r\nContent-Length: " + fmt.Sprint(len(hook)) + "\r\n\r\n" + hook
	}
	if saw := r.appSaw(); saw != "" {
		t.Fatalf("the app saw requests before the corpus: %q", saw)
	}
	const nothing = "\x00nothing" // the app must have received nothing
	h1cases := []struct {
		name, host, raw string
		status          string // the first status line's prefix
		saw             string // what the app's log must contain, or nothing
	}{
		// Item 1: a preflight that is anything more is checked like any request.
		{"preflight websocket", priv, "OPTIONS /ws HTTP/1.1\r\nHost: " + priv + "\r\nAccess-Control-Request-Method: GET\r\nOrigin: https://x.example\r\n" +
			"Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", "HTTP/1.1 401", nothing},
		{"preflight h2c", priv, "OPTIONS / HTTP/1.1\r\nHost: " + priv + "\r\nAccess-Control-Request-Method: GET\r\n" +
			"Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\nPRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "HTTP/1.1 401", nothing},
		{"preflight upgrade in two Connection headers", priv, "OPTIONS / HTTP/1.1\r\nHost: " + priv + "\r\nAccess-Control-Request-Method: GET\r\n" +
			"Connection: keep-alive\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", "HTTP/1.1 401", nothing},
		{"preflight with a body", priv, "OPTIONS / HTTP/1.1\r\nHost: " + priv + "\r\nAccess-Control-Request-Method: POST\r\nContent-Length: 5\r\n\r\nhello", "HTTP/1.1 401", nothing},
		{"preflight with a chunked body", priv, "OPTIONS / HTTP/1.1\r\nHost: " + priv + "\r\nAccess-Control-Request-Method: POST\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", "HTTP/1.1 401", nothing},
		{"preflight", priv, "OPTIONS /api HTTP/1.1\r\nHost: " + priv + "\r\nAccess-Control-Request-Method: POST\r\nOrigin: https://x.example\r\n\r\n", "HTTP/1.1 200", "OPTIONS /api HTTP/1.1\r\n"},
		{"websocket without a token", priv, "GET /ws HTTP/1.1\r\nHost: " + priv + "\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", "HTTP/1.1 401", nothing},
		// With the token an h2c upgrade is not passed through: the app
		// gets an ordinary request without Upgrade, and answers it.
		{"h2c with the token", priv, "GET / HTTP/1.1\r\nHost: " + priv + "\r\nX-Froog-Url-Token: " + tok + "\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n", "HTTP/1.1 200", "GET / HTTP/1.1\r\n"},
		{"a websocket with the token inline", priv, "GET /ws?_token=" + tok + " HTTP/1.1\r\nHost: " + priv + "\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", "HTTP/1.1 101", "GET /ws HTTP/1.1\r\n"},
		// Item 2: the token's cookie in spellings parsers disagree on.
		{"cookie space before =", priv, "GET / HTTP/1.1\r\nHost: " + priv + "\r\nCookie: a=1; __Host-froog_url =" + tok + "\r\n\r\n", "HTTP/1.1 200", "\r\nCookie: a=1\r\n"},
		{"cookie tabs and quotes", priv, "GET / HTTP/1.1\r\nHost: " + priv + "\r\nCookie: \t__Host-froog_url\t=\t\"" + tok + "\"; b=2\r\n\r\n", "HTTP/1.1 200", "\r\nCookie: b=2\r\n"},
		{"cookie in capitals", priv, "GET / HTTP/1.1\r\nHost: " + priv + "\r\nCookie: __HOST-FROOG_URL=" + tok + "\r\n\r\n", "HTTP/1.1 200", "GET / HTTP/1.1\r\n"},
		{"two Cookie headers", priv, "GET / HTTP/1.1\r\nHost: " + priv + "\r\nCookie: a=1\r\nCookie: __Host-froog_url=" + tok + "\r\n\r\n", "HTTP/1.1 200", "a=1"},
		{"token header padded", priv, "GET / HTTP/1.1\r\nHost: " + priv + "\r\nx-froog-url-token: \t" + tok + " \r\n\r\n", "HTTP/1.1 200", "GET / HTTP/1.1\r\n"},
		{"token param percent-encoded", priv, "POST /hook?%5Ftoken=" + tok + "&a=1 HTTP/1.1\r\nHost: " + priv + "\r\nContent-Length: 0\r\n\r\n", "HTTP/1.1 200", "POST /hook?a=1 HTTP/1.1\r\n"},
		// Item 3: thousands of names in Connection are refused, quickly.
		{"3000 Connection names", pub, "GET / HTTP/1.1\r\nHost: " + pub + "\r\nConnection: " + strings.Repeat("x-a,", 3000) + "x-a\r\n\r\n", "HTTP/1.1 400", nothing},
		{"1000 spellings of a hop header", pub, "GET / HTTP/1.1\r\nHost: " + pub + "\r\n" + spellings("keep-alive", 1000) + "\r\n", "HTTP/1.1 400", nothing},
		// Item 5: the smuggling guard stays on after an Upgrade header,
		// and a bare LF cannot hide Transfer-Encoding from it.
		{"smuggle after an Upgrade header", pub, "GET / HTTP/1.1\r\nHost: " + pub + "\r\nUpgrade: foo\r\n\r\n" +
			"POST / HTTP/1.1\r\nHost: " + pub + "\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nG", "HTTP/1.1 200", "GET / HTTP/1.1\r\n"},
		{"bare LF hides Transfer-Encoding", pub, "POST / HTTP/1.1\r\nHost: " + pub + "\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n", "HTTP/1.1 400", nothing},
		{"space before the colon", pub, "POST / HTTP/1.1\r\nHost: " + pub + "\r\nTransfer-Encoding : chunked\r\nContent-Length: 3\r\n\r\nabc", "HTTP/1.1 400", nothing},
		{"CR inside a value", pub, "GET / HTTP/1.1\r\nHost: " + pub + "\r\nX-A: b\rX-B: c\r\n\r\n", "HTTP/1.1 400", nothing},
		{"NUL in a value", pub, "GET / HTTP/1.1\r\nHost: " + pub + "\r\nX-A: b\x00c\r\n\r\n", "HTTP/1.1 400", nothing},
		{"obs-fold", pub, "GET / HTTP/1.1\r\nHost: " + pub + "\r\nX-A: b\r\n c\r\n\r\n", "HTTP/1.1 400", nothing},
		{"CL and TE", pub, "POST / HTTP/1.1\r\nHost: " + pub + "\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "HTTP/1.1 400", nothing},
		{"chunk size with a sign", pub, "POST / HTTP/1.1\r\nHost: " + pub + "\r\nTransfer-Encoding: chunked\r\n\r\n+2\r\nab\r\n0\r\n\r\n", "HTTP/1.1 400", ""},
		{"chunk line ending in a bare LF", pub, "POST / HTTP/1.1\r\nHost: " + pub + "\r\nTransfer-Encoding: chunked\r\n\r\n2\nab\r\n0\r\n\r\n", "HTTP/1.1 400", ""},
		// Item 7: the Host's port and the request target.
		{"host port with a userinfo", priv, "GET /?_token=" + tok + " HTTP/1.1\r\nHost: " + priv + ":@evil.example\r\n\r\n", "HTTP/1.1 400", nothing},
		{"absolute-form target", priv, "GET https://evil.example/?_token=" + tok + " HTTP/1.1\r\nHost: " + priv + "\r\n\r\n", "HTTP/1.1 400", nothing},
		{"CONNECT", pub, "CONNECT example.com:443 HTTP/1.1\r\nHost: " + pub + "\r\n\r\n", "HTTP/1.1 403", nothing},
		// Issue #30 item 2: allow_ips is the connection's source address,
		// never a header's, and comes before the token. (An IPv4-mapped
		// source, ::ffff:127.0.0.2, is not in the corpus: the kernel gives
		// one only to a dual-stack listener on [::], and froogd dev's edge
		// here listens on 127.0.0.1; edge's TestPolicyAllowIPsDualStack
		// serves one on [::]. A mapped address in a header is here.)
		{"X-Forwarded-For of an allowed address", grd, "GET / HTTP/1.1\r\nHost: " + grd + "\r\nX-Forwarded-For: 127.0.0.2\r\n\r\n", "HTTP/1.1 403", nothing},
		{"X-Forwarded-For as a list, twice", grd, "GET / HTTP/1.1\r\nHost: " + grd + "\r\nX-Forwarded-For: 127.0.0.2, 127.0.0.2\r\nX-Forwarded-For: 2001:db8::1\r\n\r\n", "HTTP/1.1 403", nothing},
		{"X-Real-IP and the CDNs' client headers", grd, "GET / HTTP/1.1\r\nHost: " + grd + "\r\nX-Real-IP: 127.0.0.2\r\nTrue-Client-IP: 127.0.0.2\r\nCF-Connecting-IP: 127.0.0.2\r\n" +
			"Fastly-Client-IP: 127.0.0.2\r\nX-Client-IP: 127.0.0.2\r\nX-Cluster-Client-IP: 127.0.0.2\r\nX-Originating-IP: 127.0.0.2\r\nClient-IP: 127.0.0.2\r\n\r\n", "HTTP/1.1 403", nothing},
		{"Forwarded for= an allowed IPv4 and IPv6", grd, "GET / HTTP/1.1\r\nHost: " + grd + "\r\nForwarded: for=127.0.0.2;proto=https, for=\"[2001:db8::1]\"\r\n\r\n", "HTTP/1.1 403", nothing},
		{"an IPv4-mapped allowed address in headers", grd, "GET / HTTP/1.1\r\nHost: " + grd + "\r\nForwarded: for=\"[::ffff:127.0.0.2]\"\r\nX-Forwarded-For: ::ffff:127.0.0.2\r\nX-Real-IP: ::ffff:7f00:2\r\n\r\n", "HTTP/1.1 403", nothing},
		{"a PROXY protocol line inside TLS", grd, "PROXY TCP4 127.0.0.2 127.0.0.1 40000 443\r\nGET / HTTP/1.1\r\nHost: " + grd + "\r\n\r\n", "HTTP/1.1 400", nothing},
		{"the URL's token from another address", grd, "GET /?_token=" + gtok + " HTTP/1.1\r\nHost: " + grd + "\r\nX-Forwarded-For: 127.0.0.2\r\n\r\n", "HTTP/1.1 403", nothing},
		{"the token header and a websocket from another address", grd, "GET /ws HTTP/1.1\r\nHost: " + grd + "\r\nX-Froog-Url-Token: " + gtok + "\r\n" +
			"Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nX-Forwarded-For: 127.0.0.2\r\n\r\n", "HTTP/1.1 403", nothing},
		{"another URL's name, the guarded one's Host", pub, "GET / HTTP/1.1\r\nHost: " + grd + "\r\nX-Forwarded-For: 127.0.0.2\r\n\r\n", "HTTP/1.1 403", nothing},
		// Issue #30 item 1: a route's prefix (/api/ to another port) is
		// matched on the path as sent; a path an app could resolve elsewhere matches none and
		// goes to the URL's own app, as sent: never to the route's app
		// outside its prefix. The control: /api/x reaches the route's app.
		{"a route", pub, "GET /api/x HTTP/1.1\r\nHost: " + pub + "\r\n\r\n", "HTTP/1.1 200", nothing},
		{"out of a route by ..", pub, "GET /api/../admin HTTP/1.1\r\nHost: " + pub + "\r\n\r\n", "HTTP/1.1 200", "GET /api/../admin HTTP/1.1\r\n"},
		{"out of a route by %2e%2e", pub, "GET /api/%2e%2E/admin HTTP/1.1\r\nHost: " + pub + "\r\n\r\n", "HTTP/1.1 200", "GET /api/%2e%2E/admin HTTP/1.1\r\n"},
		{"out of a route by ..%2f", pub, "GET /api/..%2Fadmin HTTP/1.1\r\nHost: " + pub + "\r\n\r\n", "HTTP/1.1 200", "GET /api/..%2Fadmin HTTP/1.1\r\n"},
		{"out of a route by ..;", pub, "GET /api/..;/admin HTTP/1.1\r\nHost: " + pub + "\r\n\r\n", "HTTP/1.1 200", "GET /api/..;/admin HTTP/1.1\r\n"},
		{"out of a route by a backslash", pub, "GET /api/..\\admin HTTP/1.1\r\nHost: " + pub + "\r\n\r\n", "HTTP/1.1 200", "GET /api/..\\admin HTTP/1.1\r\n"},
		{"into a route by ..", pub, "GET /x/../api/x HTTP/1.1\r\nHost: " + pub + "\r\n\r\n", "HTTP/1.1 200", "GET /x/../api/x HTTP/1.1\r\n"},
		{"into a route by %61", pub, "GET /%61pi/x HTTP/1.1\r\nHost: " + pub + "\r\n\r\n", "HTTP/1.1 200", "GET /%61pi/x HTTP/1.1\r\n"},
		// The inbox's path prefix, which a signature stands in for the
		// token under: a path an app reads another way (decoded, dot
		// segments resolved) must not take a signed request out of it on
		// a private URL, nor an unsigned one into the app's side of it
		// past the check on a public URL.
		{"a signed request out of the inbox by ..", priv, signed(priv, "/inbox/../admin"), "HTTP/1.1 400", nothing},
		{"out of the inbox by %2e%2e", priv, signed(priv, "/inbox/%2e%2E/admin"), "HTTP/1.1 400", nothing},
		{"out of the inbox by .%2e and %2f", priv, signed(priv, "/inbox/.%2e%2fadmin"), "HTTP/1.1 400", nothing},
		{"out of the inbox by a backslash", priv, signed(priv, "/inbox/..\\admin"), "HTTP/1.1 400", nothing},
		{"out of the inbox by ..;", priv, signed(priv, "/inbox/..;/admin"), "HTTP/1.1 400", nothing},
		{"into the inbox by ..", pub, "POST /x/../inbox/hook HTTP/1.1\r\nHost: " + pub + "\r\nContent-Length: 2\r\n\r\n{}", "HTTP/1.1 400", nothing},
		{"into the inbox by //", pub, "POST //inbox/hook HTTP/1.1\r\nHost: " + pub + "\r\nContent-Length: 2\r\n\r\n{}", "HTTP/1.1 400", nothing},
		{"into the inbox by %69", pub, "POST /%69nbox/hook HTTP/1.1\r\nHost: " + pub + "\r\nContent-Length: 2\r\n\r\n{}", "HTTP/1.1 400", nothing},
		{"into the inbox by %2f", pub, "POST /x%2f..%2Finbox/hook HTTP/1.1\r\nHost: " + pub + "\r\nContent-Length: 2\r\n\r\n{}", "HTTP/1.1 400", nothing},
	}
	for i, tt := range h1cases {
		if !mine(i) {
			continue
		}
		answer := r.h1(tt.host, tt.raw)
		saw := r.appSaw()
		if line := statusLine(answer); !strings.HasPrefix(line, tt.status) {
			t.Errorf("%s: got %q, want %s", tt.name, line, tt.status)
		}
		if n := strings.Count(answer, "HTTP/1.1 400"); n > 1 {
			t.Errorf("%s: %d answers of 400", tt.name, n)
		}
		switch {
		case strings.Contains(saw, tok):
			t.Errorf("%s: the token reached the app:\n%s", tt.name, saw)
		case tt.saw == nothing && saw != "":
			t.Errorf("%s: the app received:\n%q", tt.name, saw)
		case tt.saw != nothing && !strings.Contains(saw, tt.saw):
			t.Errorf("%s: the app received %q, want it to contain %q", tt.name, saw, tt.saw)
		}
		if tt.name == "smuggle after an Upgrade header" && strings.Count(saw, "HTTP/1.1\r\n") != 1 {
			t.Errorf("%s: the app received more than one request:\n%s", tt.name, saw)
		}
		if loc := regexp.MustCompile(`(?i)\r\nLocation: (\S*)`).FindStringSubmatch(answer); loc != nil && !strings.HasPrefix(loc[1], "https://"+tt.host+"/") {
			t.Errorf("%s: redirected to %q", tt.name, loc[1])
		}
	}

	req := func(method, host, path string, extra ...string) [][2]string {
		f := [][2]string{{":method", method}, {":scheme", "https"}, {":authority", host}, {":path", path}}
		for i := 0; i+1 < len(extra); i += 2 {
			f = append(f, [2]string{extra[i], extra[i+1]})
		}
		return f
	}
	h2cases := []struct {
		name   string
		fields [][2]string
		body   string
		status string
		saw    string
	}{
		{"preflight with a body", req("OPTIONS", priv, "/", "access-control-request-method", "POST"), "hello", "401", nothing},
		{"preflight", req("OPTIONS", priv, "/api", "access-control-request-method", "POST"), "", "200", "OPTIONS /api HTTP/1.1\r\n"},
		{"cookie space before =", req("GET", priv, "/", "cookie", "a=1; __Host-froog_url ="+tok), "", "200", "\r\nCookie: a=1\r\n"},
		{"cookie split across fields", req("GET", priv, "/", "cookie", "a=1", "cookie", "__Host-froog_url= "+tok), "", "200", "a=1"},
		{"cookie in capitals", req("GET", priv, "/", "cookie", "__HOST-froog_URL=\""+tok+"\""), "", "200", "GET / HTTP/1.1\r\n"},
		{"token header padded", req("GET", priv, "/", "x-froog-url-token", " "+tok+"\t"), "", "200", "GET / HTTP/1.1\r\n"},
		{"token param percent-encoded", req("POST", priv, "/hook?%5ftoken="+tok), "x", "200", "POST /hook HTTP/1.1\r\n"},
		{"extended CONNECT", req("CONNECT", priv, "/ws", ":protocol", "websocket"), "", "", nothing},
		{"host port with a userinfo", req("GET", priv+":@evil.example", "/?_token="+tok), "", "", nothing},
		{"x-forwarded-for, x-real-ip and forwarded of an allowed address", req("GET", grd, "/", "x-forwarded-for", "127.0.0.2", "x-real-ip", "127.0.0.2",
			"forwarded", "for=127.0.0.2", "true-client-ip", "127.0.0.2"), "", "403", nothing},
		{"the URL's token from another address", req("GET", grd, "/?_token="+gtok, "x-forwarded-for", "127.0.0.2"), "", "403", nothing},
		{"a signed request out of the inbox by %2e%2e", req("POST", priv, "/inbox/%2e%2e/admin", "x-hub-signature-256", hookSig), hook, "400", nothing},
		{"into the inbox by %69", req("POST", pub, "/%69nbox/hook"), "{}", "400", nothing},
		{"out of a route by %2e%2e", req("GET", pub, "/api/%2e%2e/admin"), "", "200", "GET /api/%2e%2e/admin HTTP/1.1\r\n"},
	}
	for i, tt := range h2cases {
		if !mine(i) {
			continue
		}
		status, body := r.h2(priv, tt.fields, tt.body)
		saw := r.appSaw()
		if tt.status != "" && status != tt.status {
			t.Errorf("h2 %s: status %q, want %s (%s)", tt.name, status, tt.status, body)
		}
		if tt.status == "" && strings.HasPrefix(status, "2") {
			t.Errorf("h2 %s: status %q, want a refusal", tt.name, status)
		}
		switch {
		case strings.Contains(saw, tok):
			t.Errorf("h2 %s: the token reached the app:\n%s", tt.name, saw)
		case tt.saw == nothing && saw != "":
			t.Errorf("h2 %s: the app received:\n%q", tt.name, saw)
		case tt.saw != nothing && !strings.Contains(saw, tt.saw):
			t.Errorf("h2 %s: the app received %q, want it to contain %q", tt.name, saw, tt.saw)
		}
	}

	// The control of the inbox's rows: the same signed body at the
	// inbox's own path is stored (202) and delivered, so what refused
	// them was their path, not their signature.
	if mine(0) {
		if line := statusLine(r.h1(priv, signed(priv, "/inbox/hook"))); !strings.HasPrefix(line, "HTTP/1.1 202") {
			t.Errorf("the inbox's control: got %q, want HTTP/1.1 202", line)
		}
		var delivered string
		if !wait.Until(15*time.Second, func() bool {
			delivered += r.appSaw()
			return strings.Contains(delivered, "POST /inbox/hook HTTP/1.1\r\n") && strings.HasSuffix(delivered, hook)
		}) {
			t.Errorf("the inbox's control: the app received %q, want the signed request delivered", delivered)
		}
	}

	// Issue #24 item 6a: the token riding in elsewhere than its three
	// carriers, and a client's claims of where it is. Each case goes over
	// both protocols with the same fields (lowercase names over HTTP/2);
	// what the app received is compared without case.
	tokHeader := [2]string{"x-froog-url-token", tok}
	leaks := []struct {
		name   string
		host   string
		fields [][2]string
		saw    string   // the app's log contains it
		absent []string // the app's log contains none of them
	}{
		{"Referer with the token in its query", priv, [][2]string{tokHeader, {"Referer", "https://" + priv + "/page?a=1&_token=" + tok + "&b=2"}},
			"referer: https://" + priv + "/page?a=1&b=2\r\n", nil},
		{"Referer with the token's name percent-encoded", priv, [][2]string{tokHeader, {"Referer", "https://" + priv + "/page?%5Ftoken=" + tok}},
			"referer: https://" + priv + "/page\r\n", nil},
		{"Referer with the token after #", priv, [][2]string{tokHeader, {"Referer", "https://" + priv + "/page?a=1#_token=" + tok}},
			"referer: https://" + priv + "/page?a=1\r\n", nil},
		{"Referer to a public URL from a private page", pub, [][2]string{{"Referer", "https://" + priv + "/?_token=" + tok}},
			"referer: https://" + priv + "/\r\n", nil},
		{"Origin with the token", priv, [][2]string{tokHeader, {"Origin", "https://" + priv + "?_token=" + tok}}, "get /page http/1.1\r\n", []string{"origin:"}},
		{"the token in a header of the app's", priv, [][2]string{tokHeader, {"X-Debug", "sent " + tok}, {"Authorization", "Bearer " + tok}}, "get /page http/1.1\r\n", []string{"x-debug:", "authorization:"}},
		{"the token in another cookie", priv, [][2]string{{"Cookie", "a=1; copy=" + tok + "; __Host-froog_url=" + tok}}, "\r\ncookie: a=1\r\n", nil},
		{"the token header in capitals, twice", priv, [][2]string{{"X-FROOG-URL-TOKEN", tok}, {"x-froog-url-token", tok}}, "get /page http/1.1\r\n", []string{"x-froog-url-token"}},
		{"a client's Forwarded and X-Real-IP", pub, [][2]string{{"Forwarded", "for=6.6.6.6;host=evil.example;proto=http"}, {"X-Real-IP", "6.6.6.6"},
			{"X-Forwarded-Port", "1"}, {"X-Forwarded-Server", "evil.example"}, {"True-Client-IP", "6.6.6.6"}, {"X-Client-IP", "6.6.6.6"}},
			"get /page http/1.1\r\n", []string{"6.6.6.6", "evil.example", "forwarded:", "x-forwarded-port", "x-forwarded-server"}},
	}
	for i, tt := range leaks {
		if !mine(i) {
			continue
		}
		raw := "GET /page HTTP/1.1\r\nHost: " + tt.host + "\r\n"
		fields := req("GET", tt.host, "/page")
		for _, f := range tt.fields {
			raw += f[0] + ": " + f[1] + "\r\n"
			fields = append(fields, [2]string{strings.ToLower(f[0]), f[1]})
		}
		for _, proto := range []string{"HTTP/1.1", "HTTP/2"} {
			var status string
			if proto == "HTTP/2" {
				status, _ = r.h2(tt.host, fields, "")
			} else {
				status, _, _ = strings.Cut(strings.TrimPrefix(statusLine(r.h1(tt.host, raw+"\r\n")), "HTTP/1.1 "), " ")
			}
			saw := strings.ToLower(r.appSaw())
			if status != "200" {
				t.Errorf("%s, %s: status %q, want 200", tt.name, proto, status)
			}
			if strings.Contains(saw, strings.ToLower(tok)) {
				t.Errorf("%s, %s: the token reached the app:\n%s", tt.name, proto, saw)
			}
			if !strings.Contains(saw, tt.saw) {
				t.Errorf("%s, %s: the app received %q, want it to contain %q", tt.name, proto, saw, tt.saw)
			}
			for _, a := range tt.absent {
				if strings.Contains(saw, a) {
					t.Errorf("%s, %s: the app received %q, want no %q", tt.name, proto, saw, a)
				}
			}
		}
	}

	// Issue #24 item 7c: TLS 1.2 with nothing but CBC suites is refused
	// (Lucky13); an AEAD suite gets in.
	var cbc []uint16
	for _, cs := range append(tls.CipherSuites(), tls.InsecureCipherSuites()...) {
		if strings.Contains(cs.Name, "_CBC_") {
			cbc = append(cbc, cs.ID)
		}
	}
	for i, tt := range []struct {
		name   string
		suites []uint16
		ok     bool
	}{
		{"CBC suites only", cbc, false},
		{"AES-GCM", []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}, true},
	} {
		if !mine(i) {
			continue
		}
		conn, err := tls.Dial("tcp", r.edge, &tls.Config{RootCAs: r.pool, ServerName: pub, MaxVersion: tls.VersionTLS12, CipherSuites: tt.suites})
		if err == nil {
			conn.Close()
		}
		if (err == nil) != tt.ok {
			t.Errorf("TLS 1.2 offering %s: handshake error %v, want success: %v", tt.name, err, tt.ok)
		}
	}
}

// spellings gives n header lines named name in n different cases.
func spellings(name string, n int) string {
	var b strings.Builder
	for i := range n {
		s := []byte(name)
		for j := range s {
			if i>>(j%10)&1 == 1 && s[j] >= 'a' && s[j] <= 'z' {
				s[j] -= 'a' - 'A'
			}
		}
		fmt.Fprintf(&b, "%s: %d\r\n", s, i)
	}
	return b.String()
}
