package e2e_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"froog.tech/froog/internal/browser"
	"froog.tech/froog/internal/loopback"
	"froog.tech/froog/internal/wait"
	"froog.tech/froog/store/pg/pgtest"
)

// The binaries under test: froogd, and the froog CLI that the TestCLI…
// tests run against it (through cli).
var froogd, froogCLI string

// buildFlags: froogd and the CLI are built as shipped, without the race
// detector, which multiplies their CPU several times: the end-to-end
// tests run dozens of froogd processes at once, and with -race they
// took most of the machine's CPU, slowing every package beside them.
// The race detector checks the same code in-process, in each package's
// own tests (edge, api, hostctl, tunnel, …), which make test runs with
// -race. FROOG_E2E_RACE=1 builds them with it. Both are test builds (the
// froogtest tag: FROOG_TEST_CLOCK_FILE is honoured).
func buildFlags() []string {
	if os.Getenv("FROOG_E2E_RACE") != "" {
		return []string{"-tags", testBuildTag, "-race"}
	}
	return []string{"-tags", testBuildTag, "-trimpath"}
}

// froogdPkg and froogPkg are the packages of the binaries under test.
const (
	froogdPkg = "froog.tech/froog/cmd/froogd"
	froogPkg  = "froog.tech/froog/cmd/froog"
)

// testBuildTag makes a test build of froogd (cmd/froogd/testclock.go).
const testBuildTag = "froogtest"

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		// The short tier runs in-process tests only: these build and run
		// the froogd binary end to end (make test runs them).
		fmt.Println("-short: e2e's tests run the froogd binary end to end; make test runs them")
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "froogd-test")
	if err != nil {
		panic(err)
	}
	// One go build for both: each binary lands in dir under its
	// package's name.
	froogd, froogCLI = filepath.Join(dir, "froogd"), filepath.Join(dir, "froog")
	pkgs := []string{froogPkg, froogdPkg}
	if bin := os.Getenv("FROOGD_BIN"); bin != "" {
		froogd = bin // another build under test, e.g. an earlier version's
		pkgs = pkgs[:1]
	}
	if out, err := exec.Command("go", append(append(append([]string{"build"}, buildFlags()...), "-o", dir+string(filepath.Separator)), pkgs...)...).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build %v: %v\n%s", pkgs, err, out)
		os.Exit(1)
	}
	if err := checkContract(); err != nil {
		fmt.Fprintf(os.Stderr, "the OpenAPI document: %v\n", err)
		os.Exit(1)
	}
	code := m.Run()
	if contractBroken() && code == 0 {
		code = 1
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

func TestDevRefusesBadFlags(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(froogd, "dev", "--data", t.TempDir(), "--api-addr", "nope", "--domain", "x").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--api-addr") || !strings.Contains(string(out), "--domain") {
		t.Fatalf("got %v: %s; want both problems reported", err, out)
	}
	cmd := exec.Command(froogd, "dev", "--data", t.TempDir())
	cmd.Env = append(os.Environ(), "FROOG_EDGE_ADDR=bad")
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "--edge-addr") {
		t.Fatalf("FROOG_EDGE_ADDR=bad: got %v: %s", err, out)
	}
}

func TestDataFolderInUse(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	// Every address on a port of its own: a default (8443) would meet a
	// test beside it, and "address already in use" is not the answer.
	loopback := []string{"--api-addr", "127.0.0.1:0", "--edge-addr", "127.0.0.1:0", "--edge-http-addr", "127.0.0.1:0"}
	start(t, devReady, append([]string{"dev", "--data", data}, loopback...)...)
	out, err := exec.Command(froogd, append([]string{"dev", "--data", data}, loopback...)...).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "data folder "+data+"/store is in use") {
		t.Fatalf("second froogd dev on one folder: %v: %s", err, out)
	}
}

// Self-hosting on Postgres: migrate, an account, a key, the API.
func TestPostgresRoles(t *testing.T) {
	t.Parallel()
	db := pgtest.URLWithSchema(pgtest.Schema(t))
	froogdRun(t, "migrate", "--database-url", db)
	froogdRun(t, "migrate", "--database-url", db)
	acct := froogdRun(t, "admin", "create-account", "--database-url", db, "--name", "acme")
	key := froogdRun(t, "admin", "api-key", "create", "--database-url", db, "--account", acct, "--preset", "ci", "--ttl", "30d")
	keyFile := filepath.Join(t.TempDir(), "secret.key")
	os.WriteFile(keyFile, bytes.Repeat([]byte{7}, 32), 0o600)
	ctlKey := writeControlKey(t)
	_, m := start(t, regexp.MustCompile(`on (http://\S+)/v1`), "api", "--database-url", db, "--api-addr", "127.0.0.1:0",
		"--domain", "froogusercontent.test", "--secret-key-file", keyFile, "--control-key-file", ctlKey)
	c := client{t: t, base: m[1], key: key}
	c.call("POST", "/v1/sandboxes", `{"name": "ci-1"}`, 202, nil)
	var u struct{ URL string }
	c.call("POST", "/v1/sandboxes/ci-1/urls", `{"port": 8080, "public": true}`, 201, &u)
	if !strings.HasPrefix(u.URL, "https://ci-1-8080-") || !strings.HasSuffix(u.URL, ".froogusercontent.test/") {
		t.Fatalf("url %s", u.URL)
	}
	c.call("GET", "/v1/audit", "", 403, nil) // ci keys cannot read the audit log
	res, err := http.Get(m[1] + "/readyz")
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("readyz: %v %v", res, err)
	}

	// Bad admin input is refused with every problem named.
	out, err := exec.Command(froogd, "admin", "api-key", "create", "--database-url", db, "--preset", "root", "--ttl", "400d").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--account") || !strings.Contains(string(out), "root") || !strings.Contains(string(out), "400d") {
		t.Fatalf("bad api-key create: %v: %s", err, out)
	}
}

// The hostctl issue's walkthrough against the real binary, with both
// stores: a sandbox runs, runs commands and a server, stops and starts
// keeping its files, and its 60 s auto-stop stops it on time — on the
// roles' test clock (FROOG_TEST_CLOCK_FILE), moved past the minute
// rather than waited for.
func TestSandboxesRun(t *testing.T) {
	t.Parallel()
	// withClock runs froogd args with its clock read from the file clock.
	withClock := func(t *testing.T, clock string, re *regexp.Regexp, args ...string) []string {
		cmd := exec.Command(froogd, args...)
		cmd.Env = append(os.Environ(), "FROOG_TEST_CLOCK_FILE="+clock)
		_, m := startCmd(t, re, cmd, args)
		return m
	}
	t.Run("embedded", func(t *testing.T) {
		t.Parallel()
		d := startDev(t, devOptions{clock: true})
		sandboxWalkthrough(t, d.c, d.clock)
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		db, key, ctlKey, secret := selfHosted(t)
		clock := clockFile(t)
		withClock(t, clock, regexp.MustCompile(`hostctl h1 running`), "hostctl", "--database-url", db, "--host-name", "h1",
			"--data", t.TempDir(), "--control-key-file", ctlKey)
		m := withClock(t, clock, regexp.MustCompile(`on (http://\S+)/v1`), "api", "--database-url", db, "--api-addr", "127.0.0.1:0",
			"--domain", "froogusercontent.test", "--secret-key-file", secret, "--control-key-file", ctlKey)
		sandboxWalkthrough(t, client{t: t, base: m[1], key: key}, clock)
	})
}

// sandboxWalkthrough is TestSandboxesRun's walkthrough, against froogd
// roles that read their clock from the file clock.
func sandboxWalkthrough(t *testing.T, c client, clock string) {
	state := func() string {
		var sb struct{ State string }
		c.call("GET", "/v1/sandboxes/e2e", "", 200, &sb)
		return sb.State
	}
	waitState := func(want string, within time.Duration) time.Duration {
		t.Helper()
		start := time.Now()
		if !wait.Until(within, func() bool { return state() == want }) {
			t.Fatalf("not %s after %v (it is %s)", want, within, state())
		}
		return time.Since(start)
	}
	// ahead moves the roles' clock to d after started (the real clock
	// goes on meanwhile: the move is what is left of d).
	ahead := func(started time.Time, d time.Duration) {
		t.Helper()
		if err := os.WriteFile(clock, []byte((d - time.Since(started)).String()), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c.call("POST", "/v1/sandboxes", `{"name": "e2e", "ttl_secs": 60}`, 202, nil)
	t.Logf("created to running in %v", waitState("running", 5*time.Second))

	var r struct {
		ExitCode int `json:"exit_code"`
		Stdout   string
	}
	c.call("POST", "/v1/sandboxes/e2e/exec", `{"command": "echo hi"}`, 200, &r)
	if r.Stdout != "hi\n" || r.ExitCode != 0 {
		t.Fatalf("echo hi: %+v", r)
	}
	serve(t, c, "python3 -m http.server %d --bind 127.0.0.1")

	c.call("POST", "/v1/sandboxes/e2e/exec", `{"command": "echo kept > notes.txt"}`, 200, nil)
	c.call("POST", "/v1/sandboxes/e2e/stop", "", 202, nil)
	waitState("stopped", 10*time.Second)
	c.call("POST", "/v1/sandboxes/e2e/start", "", 202, nil)
	waitState("running", 10*time.Second)
	started := time.Now()
	c.call("POST", "/v1/sandboxes/e2e/exec", `{"command": "cat notes.txt"}`, 200, &r)
	if r.Stdout != "kept\n" {
		t.Fatalf("file after stop and start: %q", r.Stdout)
	}

	// The 60 s auto-stop counts from that start. 54 s on, it still runs
	// (hostctl looks every second under the test clock: two looks; the
	// start it counts from is a little before started)...
	ahead(started, 54*time.Second)
	if wait.Until(2500*time.Millisecond, func() bool { return state() != "running" }) {
		t.Fatalf("stopped early: %s 54 s after the start", state())
	}
	// ... and past the minute it stops.
	ahead(started, 61*time.Second)
	took := waitState("stopped", 20*time.Second)
	t.Logf("auto-stop of 60 s stopped it %v after the clock passed the minute", took)
	var audit struct {
		Events []struct{ Action, Actor string } `json:"events"`
	}
	c.call("GET", "/v1/audit", "", 200, &audit)
	if len(audit.Events) == 0 || audit.Events[0].Action != "sandbox.stop" || audit.Events[0].Actor != "auto-stop" {
		t.Fatalf("newest audit event: %+v", audit.Events[:1])
	}
}

// headerEcho is the app the sandbox runs: it answers with what it saw.
// Its listen backlog is a real server's (nginx's and Node's 511), not
// socketserver's 5: with 5, h2spec's 250-stream burst had most of the
// edge's connects dropped and retried by TCP (1 s, 3 s, 7 s), and the
// requests after the burst waited past h2spec's timeout.
const headerEcho = `import http.server, json, sys
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        with open("seen.log", "a") as f:
            f.write(self.path + " cookie=" + (self.headers.get("Cookie") or "") + "\n")
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n).decode() if n else ""
        b = json.dumps({"path": self.path, "headers": [[k, v] for k, v in self.headers.items()], "body": body}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)
    do_POST = do_GET
    def log_message(self, *a): pass
class S(http.server.ThreadingHTTPServer):
    request_queue_size = 511
S(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
`

// wsEcho is a websocket echo server with no library: the handshake and
// frames of RFC 6455, as an app in a sandbox might do it. A request that
// is not an upgrade gets 200 "ws-echo TARGET cookie=COOKIE" and the
// connection closes.
const wsEcho = `import socket, threading, hashlib, base64, struct, sys
G = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
def recvn(c, n):
    b = bytearray()
    while len(b) < n:
        x = c.recv(min(n - len(b), 1 << 16))
        if not x: raise EOFError
        b += x
    return bytes(b)
def serve(c):
    try:
        h = b""
        while b"\r\n\r\n" not in h:
            x = c.recv(4096)
            if not x: return
            h += x
        lines = h.split(b"\r\n")
        field = lambda name: [l.split(b":", 1)[1].strip() for l in lines if l.lower().startswith(name + b":")]
        if not field(b"sec-websocket-key"):
            b = b"ws-echo " + lines[0].split(b" ")[1] + b" cookie=" + b"".join(field(b"cookie"))
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\nContent-Length: %d\r\n\r\n" % len(b) + b)
            return
        key = field(b"sec-websocket-key")[0]
        acc = base64.b64encode(hashlib.sha1(key + G).digest())
        c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " + acc + b"\r\n\r\n")
        while True:
            b0, b1 = recvn(c, 2)
            op, n = b0 & 15, b1 & 127
            if n == 126: n = struct.unpack(">H", recvn(c, 2))[0]
            elif n == 127: n = struct.unpack(">Q", recvn(c, 8))[0]
            mask = recvn(c, 4) if b1 & 128 else b"\0\0\0\0"
            data = recvn(c, n)
            m = (mask * (n // 4 + 1))[:n]
            data = (int.from_bytes(data, "big") ^ int.from_bytes(m, "big")).to_bytes(n, "big")
            if op == 8: return
            hdr = bytes([b0 & 0x8f])  # FIN and opcode as sent: fragments stay fragments
            if n < 126: hdr += bytes([n])
            elif n < 65536: hdr += bytes([126]) + struct.pack(">H", n)
            else: hdr += bytes([127]) + struct.pack(">Q", n)
            c.sendall(hdr + data)
    except Exception: pass
    finally: c.close()
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(16)
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
`

// The edge issue's end-to-end checks against the real binary: a private
// URL through froogd dev's edge (HTTP/2 and HTTP/1.1), and a viewer token
// revoked under two `froogd edge` processes on one Postgres.
func TestPublicURLs(t *testing.T) {
	t.Parallel()
	t.Run("dev", func(t *testing.T) {
		t.Parallel()
		metrics := fmt.Sprintf("127.0.0.1:%d", loopback.FreePort(t))
		d := startDev(t, devOptions{args: []string{"--metrics-addr", metrics}})
		data, edge := d.data, d.edge
		defer func() {
			res, err := http.Get("http://" + metrics + "/metrics")
			if err != nil {
				t.Fatalf("metrics: %v", err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			for _, want := range []string{`froog_edge_requests_total{class="2xx"}`, "froog_edge_routes 2", "froog_edge_request_duration_seconds_count",
				"froog_edge_request_bytes_total", "froog_edge_response_bytes_total", "froog_edge_websockets_open 0", "froog_tunnel_connections 1", "froog_tunnel_dial_seconds_count"} {
				if !strings.Contains(string(b), want) {
					t.Errorf("metrics lack %s", want)
				}
			}
		}()
		c := d.c
		link, host := hostEcho(t, c)
		for _, h2 := range []bool{true, false} {
			web := edgeClient(t, edge, filepath.Join(data, "ca.pem"), h2)
			if res, _ := visit(t, web, "GET", "https://"+host+"/"); res.StatusCode != 401 {
				t.Fatalf("no token: %d", res.StatusCode)
			}
			res, _ := visit(t, web, "GET", link)
			cookie := res.Header.Get("Set-Cookie")
			if res.StatusCode != 302 || !strings.HasPrefix(cookie, "__Host-froog_url=pt_") {
				t.Fatalf("the link: %d %q", res.StatusCode, cookie)
			}
			token := strings.TrimPrefix(strings.SplitN(cookie, ";", 2)[0], "__Host-froog_url=")
			res, body := visit(t, web, "GET", "https://"+host+"/x?y=1", "Cookie", "a=1; __Host-froog_url="+token)
			if res.StatusCode != 200 || !strings.Contains(body, `"path": "/x?y=1"`) || !strings.Contains(body, `["Cookie", "a=1"]`) || strings.Contains(body, token) {
				t.Fatalf("with the cookie: %d %s", res.StatusCode, body)
			}
			res, body = visit(t, web, "GET", "https://"+host+"/", "X-Froog-Url-Token", token)
			if res.StatusCode != 200 || strings.Contains(body, token) || strings.Contains(strings.ToLower(body), "x-froog-url-token") {
				t.Fatalf("with the header: %d %s", res.StatusCode, body)
			}
			if want := map[bool]int{true: 2, false: 1}[h2]; res.ProtoMajor != want {
				t.Fatalf("protocol %s", res.Proto)
			}
		}

		// A websocket echo of 1 MiB messages, the token inline.
		wsPort := loopback.FreePort(t)
		script, _ := json.Marshal(wsEcho)
		c.call("POST", "/v1/sandboxes/e2e/exec", `{"command": "cat > ws.py", "stdin": `+string(script)+`}`, 200, nil)
		c.call("POST", "/v1/sandboxes/e2e/jobs", fmt.Sprintf(`{"command": "python3 ws.py %d"}`, wsPort), 201, nil)
		var w struct{ Ready bool }
		c.call("POST", "/v1/sandboxes/e2e/wait", fmt.Sprintf(`{"port": %d, "timeout_secs": 30}`, wsPort), 200, &w)
		var wsURL struct{ URL string }
		c.call("POST", "/v1/sandboxes/e2e/urls", fmt.Sprintf(`{"port": %d}`, wsPort), 201, &wsURL)
		pool := x509.NewCertPool()
		caPEM, _ := os.ReadFile(filepath.Join(data, "ca.pem"))
		pool.AppendCertsFromPEM(caPEM)
		dialer := websocket.Dialer{NetDialContext: func(ctx context.Context, n, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, n, edge)
		},
			TLSClientConfig: &tls.Config{RootCAs: pool, NextProtos: []string{"http/1.1"}}}
		ws, _, err := dialer.Dial(strings.Replace(wsURL.URL, "https://", "wss://", 1), nil)
		if err != nil {
			t.Fatalf("websocket through froogd: %v", err)
		}
		ws.SetReadLimit(4 << 20)
		msg := bytes.Repeat([]byte("froog-ws"), 1<<17) // 1 MiB
		for i := 0; i < 2; i++ {
			if err := ws.WriteMessage(websocket.BinaryMessage, msg); err != nil {
				t.Fatal(err)
			}
			if _, got, err := ws.ReadMessage(); err != nil || !bytes.Equal(got, msg) {
				t.Fatalf("1 MiB echo %d: %d bytes, %v", i, len(got), err)
			}
		}
		ws.Close()

		// The private link inside another site's iframe, in Chromium: the
		// app sees the page, without the token in the address or the cookie.
		site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprintf(w, `<!doctype html><title>site</title><iframe src="%s"></iframe>`, strings.Replace(link, "/?_token=", "/framed?_token=", 1))
		}))
		defer site.Close()
		_, edgePort, _ := net.SplitHostPort(edge)
		_, sitePort, _ := net.SplitHostPort(site.Listener.Addr().String())
		browser.Chromium(t, "MAP *.froog.test 127.0.0.1:"+edgePort+", MAP embedder.example 127.0.0.1:"+sitePort,
			"--virtual-time-budget=5000", "--dump-dom", "http://embedder.example/")
		var seen struct{ Stdout string }
		c.call("POST", "/v1/sandboxes/e2e/exec", `{"command": "grep ^/framed seen.log"}`, 200, &seen)
		if strings.TrimSpace(seen.Stdout) != "/framed cookie=" {
			t.Fatalf("inside the iframe the app saw %q; want /framed once, without token or cookie", seen.Stdout)
		}
	})
	t.Run("two-edges-on-postgres", func(t *testing.T) {
		t.Parallel()
		db, key, ctlKey, secret := selfHosted(t)
		caDir := t.TempDir()
		start(t, regexp.MustCompile(`hostctl h1 running`), "hostctl", "--database-url", db, "--host-name", "h1", "--data", t.TempDir(), "--control-key-file", ctlKey)
		_, m := start(t, regexp.MustCompile(`on (http://\S+)/v1`), "api", "--database-url", db, "--api-addr", "127.0.0.1:0",
			"--domain", "froog.test", "--secret-key-file", secret, "--control-key-file", ctlKey)
		edgeRE := regexp.MustCompile(`froog edge on https://(\S+) `)
		var edges []*http.Client
		for i := 0; i < 2; i++ {
			_, e := start(t, edgeRE, "edge", "--database-url", db, "--edge-addr", "127.0.0.1:0", "--edge-http-addr", "127.0.0.1:0",
				"--domain", "froog.test", "--ca-dir", caDir, "--control-key-file", ctlKey)
			edges = append(edges, edgeClient(t, e[1], filepath.Join(caDir, "ca.pem"), true))
		}
		c := client{t: t, base: m[1], key: key}
		_, host := hostEcho(t, c)
		var tok struct{ ID, Token string }
		c.call("POST", "/v1/sandboxes/e2e/urls/"+echoPort(t, c)+"/tokens", `{"ttl_secs": 600, "label": "alice"}`, 201, &tok)
		// Each edge follows the store on its own: until its table has the
		// URL it has no certificate for the name (the handshake fails),
		// then the token counts from when its table has the token.
		answers := func(i int, want int, what string) {
			var got string
			if !wait.Until(15*time.Second, func() bool {
				req, _ := http.NewRequest("GET", "https://"+host+"/", nil)
				req.Header.Set("Cookie", "__Host-froog_url="+tok.Token)
				res, err := edges[i].Do(req)
				if err != nil {
					got = err.Error()
					return false
				}
				res.Body.Close()
				got = res.Status
				return res.StatusCode == want
			}) {
				t.Fatalf("edge %d never %s: the last answer %s", i, what, got)
			}
		}
		for i := range edges {
			answers(i, 200, "let alice in")
		}
		c.call("DELETE", "/v1/sandboxes/e2e/urls/"+echoPort(t, c)+"/tokens/"+tok.ID, "", 200, nil)
		for i := range edges {
			answers(i, 401, "shut alice out")
		}
	})
}

// hostEcho creates sandbox e2e running the header echo, hosts its port
// privately, and returns the link and the host name.
func hostEcho(t *testing.T, c client) (string, string) {
	newSandbox(t, c, "e2e", 15*time.Second)
	script, _ := json.Marshal(headerEcho)
	c.call("POST", "/v1/sandboxes/e2e/exec", `{"command": "cat > echo.py", "stdin": `+string(script)+`}`, 200, nil)
	port := serve(t, c, "python3 echo.py %d")
	var u struct{ URL, Host string }
	c.call("POST", "/v1/sandboxes/e2e/urls", fmt.Sprintf(`{"port": %d}`, port), 201, &u)
	return u.URL, u.Host
}

// echoPort is the port of e2e's one URL.
func echoPort(t *testing.T, c client) string {
	var urls []struct{ Port int }
	c.call("GET", "/v1/sandboxes/e2e/urls", "", 200, &urls)
	if len(urls) != 1 {
		t.Fatalf("urls: %+v", urls)
	}
	return strconv.Itoa(urls[0].Port)
}

// serve starts a server in e2e as a job, command with %d for a free
// port, waits until the port listens, and returns it. When it never does,
// the job's state and output say why.
func serve(t *testing.T, c client, command string) int {
	t.Helper()
	port := loopback.FreePort(t)
	body, _ := json.Marshal(map[string]string{"command": fmt.Sprintf(command, port)})
	var job struct{ ID string }
	c.call("POST", "/v1/sandboxes/e2e/jobs", string(body), 201, &job)
	var w struct{ Ready bool }
	c.call("POST", "/v1/sandboxes/e2e/wait", fmt.Sprintf(`{"port": %d, "timeout_secs": 30}`, port), 200, &w)
	if !w.Ready {
		var j struct{ State, Output string }
		c.call("GET", "/v1/sandboxes/e2e/jobs/"+job.ID, "", 200, &j)
		t.Fatalf("the server's port %d never listened; its job is %s: %q", port, j.State, j.Output)
	}
	return port
}
