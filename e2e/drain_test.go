package e2e_test

import (
	"errors"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"froog.tech/froog/internal/wait"
)

// drainApp serves GET /slow: 10 pieces 0.3 s apart (3 s, with a
// Content-Length), and GET /forever: a chunk every 0.2 s, never ending.
const drainApp = `import http.server, sys, time
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        self.send_response(200)
        if self.path == "/slow":
            self.send_header("Content-Length", "10")
            self.end_headers()
            for _ in range(10):
                self.wfile.write(b"x"); self.wfile.flush(); time.sleep(0.3)
            return
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        while True:
            self.wfile.write(b"1\r\nx\r\n"); self.wfile.flush(); time.sleep(0.2)
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
`

// drainEdge starts a cluster whose one edge has an admin listener and
// the drain flags given, with a sandbox serving drainApp and a websocket
// echo; it returns the edge, its address and admin URL, the CA file and
// the two URL hosts.
func drainEdge(t *testing.T, drainArgs ...string) (edge *proc, addr, admin, caFile, host, wsHost string) {
	t.Helper()
	db, key, ctlKey, secret := selfHosted(t)
	start(t, hostctlReady, "hostctl", "--database-url", db, "--host-name", "h1", "--data", t.TempDir(), "--control-key-file", ctlKey)
	_, m := start(t, regexp.MustCompile(`on (http://\S+)/v1`), "api", "--database-url", db, "--api-addr", "127.0.0.1:0",
		"--domain", "froog.test", "--secret-key-file", secret, "--control-key-file", ctlKey)
	c := client{t: t, base: m[1], key: key}
	caDir := t.TempDir()
	edge, e := start(t, regexp.MustCompile(`froog edge on https://(\S+) (?s:.*)`+adminRE), append([]string{"edge", "--database-url", db,
		"--edge-addr", "127.0.0.1:0", "--edge-http-addr", "127.0.0.1:0", "--domain", "froog.test", "--ca-dir", caDir,
		"--control-key-file", ctlKey, "--metrics-addr", "127.0.0.1:0"}, drainArgs...)...)
	addr, admin, caFile = e[1], e[2], caDir+"/ca.pem"
	newSandbox(t, c, "dr", 10*time.Second)
	host = publicURL(t, c, "dr", serveApp(t, c, "dr", "drain.py", drainApp))
	wsHost = publicURL(t, c, "dr", serveApp(t, c, "dr", "ws.py", wsEcho))
	web := edgeClient(t, addr, caFile, false)
	wait.For(t, 15*time.Second, "the edge serves the app and is ready", func() bool {
		res, err := web.Get("https://" + host + "/slow")
		if err != nil {
			return false
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode == 200 && getReadyz(admin).code == 200
	})
	return edge, addr, admin, caFile, host, wsHost
}

// The edge drains on SIGTERM: /readyz fails at once (naming the drain),
// the websocket gets a close frame 1001, new connections are refused, a
// slow request in flight completes, and one that would never end is cut
// at --drain-secs; then the edge exits cleanly, saying it cut it.
func TestEdgeDrain(t *testing.T) {
	t.Parallel()
	edge, addr, admin, caFile, host, wsHost := drainEdge(t, "--drain-secs", "8")
	web := edgeClient(t, addr, caFile, false)

	// In flight at the signal: a slow download (its first byte read), an
	// endless one, and a websocket.
	open := func(path string) *http.Response {
		res, err := web.Get("https://" + host + path)
		if err != nil || res.StatusCode != 200 {
			t.Fatalf("GET %s: %v %v", path, res, err)
		}
		if _, err := io.ReadFull(res.Body, make([]byte, 1)); err != nil {
			t.Fatalf("GET %s: first byte: %v", path, err)
		}
		return res
	}
	slow, forever := open("/slow"), open("/forever")
	type result struct {
		n   int
		err error
	}
	read := func(res *http.Response) chan result {
		c := make(chan result, 1)
		go func() {
			defer res.Body.Close()
			b, err := io.ReadAll(res.Body)
			c <- result{len(b) + 1, err}
		}()
		return c
	}
	slowDone, foreverDone := read(slow), read(forever)
	ws := dialEdgeWS(t, addr, caFile, "wss://"+wsHost+"/")
	if err := ws.WriteMessage(websocket.TextMessage, []byte("hi")); err != nil {
		t.Fatal(err)
	}
	if _, msg, err := ws.ReadMessage(); err != nil || string(msg) != "hi" {
		t.Fatalf("websocket echo: %q %v", msg, err)
	}

	signalled := time.Now()
	exited := edge.term()

	wait.For(t, 5*time.Second, "/readyz fails, naming the drain", func() bool {
		r := getReadyz(admin)
		return r.code == 503 && r.Checks["draining"] != "ok" && r.Checks["draining"] != ""
	})
	ws.SetReadDeadline(time.Now().Add(15 * time.Second))
	_, _, err := ws.ReadMessage()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.CloseGoingAway {
		t.Errorf("websocket: %v, want a close frame 1001 (going away)", err)
	}
	wait.For(t, 5*time.Second, "the edge refuses new connections", func() bool {
		_, _, err := get(edgeClient(t, addr, caFile, false), "https://"+host+"/slow")
		return err != nil
	})
	// Still draining: the admin listener answers until the very end.
	if r := getReadyz(admin); r.code != 503 {
		t.Errorf("/readyz while requests are in flight: %+v, want 503", r)
	}

	if r := <-slowDone; r.err != nil || r.n != 10 {
		t.Errorf("the slow request in flight at SIGTERM: %d of 10 bytes, %v; want it whole", r.n, r.err)
	}
	if r := <-foreverDone; r.err == nil {
		t.Errorf("the endless request ended cleanly after %d bytes; want it cut at the drain timeout", r.n)
	}
	edge.exitsClean(t, exited, 30*time.Second) // --drain-secs 8
	t.Logf("the edge exited %v after SIGTERM (--drain-secs 8)", time.Since(signalled).Round(time.Millisecond))
	if logs := edge.stderr.String(); !strings.Contains(logs, `"msg":"edge draining"`) || !strings.Contains(logs, "cut") {
		t.Errorf("the edge's log does not say it drained and cut what was left:\n%s", logs)
	}
}

// With --drain-delay-secs, a draining edge fails /readyz at once but
// keeps serving new connections, so that a load balancer takes it out
// before anyone is refused; a second SIGTERM ends it at once.
func TestEdgeDrainDelay(t *testing.T) {
	t.Parallel()
	edge, addr, admin, caFile, host, _ := drainEdge(t, "--drain-delay-secs", "60")
	edge.cmd.Process.Signal(syscall.SIGTERM)
	wait.For(t, 5*time.Second, "/readyz fails, naming the drain", func() bool {
		r := getReadyz(admin)
		return r.code == 503 && r.Checks["draining"] != "ok" && r.Checks["draining"] != ""
	})
	status, body, err := get(edgeClient(t, addr, caFile, false), "https://"+host+"/slow")
	if err != nil || status != 200 || string(body) != "xxxxxxxxxx" {
		t.Fatalf("a new visitor during the drain delay: %d %q %v; want served", status, body, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- edge.cmd.Wait() }()
	edge.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
			t.Errorf("after a second SIGTERM: %v, want the process ended by the signal", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a second SIGTERM did not end the edge")
	}
}
