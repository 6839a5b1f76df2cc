package e2e_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"froog.tech/froog/internal/wait"
	"froog.tech/froog/store/pg/pgtest"
)

// The edge's failures (issue #33), each under the real binary.

// okApp answers every request "ok N" where N numbers the connection it
// came on: a test sees whether the edge reused its upstream connection.
const okApp = `import http.server, sys, threading
n = 0
lock = threading.Lock()
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def setup(self):
        global n
        with lock:
            n += 1
            self.conn_no = n
        super().setup()
    def answer(self):
        b = ("ok %d" % self.conn_no).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)
    def do_GET(self): self.answer()
    def do_PUT(self):
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.answer()
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
`

// edgeRig is froogd dev (its process too) with okApp on a public URL of
// sandbox "e1".
type edgeRig struct {
	p      *proc
	c      client
	edge   string
	caFile string
	host   string // okApp's public URL's host
	data   string
	pid    int
}

func newEdgeRig(t *testing.T, extra ...string) *edgeRig {
	t.Helper()
	d := startDev(t, devOptions{args: extra})
	r := &edgeRig{p: d.p, c: d.c, edge: d.edge, caFile: d.caFile, data: d.data, pid: d.p.cmd.Process.Pid}
	newSandbox(t, r.c, "e1", 30*time.Second)
	r.host = publicURL(t, r.c, "e1", serveApp(t, r.c, "e1", "ok.py", okApp))
	return r
}

// The HTTPS accept loop meets EMFILE under a connection flood: it must
// wait and accept again, not give up while /readyz stays green. The test
// lowers froogd's RLIMIT_NOFILE to a little above what it has open,
// floods the edge past it, lets the flood go, and expects a normal
// request to succeed.
func TestEdgeAcceptsAgainAfterEMFILE(t *testing.T) {
	t.Parallel()
	r := newEdgeRig(t)
	web := edgeClient(t, r.edge, r.caFile, true)
	if code, b, err := get(web, "https://"+r.host+"/"); err != nil || code != 200 {
		t.Fatalf("before the flood: %d %s %v", code, b, err)
	}
	web.CloseIdleConnections()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", r.pid))
	if err != nil {
		t.Fatal(err)
	}
	// The soft limit only: raising a hard limit again takes a privilege.
	var old unix.Rlimit
	if err := unix.Prlimit(r.pid, unix.RLIMIT_NOFILE, nil, &old); err != nil {
		t.Fatalf("prlimit: %v", err)
	}
	lim := unix.Rlimit{Cur: uint64(len(fds) + 32), Max: old.Max}
	if err := unix.Prlimit(r.pid, unix.RLIMIT_NOFILE, &lim, nil); err != nil {
		t.Fatalf("prlimit: %v", err)
	}
	var flood []net.Conn
	for range 200 {
		c, err := net.DialTimeout("tcp", r.edge, time.Second)
		if err != nil {
			break // the backlog is full: the flood is past EMFILE
		}
		flood = append(flood, c)
	}
	// The edge has met EMFILE once it stops taking connections off the
	// backlog: its descriptors stay at the limit.
	wait.For(t, 10*time.Second, "froogd at its descriptor limit", func() bool {
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", r.pid))
		return len(fds) >= int(lim.Cur)-2
	})
	for _, c := range flood {
		c.Close()
	}
	web = edgeClient(t, r.edge, r.caFile, true)
	web.Timeout = 3 * time.Second
	var lastErr error
	if !wait.Until(20*time.Second, func() bool {
		code, _, err := get(web, "https://"+r.host+"/")
		lastErr = err
		return err == nil && code == 200
	}) {
		t.Fatalf("after the flood, with the limit still low: the edge never answered: %v", lastErr)
	}
	// And with the limit as it was.
	if err := unix.Prlimit(r.pid, unix.RLIMIT_NOFILE, &old, nil); err != nil {
		t.Fatal(err)
	}
	if code, _, err := get(web, "https://"+r.host+"/"); err != nil || code != 200 {
		t.Fatalf("with the limit restored: %d %v", code, err)
	}
}

// A change to a sandbox that is not a new run or a new SSH endpoint (a
// label, on it or on another sandbox) keeps its upstream connections,
// over both protocols: okApp counts the connections the edge opened.
func TestEdgeUpstreamsSurviveOtherChanges(t *testing.T) {
	t.Parallel()
	r := newEdgeRig(t)
	newSandbox(t, r.c, "e2", 30*time.Second)
	clients := map[string]*http.Client{"HTTP/1.1": edgeClient(t, r.edge, r.caFile, false), "HTTP/2": edgeClient(t, r.edge, r.caFile, true)}
	answer := func(proto string) string {
		t.Helper()
		code, b, err := get(clients[proto], "https://"+r.host+"/")
		if err != nil || code != 200 {
			t.Fatalf("%s: %d %s %v", proto, code, b, err)
		}
		return string(b)
	}
	before := map[string]string{}
	for proto := range clients {
		before[proto] = answer(proto)
		if again := answer(proto); again != before[proto] {
			t.Fatalf("%s: the edge does not reuse its upstream connection at all: %q, then %q", proto, before[proto], again)
		}
	}
	r.c.call("PATCH", "/v1/sandboxes/e2", `{"labels": {"team": "a"}}`, 200, nil)
	r.c.call("PATCH", "/v1/sandboxes/e1", `{"labels": {"team": "b"}}`, 200, nil)
	// The feed is ordered: once a URL made after the changes answers, the
	// edge has them.
	var u struct{ Host string }
	r.c.call("POST", "/v1/sandboxes/e2/urls", `{"port": 9, "public": true}`, 201, &u)
	wait.For(t, 10*time.Second, "the edge has the new URL", func() bool {
		code, _, err := get(clients["HTTP/2"], "https://"+u.Host+"/")
		return err == nil && code != 404
	})
	for proto := range clients {
		if after := answer(proto); after != before[proto] {
			t.Errorf("%s: after label changes the edge dialled the app again: %q, then %q", proto, before[proto], after)
		}
	}
}

// A request refused before its body is read (a wrong token: 401) still
// gets its answer over HTTP/1.1, whatever its body's size: the edge reads
// the body away (up to a bound) rather than closing on it, which ends in
// a reset the client sees instead of the answer. With Expect:
// 100-continue the decision comes first: 401, never 100 Continue. curl
// is the client the edge's authors did not write; Go's is the other.
func TestEdgeRefusalWithBody(t *testing.T) {
	t.Parallel()
	r := newEdgeRig(t)
	port := serveApp(t, r.c, "e1", "ok2.py", okApp)
	var u struct{ Host string }
	r.c.call("POST", "/v1/sandboxes/e1/urls", fmt.Sprintf(`{"port": %d}`, port), 201, &u)
	body := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(body, make([]byte, 4<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	_, edgePort, _ := net.SplitHostPort(r.edge)
	target := "https://" + u.Host + ":" + edgePort + "/up"
	wait.For(t, 10*time.Second, "the edge has the private URL", func() bool {
		code, _, err := get(edgeClient(t, r.edge, r.caFile, false), "https://"+u.Host+"/")
		return err == nil && code == 401
	})
	for _, tt := range []struct {
		name   string
		expect string // the Expect header curl sends ("" none)
	}{
		{"no Expect", ""},
		{"Expect: 100-continue", "100-continue"},
	} {
		out, err := exec.Command("curl", "-sS", "-v", "--http1.1", "--cacert", r.caFile, "--resolve", u.Host+":"+edgePort+":127.0.0.1",
			"-H", "X-Froog-Url-Token: pt_wrong", "-H", "Expect: "+tt.expect, "-T", body, "-o", "/dev/null", "-w", "status=%{http_code}\n", target).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "status=401") {
			t.Errorf("curl -T 4 MiB, %s: %v\n%s", tt.name, err, tail(string(out), 1500))
		}
		if tt.expect != "" && strings.Contains(string(out), "< HTTP/1.1 100") {
			t.Errorf("curl, %s: the edge said 100 Continue before it checked the token:\n%s", tt.name, tail(string(out), 1500))
		}
	}
	web := edgeClient(t, r.edge, r.caFile, false)
	for _, expect := range []bool{false, true} {
		req, _ := http.NewRequest("PUT", "https://"+u.Host+"/up", strings.NewReader(strings.Repeat("x", 4<<20)))
		req.Header.Set("X-Froog-Url-Token", "pt_wrong")
		if expect {
			req.Header.Set("Expect", "100-continue")
		}
		res, err := web.Do(req)
		if err != nil {
			t.Errorf("Go, Expect %v: %v", expect, err)
			continue
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 401 || !strings.Contains(string(b), "token") {
			t.Errorf("Go, Expect %v: %d %s", expect, res.StatusCode, b)
		}
	}
}

// A URL that was just made is served at once, by every edge: its first
// handshake must not fail (tls: internal error) in the milliseconds
// before the edge's route table has it. 100 times a new name (a public
// URL renamed), fetched on two edges on Postgres as soon as the API
// answers.
func TestEdgeNewURLAtOnce(t *testing.T) {
	t.Parallel()
	db := pgtest.URLWithSchema(pgtest.Schema(t))
	froogdRun(t, "migrate", "--database-url", db)
	key := adminAccount(t, []string{"--database-url", db}, "--name", "acme", "--url-names-per-day", "1000")
	ctlKey := writeControlKey(t)
	secret := filepath.Join(t.TempDir(), "secret.key")
	if err := os.WriteFile(secret, bytes.Repeat([]byte{9}, 32), 0o600); err != nil {
		t.Fatal(err)
	}
	cl := startCluster(t, db, key, ctlKey, secret, 2)
	newSandbox(t, cl.c, "nu", 30*time.Second)
	port := serveApp(t, cl.c, "nu", "ok.py", okApp)
	failures := 0
	for i := range 100 {
		var u struct{ Host string }
		want := 200
		if i == 0 {
			want = 201
		}
		cl.c.call("POST", "/v1/sandboxes/nu/urls", fmt.Sprintf(`{"port": %d, "public": true, "subdomain": "fresh-%03d"}`, port, i), want, &u)
		errs := make(chan error, len(cl.edgeAddrs))
		for _, addr := range cl.edgeAddrs {
			go func() {
				web := edgeClient(t, addr, cl.caFile, true)
				defer web.CloseIdleConnections()
				code, b, err := get(web, "https://"+u.Host+"/")
				if err == nil && code != 200 {
					err = fmt.Errorf("%d %s", code, b)
				}
				if err != nil {
					err = fmt.Errorf("edge %s, %s: %w", addr, u.Host, err)
				}
				errs <- err
			}()
		}
		for range cl.edgeAddrs {
			if err := <-errs; err != nil {
				failures++
				if failures <= 5 {
					t.Error(err)
				}
			}
		}
	}
	if failures > 0 {
		t.Errorf("%d of 200 first fetches of a new URL failed", failures)
	}
}
