package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"froog.tech/froog/internal/loopback"
	"froog.tech/froog/internal/testdep"
	"froog.tech/froog/internal/wait"
)

// The hardening issue's fault tests: each breaks one thing under the real
// binary, on loopback only, and checks that nothing is lost.

// downloadApp serves GET /MODE/N: N bytes framed by Content-Length
// (length), chunked, or ended by closing the connection (close); slow
// sends N bytes with a Content-Length in ten pieces 0.3 s apart.
const downloadApp = `import http.server, sys, time
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        mode, _, n = self.path.lstrip("/").partition("/")
        n = int(n)
        self.send_response(200)
        if mode in ("length", "slow"):
            self.send_header("Content-Length", str(n))
        elif mode == "chunked":
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        piece = max(n // 10, 1) if mode == "slow" else 1 << 16
        left = n
        while left > 0:
            b = b"x" * min(left, piece)
            if mode == "chunked":
                b = b"%x\r\n" % len(b) + b + b"\r\n"
            self.wfile.write(b)
            left -= min(left, piece)
            if mode == "slow":
                self.wfile.flush()
                time.sleep(0.3)
        if mode == "chunked":
            self.wfile.write(b"0\r\n\r\n")
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
`

// devEdge starts froogd dev with its edge on free loopback ports and
// returns the API client, the edge's address and the local CA's file.
func devEdge(t *testing.T) (c client, edgeAddr, caFile string) {
	t.Helper()
	d := startDev(t, devOptions{})
	return d.c, d.edge, d.caFile
}

// cluster is froog on Postgres: one hostctl, one API and some edges.
type cluster struct {
	c           client
	hostctl     *proc
	hostctlArgs []string
	edges       []*proc
	edgeAddrs   []string
	caFile      string
	db, ctlKey  string
}

var (
	hostctlReady = regexp.MustCompile(`hostctl h1 running`)
	edgeReady    = regexp.MustCompile(`froog edge on https://(\S+) `)
)

// startCluster starts the roles on the prepared database db (see
// selfHostedOn); driverArgs go to hostctl.
func startCluster(t *testing.T, db, key, ctlKey, secret string, edges int, driverArgs ...string) *cluster {
	t.Helper()
	caDir := t.TempDir()
	cl := &cluster{db: db, ctlKey: ctlKey, caFile: filepath.Join(caDir, "ca.pem")}
	cl.hostctlArgs = append([]string{"hostctl", "--database-url", db, "--host-name", "h1", "--data", t.TempDir(), "--control-key-file", ctlKey}, driverArgs...)
	cl.hostctl, _ = start(t, hostctlReady, cl.hostctlArgs...)
	_, m := start(t, regexp.MustCompile(`on (http://\S+)/v1`), "api", "--database-url", db, "--api-addr", "127.0.0.1:0",
		"--domain", "froog.test", "--secret-key-file", secret, "--control-key-file", ctlKey)
	cl.c = client{t: t, base: m[1], key: key}
	for range edges {
		p, e := start(t, edgeReady, "edge", "--database-url", db, "--edge-addr", "127.0.0.1:0", "--edge-http-addr", "127.0.0.1:0",
			"--domain", "froog.test", "--ca-dir", caDir, "--control-key-file", ctlKey)
		cl.edges = append(cl.edges, p)
		cl.edgeAddrs = append(cl.edgeAddrs, e[1])
	}
	return cl
}

// serveApp writes script to file in sandbox sb, runs `python3 file PORT`
// on a free port and returns the port once it listens.
func serveApp(t *testing.T, c client, sb, file, script string) int {
	t.Helper()
	body, _ := json.Marshal(script)
	c.call("POST", "/v1/sandboxes/"+sb+"/exec", `{"command": "cat > `+file+`", "stdin": `+string(body)+`}`, 200, nil)
	port := loopback.FreePort(t)
	c.call("POST", "/v1/sandboxes/"+sb+"/jobs", fmt.Sprintf(`{"command": "python3 %s %d"}`, file, port), 201, nil)
	var w struct{ Ready bool }
	c.call("POST", "/v1/sandboxes/"+sb+"/wait", fmt.Sprintf(`{"port": %d, "timeout_secs": 30}`, port), 200, &w)
	if !w.Ready {
		t.Fatalf("%s never listened on %d", file, port)
	}
	return port
}

// publicURL makes port of sandbox sb a public URL and returns its host.
func publicURL(t *testing.T, c client, sb string, port int) string {
	t.Helper()
	var u struct{ Host string }
	c.call("POST", "/v1/sandboxes/"+sb+"/urls", fmt.Sprintf(`{"port": %d, "public": true}`, port), 201, &u)
	return u.Host
}

// get fetches u and reads the whole body; err is the request's or the
// body's.
func get(web *http.Client, u string) (int, []byte, error) {
	res, err := web.Get(u)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, b, err
}

// A sandbox's SSH server goes away in the middle of a large download
// through the edge. The visitor must see the download fail — a cut
// chunked body, a body shorter than its Content-Length, or a reset
// HTTP/2 stream — never a shorter body that looks complete; and the edge
// dials the sandbox again: a request succeeds within seconds.
//
// With the local driver the SSH server lives inside froogd (see
// hostctl/local), so the test cannot kill its process alone: it destroys
// the server's TCP connections (ss -K, which answers the edge with a
// reset, as the kernel does for a killed process's sockets) and leaves
// its listener up, as a restarted sshd would be.
func TestSandboxSSHDiesMidDownload(t *testing.T) {
	t.Parallel()
	if out, err := exec.Command("ss", "-K", "-t", "dport", "=", ":1").CombinedOutput(); err != nil {
		testdep.Missing(t, "ss -K (iproute2, kernel socket destroy) is not usable here: %v: %s", err, out)
	}
	c, edgeAddr, caFile := devEdge(t)
	newSandbox(t, c, "dl", 10*time.Second)
	host := publicURL(t, c, "dl", serveApp(t, c, "dl", "dl.py", downloadApp))
	var sshd struct{ Port int }
	c.call("GET", "/v1/sandboxes/dl/ssh", "", 200, &sshd)
	if sshd.Port == 0 {
		t.Fatal("the API gives no SSH port")
	}
	const size = 64 << 20
	for _, h2 := range []bool{false, true} {
		for _, mode := range []string{"length", "chunked", "close"} {
			t.Run(fmt.Sprintf("%s/h2=%v", mode, h2), func(t *testing.T) {
				web := edgeClient(t, edgeAddr, caFile, h2)
				res, err := web.Get(fmt.Sprintf("https://%s/%s/%d", host, mode, size))
				if err != nil || res.StatusCode != 200 {
					t.Fatalf("download: %v %v", res, err)
				}
				defer res.Body.Close()
				first, err := io.ReadFull(res.Body, make([]byte, 1<<20))
				if err != nil {
					t.Fatalf("the first MiB: %v", err)
				}
				// Every connection the sandbox's SSH server holds, not its
				// listener.
				if out, err := exec.Command("ss", "-K", "-t", "sport", "=", fmt.Sprintf(":%d", sshd.Port)).CombinedOutput(); err != nil {
					t.Fatalf("ss -K: %v: %s", err, out)
				}
				rest, err := io.Copy(io.Discard, res.Body)
				got := int64(first) + rest
				switch {
				case got >= size:
					t.Fatalf("all %d bytes came: the connection was cut too late to test anything", got)
				case err == nil:
					t.Fatalf("%d of %d bytes and no error: a truncated download that looks complete (Content-Length %d, %v)",
						got, size, res.ContentLength, res.TransferEncoding)
				}
				t.Logf("cut after %d of %d bytes: %v", got, size, err)

				// The edge dials the sandbox again. With the local driver
				// the app's own port may refuse for a moment after the cut
				// (its threads still writing into the dead channels; seen
				// as 502 "Nothing answered" about once in ten clean runs):
				// the next requests are given 5 s, and how many it took is
				// logged.
				started, tries := time.Now(), 0
				var (
					status int
					body   []byte
				)
				ok := wait.Until(5*time.Second, func() bool {
					tries++
					status, body, err = get(web, fmt.Sprintf("https://%s/length/1000", host))
					return err == nil && status == 200 && len(body) == 1000
				})
				if !ok {
					t.Fatalf("the next requests, for 5 s: the last %d, %d bytes, %v: %s", status, len(body), err, body)
				}
				t.Logf("the next request succeeded after %v (%d tries)", time.Since(started), tries)
			})
		}
	}
}

// An edge stopped with SIGTERM while it serves: the responses in flight
// finish whole, on HTTP/1.1 and HTTP/2; websockets end with a close frame
// (1001, going away); new connections
// are refused; the process exits by itself, soon and with status 0.
func TestEdgeStopsGracefully(t *testing.T) {
	t.Parallel()
	db, key, ctlKey, secret := selfHosted(t)
	cl := startCluster(t, db, key, ctlKey, secret, 1)
	c := cl.c
	newSandbox(t, c, "gs", 10*time.Second)
	host := publicURL(t, c, "gs", serveApp(t, c, "gs", "dl.py", downloadApp))
	wsHost := publicURL(t, c, "gs", serveApp(t, c, "gs", "ws.py", wsEcho))
	edge := cl.edges[0]
	addr := cl.edgeAddrs[0]
	h1, h2 := edgeClient(t, addr, cl.caFile, false), edgeClient(t, addr, cl.caFile, true)
	wait.For(t, 15*time.Second, "the edge serves the app", func() bool {
		status, _, _ := get(h1, "https://"+host+"/length/10")
		return status == 200
	})

	// Two slow downloads (3 s each), under way before the signal.
	const size = 1 << 20
	type result struct {
		n   int
		err error
	}
	results := make(chan result, 2)
	for _, web := range []*http.Client{h1, h2} {
		res, err := web.Get(fmt.Sprintf("https://%s/slow/%d", host, size))
		if err != nil || res.StatusCode != 200 {
			t.Fatalf("slow download: %v %v", res, err)
		}
		first, err := io.ReadFull(res.Body, make([]byte, size/10))
		if err != nil {
			t.Fatalf("slow download's first piece: %v", err)
		}
		go func() {
			defer res.Body.Close()
			rest, err := io.ReadAll(res.Body)
			results <- result{first + len(rest), err}
		}()
	}
	ws := dialEdgeWS(t, addr, cl.caFile, "wss://"+wsHost+"/")
	if err := ws.WriteMessage(websocket.TextMessage, []byte("hi")); err != nil {
		t.Fatal(err)
	}
	if _, msg, err := ws.ReadMessage(); err != nil || string(msg) != "hi" {
		t.Fatalf("websocket echo: %q %v", msg, err)
	}

	signalled := time.Now()
	edge.cmd.Process.Signal(syscall.SIGTERM)
	exited := make(chan error, 1)
	go func() { exited <- edge.cmd.Wait() }()

	// The websocket ends with a close frame: 1001, going away.
	ws.SetReadDeadline(time.Now().Add(15 * time.Second))
	_, _, err := ws.ReadMessage()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.CloseGoingAway {
		t.Errorf("websocket: %v, want a close frame 1001 (going away)", err)
	} else {
		t.Logf("websocket: a close frame, 1001 going away, after %v", time.Since(signalled))
	}

	// A new visitor is refused at once (the listener is closed).
	wait.For(t, 15*time.Second, "the edge refuses new connections", func() bool {
		_, _, err := get(edgeClient(t, addr, cl.caFile, false), "https://"+host+"/length/10")
		return err != nil
	})

	for range 2 {
		r := <-results
		if r.err != nil || r.n != size {
			t.Errorf("a download in flight at SIGTERM: %d of %d bytes, %v", r.n, size, r.err)
		}
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("the edge exited with %v: %s", err, edge.stderr.String())
		}
		t.Logf("the edge exited %v after SIGTERM", time.Since(signalled))
	case <-time.After(15 * time.Second):
		t.Fatalf("the edge still runs 15 s after SIGTERM")
	}
}

// dialEdgeWS opens a websocket to u through the edge at addr (HTTP/1.1).
func dialEdgeWS(t *testing.T, addr, caFile, u string) *websocket.Conn {
	t.Helper()
	tr := edgeClient(t, addr, caFile, false).Transport.(*http.Transport)
	d := websocket.Dialer{NetDialContext: tr.DialContext, TLSClientConfig: tr.TLSClientConfig.Clone()}
	d.TLSClientConfig.NextProtos = []string{"http/1.1"}
	ws, _, err := d.Dial(u, nil)
	if err != nil {
		t.Fatalf("websocket %s: %v", u, err)
	}
	t.Cleanup(func() { ws.Close() })
	return ws
}

// pgServer is a Postgres cluster of one test's own, on a free loopback
// port, that the test may stop and start (the shared server must never
// be).
type pgServer struct {
	t         *testing.T
	bin, dir  string
	port      int
	cred      *syscall.Credential // postgres refuses to run as root
	startArgs []string
}

// privatePostgres initialises and starts a cluster in a temporary folder;
// it is stopped and removed when the test ends.
func privatePostgres(t *testing.T) *pgServer {
	t.Helper()
	ctls, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	if len(ctls) == 0 {
		testdep.Missing(t, "no Postgres server binaries in /usr/lib/postgresql/*/bin (deploy/testdeps.sh installs them)")
	}
	slices.Sort(ctls)
	s := &pgServer{t: t, bin: filepath.Dir(ctls[len(ctls)-1]), port: loopback.FreePort(t)}
	dir, err := os.MkdirTemp("", "froog-pg-")
	if err != nil {
		t.Fatal(err)
	}
	s.dir = dir
	t.Cleanup(func() { os.RemoveAll(dir) })
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			testdep.Missing(t, "running as root and there is no postgres user to run a cluster as: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(dir, 0o700)
	s.run("initdb", "-D", filepath.Join(dir, "data"), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync")
	s.startArgs = []string{"-D", filepath.Join(dir, "data"), "-l", filepath.Join(dir, "log"), "-w", "-t", "30",
		"-o", fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off", s.port, dir)}
	s.start()
	t.Cleanup(func() {
		cmd := exec.Command(filepath.Join(s.bin, "pg_ctl"), "-D", filepath.Join(dir, "data"), "-w", "-m", "immediate", "stop")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
		cmd.Run() // already stopped, when the test failed during an outage
	})
	return s
}

func (s *pgServer) url() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
}

func (s *pgServer) run(name string, args ...string) {
	s.t.Helper()
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	cmd.Dir = s.dir
	if out, err := cmd.CombinedOutput(); err != nil {
		log, _ := os.ReadFile(filepath.Join(s.dir, "log"))
		s.t.Fatalf("%s %v: %v\n%s\n%s", name, args, err, out, log)
	}
}

func (s *pgServer) pgctl(args ...string) {
	s.t.Helper()
	s.run("pg_ctl", append([]string{"-D", filepath.Join(s.dir, "data"), "-w", "-t", "30"}, args...)...)
}

func (s *pgServer) start() { s.t.Helper(); s.run("pg_ctl", append(s.startArgs, "start")...) }

// stop is a fast shutdown: every session is ended at once.
func (s *pgServer) stop() { s.t.Helper(); s.pgctl("stop", "-m", "fast") }

// Postgres goes away for a while under two `froogd edge` processes.
// Known routes keep serving all along, from the edges' caches; a viewer
// token revoked just before the outage (and seen by the edges) stays
// refused by both, whatever their reloads meanwhile; and the
// changes made through the API as soon as Postgres is back reach both
// edges, which catch up from the last change each saw (the store's
// durable change feed), not only from the notifications that follow.
//
// The outage lasts 10 s: longer than the store's reconnect backoff and
// keepalives take to notice, so the edges are disconnected for real and
// redial, while the whole test stays near 30 s.
func TestPostgresOutage(t *testing.T) {
	t.Parallel()
	pg := privatePostgres(t)
	db, key, ctlKey, secret := selfHostedOn(t, pg.url())
	cl := startCluster(t, db, key, ctlKey, secret, 2)
	c := cl.c
	newSandbox(t, c, "po", 10*time.Second)
	port := serveApp(t, c, "po", "echo.py", headerEcho)
	port2 := serveApp(t, c, "po", "echo2.py", headerEcho)
	var u struct{ Host string }
	c.call("POST", "/v1/sandboxes/po/urls", fmt.Sprintf(`{"port": %d}`, port), 201, &u)
	host := u.Host
	token := func(label string) (id, secret string) {
		var tok struct{ ID, Token string }
		c.call("POST", fmt.Sprintf("/v1/sandboxes/po/urls/%d/tokens", port), `{"ttl_secs": 3600, "label": "`+label+`"}`, 201, &tok)
		return tok.ID, tok.Token
	}
	aliceID, alice := token("alice")
	bobID, bob := token("bob")
	var edges []*http.Client
	for _, a := range cl.edgeAddrs {
		edges = append(edges, edgeClient(t, a, cl.caFile, true))
	}
	as := func(web *http.Client, h, tok string) int {
		req, _ := http.NewRequest("GET", "https://"+h+"/", nil)
		req.Header.Set("Cookie", "__Host-froog_url="+tok)
		res, err := web.Do(req)
		if err != nil {
			return 0
		}
		res.Body.Close()
		return res.StatusCode
	}
	for i, web := range edges {
		wait.For(t, 15*time.Second, fmt.Sprintf("edge %d lets alice and bob in", i), func() bool { return as(web, host, alice) == 200 && as(web, host, bob) == 200 })
	}

	// The revocation reaches the edges in milliseconds; the outage starts
	// right after. (An edge cannot honour a change it never received: a
	// revocation whose notification Postgres never delivered is seen when
	// Postgres is back.)
	c.call("DELETE", fmt.Sprintf("/v1/sandboxes/po/urls/%d/tokens/%s", port, aliceID), "", 200, nil)
	for i, web := range edges {
		wait.For(t, 5*time.Second, fmt.Sprintf("edge %d shuts alice out", i), func() bool { return as(web, host, alice) == 401 })
	}
	pg.stop()
	down := time.Now()
	var served int
	for time.Since(down) < 10*time.Second {
		for i, web := range edges {
			if got := as(web, host, bob); got != 200 {
				t.Logf("edge %d: %s", i, cl.edges[i].stderr.String())
				t.Fatalf("edge %d, %v into the outage: bob gets %d, want 200", i, time.Since(down).Round(time.Millisecond), got)
			}
			if got := as(web, host, alice); got != 401 {
				t.Fatalf("edge %d, %v into the outage: revoked alice gets %d, want 401", i, time.Since(down).Round(time.Millisecond), got)
			}
			served++
		}
		time.Sleep(200 * time.Millisecond)
	}
	if res, err := http.Get(c.base + "/readyz"); err == nil && res.StatusCode == 200 {
		t.Fatal("the API says it is ready without Postgres")
	}
	pg.start()
	t.Logf("Postgres was away %v; the edges served %d checks meanwhile", time.Since(down).Round(time.Millisecond), served)

	// The API is back as soon as Postgres is: change things at once.
	wait.For(t, 15*time.Second, "the API is ready again", func() bool {
		res, err := http.Get(c.base + "/readyz")
		return err == nil && res.StatusCode == 200
	})
	back := time.Now()
	c.call("DELETE", fmt.Sprintf("/v1/sandboxes/po/urls/%d/tokens/%s", port, bobID), "", 200, nil)
	_, carol := token("carol")
	host2 := publicURL(t, c, "po", port2)
	for i, web := range edges {
		wait.For(t, 15*time.Second, fmt.Sprintf("edge %d sees every change made after the outage", i), func() bool {
			// The new name's certificate comes once the edge's table has it.
			res, err := web.Get("https://" + host2 + "/")
			if err != nil {
				return false
			}
			res.Body.Close()
			return as(web, host, bob) == 401 && as(web, host, carol) == 200 && res.StatusCode == 200 && as(web, host, alice) == 401
		})
	}
	t.Logf("both edges had every change %v after the API was back", time.Since(back).Round(time.Millisecond))
}

// A hostctl stopped and started again while its sandboxes run (VMs, which
// outlive it): the sandbox's URL keeps serving meanwhile, and afterwards
// the new hostctl has adopted the VM — same SSH endpoint, commands run.
func TestQEMUHostctlRestartKeepsSandboxes(t *testing.T) {
	t.Parallel() // in the VM phase, beside the other VM tests only
	tiny := tinyGuest(t)
	db, key, ctlKey, secret := selfHosted(t)
	cl := startCluster(t, db, key, ctlKey, secret, 1, "--driver", "qemu", "--kernel", filepath.Join(tiny, "vmlinux"),
		"--initrd", filepath.Join(tiny, "initramfs.gz"), "--vm-cpus", "1", "--vm-memory-mb", "256", "--vm-disk-gb", "1")
	data := cl.hostctlArgs[slices.Index(cl.hostctlArgs, "--data")+1]
	t.Cleanup(func() { exec.Command("pkill", "-9", "-f", data).Run() }) // VMs outlive froogd by design
	c := cl.c
	newSandbox(t, c, "keep", 3*time.Minute)
	c.call("POST", "/v1/sandboxes/keep/exec", `{"command": "echo kept > ~/index.html; busybox httpd -p 8080 -h ~"}`, 200, nil)
	c.call("POST", "/v1/sandboxes/keep/wait", `{"port": 8080, "timeout_secs": 30}`, 200, nil)
	var u struct{ Host string }
	c.call("POST", "/v1/sandboxes/keep/urls", `{"port": 8080, "public": true}`, 201, &u)
	web := edgeClient(t, cl.edgeAddrs[0], cl.caFile, false)
	get := func() (int, string) {
		res, err := web.Get("https://" + u.Host + "/index.html")
		if err != nil {
			return 0, err.Error()
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, strings.TrimSpace(string(b))
	}
	wait.For(t, 30*time.Second, "the URL serves", func() bool { code, _ := get(); return code == 200 })
	var before, after struct{ Port int }
	c.call("GET", "/v1/sandboxes/keep/ssh", "", 200, &before)

	cl.hostctl.stop(t)
	if code, body := get(); code != 200 || body != "kept" {
		t.Fatalf("with hostctl stopped: %d %q", code, body)
	}
	cl.hostctl, _ = start(t, hostctlReady, cl.hostctlArgs...)
	var res struct{ Stdout string }
	c.call("POST", "/v1/sandboxes/keep/exec", `{"command": "cat ~/index.html"}`, 200, &res)
	c.call("GET", "/v1/sandboxes/keep/ssh", "", 200, &after)
	if res.Stdout != "kept\n" || after.Port != before.Port {
		t.Fatalf("after the restart: %q, SSH port %d (was %d)", res.Stdout, after.Port, before.Port)
	}
	if code, body := get(); code != 200 || body != "kept" {
		t.Fatalf("after the restart, the URL: %d %q", code, body)
	}
}

// A network partition between the edge and a sandbox, in a network
// namespace the test makes: froogd dev runs inside it (reached over a
// veth pair), and an nftables rule there drops the sandbox's SSH
// traffic. The tunnel notices within its keepalive (--tunnel-keepalive-secs,
// 2 s here, then as long again for an answer) and says so; once the
// network heals, the next request redials and is served.
func TestPartitionEdgeFromSandbox(t *testing.T) {
	// Alone: it makes a network namespace and an nftables rule on the host.
	if os.Geteuid() != 0 {
		testdep.Missing(t, "network namespaces need root")
	}
	// Its own subnet, never one a killed run left behind: an address
	// still on another run's namespace answered this test's requests with
	// "connection refused".
	cl := newCluster(t, "far")
	ns, addr := cl.ns("far"), cl.addr["far"]
	data := t.TempDir()
	p, m := startIn(t, ns, regexp.MustCompile(`API:\s+(http://\S+)/v1(?s:.*)Edge:\s+https://(\S+) `), "dev", "--data", data,
		"--api-addr", addr+":0", "--edge-addr", addr+":0", "--edge-http-addr", addr+":0", "--domain", "froog.test", "--tunnel-keepalive-secs", "2")
	key, _ := os.ReadFile(filepath.Join(data, "api-key"))
	c := client{t: t, base: m[1], key: strings.TrimSpace(string(key))}
	newSandbox(t, c, "far", 30*time.Second)
	port := serveApp(t, c, "far", "echo.py", headerEcho)
	var u struct{ Host string }
	c.call("POST", "/v1/sandboxes/far/urls", fmt.Sprintf(`{"port": %d, "public": true}`, port), 201, &u)
	web := edgeClient(t, m[2], filepath.Join(data, "ca.pem"), false)
	get := func() int {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", "https://"+u.Host+"/", nil)
		res, err := web.Do(req)
		if err != nil {
			return 0
		}
		res.Body.Close()
		return res.StatusCode
	}
	wait.For(t, 30*time.Second, "the URL serves", func() bool { return get() == 200 })
	var ssh struct{ Port int }
	c.call("GET", "/v1/sandboxes/far/ssh", "", 200, &ssh)

	// The partition: the sandbox's SSH traffic dropped, both ways.
	rules := fmt.Sprintf(`table inet froogpart {
		chain out { type filter hook output priority 0; tcp dport %[1]d drop; tcp sport %[1]d drop; }
	}`, ssh.Port)
	cmd := exec.Command("ip", "netns", "exec", ns, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft: %v\n%s", err, out)
	}
	cut, logged := time.Now(), len(p.stderr.String())
	wait.For(t, 40*time.Second, "the tunnel notices the partition", func() bool {
		return strings.Contains(p.stderr.String()[logged:], "does not answer keepalives")
	})
	t.Logf("the tunnel noticed the partition after %v", time.Since(cut).Round(time.Second))
	if code := get(); code == 200 {
		t.Fatal("a request was served across the partition")
	}
	ipRun(t, "ip", "netns", "exec", ns, "nft", "delete", "table", "inet", "froogpart")
	wait.For(t, 30*time.Second, "the URL serves again after the partition", func() bool { return get() == 200 })
}

// startIn is start, with froogd in network namespace ns.
func startIn(t *testing.T, ns string, re *regexp.Regexp, args ...string) (*proc, []string) {
	t.Helper()
	return startCmd(t, re, exec.Command("ip", append([]string{"netns", "exec", ns, froogd}, args...)...), args)
}
