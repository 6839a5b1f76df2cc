package froog_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"golang.org/x/crypto/ssh"

	"froog.tech/froog/certs"
	"froog.tech/froog/edge"
	"froog.tech/froog/edge/route"
	"froog.tech/froog/internal/loopback"
	"froog.tech/froog/store"
	"froog.tech/froog/store/embedded"
	"froog.tech/froog/tunnel"
	"froog.tech/froog/tunnel/sshdtest"
)

// TestEdgeBench is `make bench`'s whole-system measure: small keep-alive
// requests (wrk) and a 256 MiB download through each path to one upstream
// (nginx serving static files), in one run, reported as ratios to the
// upstream reached directly:
//
//	direct     the upstream itself, plain HTTP
//	edge       froog's edge over HTTPS with a private URL's cookie, through
//	           its tunnel to OpenSSH's sshd
//	nginx-ssh  nginx over HTTPS in front of `ssh -L` through the same sshd
//	caddy-ssh  Caddy over HTTPS in front of the same `ssh -L`
//	ssh-l      the bare `ssh -L` (bulk only)
//
// It writes .bench/results.json and .bench/results.md. It is not a test of
// speed: nothing here fails on a number.
func TestEdgeBench(t *testing.T) {
	if os.Getenv("FROOG_BENCH") == "" {
		t.Skip("make bench runs this (FROOG_BENCH=1); it takes a few minutes")
	}
	for _, bin := range []string{"wrk", "nginx", "caddy", "curl", "unshare"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s is not installed: make bench installs it", bin)
		}
	}
	dur := os.Getenv("FROOG_BENCH_DURATION")
	if dur == "" {
		dur = "10s"
	}
	dir := t.TempDir()
	ca, err := certs.OpenLocalCA(filepath.Join(dir, "ca"), "froog.test")
	if err != nil {
		t.Fatal(err)
	}

	// The upstream: nginx serving a small page and a 256 MiB file.
	www := filepath.Join(dir, "www")
	os.MkdirAll(www, 0o755)
	os.WriteFile(filepath.Join(www, "index.html"), []byte("hello, world\n"), 0o644)
	big, _ := os.Create(filepath.Join(www, "big"))
	big.Truncate(256 << 20)
	big.Close()
	upstream := fmt.Sprintf("127.0.0.1:%d", loopback.FreePort(t))
	runNginx(t, dir, "upstream", fmt.Sprintf(`server { listen %s; root %s; access_log off; }`, upstream, www))

	// OpenSSH's sshd, and `ssh -L` through it to the upstream.
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	signer, _ := ssh.NewSignerFromKey(priv)
	block, _ := ssh.MarshalPrivateKey(priv, "")
	sshd := sshdtest.Start(t, signer.PublicKey())
	forward := sshd.Forward(t, pem.EncodeToMemory(block), upstream)

	// The peers: nginx and Caddy over HTTPS in front of the forward.
	writeCert := func(name string) (string, string) {
		c, err := ca.GetCertificate(&tls.ClientHelloInfo{ServerName: name})
		if err != nil {
			t.Fatal(err)
		}
		var chain bytes.Buffer
		for _, der := range c.Certificate {
			pem.Encode(&chain, &pem.Block{Type: "CERTIFICATE", Bytes: der})
		}
		keyDER, err := x509.MarshalECPrivateKey(c.PrivateKey.(*ecdsa.PrivateKey))
		if err != nil {
			t.Fatal(err)
		}
		certFile, keyFile := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
		os.WriteFile(certFile, chain.Bytes(), 0o600)
		os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600)
		return certFile, keyFile
	}
	nginxAddr := fmt.Sprintf("127.0.0.1:%d", loopback.FreePort(t))
	crt, key := writeCert("nginx.froog.test")
	runNginx(t, dir, "front", fmt.Sprintf(`upstream tunnel { server %s; keepalive 64; }
server { listen %s ssl http2; ssl_certificate %s; ssl_certificate_key %s; access_log off;
  location / { proxy_pass http://tunnel; proxy_http_version 1.1; proxy_set_header Connection ""; proxy_buffering off; } }`,
		forward, nginxAddr, crt, key))
	caddyAddr := fmt.Sprintf("127.0.0.1:%d", loopback.FreePort(t))
	crt, key = writeCert("caddy.froog.test")
	caddyfile := filepath.Join(dir, "Caddyfile")
	os.WriteFile(caddyfile, []byte(fmt.Sprintf("{\n\tadmin off\n\tauto_https off\n}\nhttps://caddy.froog.test:%s {\n\tbind 127.0.0.1\n\ttls %s %s\n\treverse_proxy %s\n}\n",
		port(caddyAddr), crt, key, forward)), 0o644)
	caddy := exec.Command("caddy", "run", "--config", caddyfile, "--adapter", "caddyfile")
	caddy.Env = append(os.Environ(), "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir, "HOME="+dir)
	if out, err := startAndWait(caddy, caddyAddr); err != nil {
		t.Fatalf("caddy: %v %s", err, out)
	}
	t.Cleanup(func() { caddy.Process.Kill(); caddy.Wait() })

	// froog's edge, its tunnel reaching the same sshd.
	edgeAddr, cookie, wsEcho := runEdge(t, ca, sshd, signer, upstream)

	hosts := filepath.Join(dir, "hosts")
	os.WriteFile(hosts, []byte("127.0.0.1 localhost\n127.0.0.1 box.froog.test nginx.froog.test caddy.froog.test\n"), 0o644)
	paths := []struct {
		name, url, cookie string
		bulk              string
	}{
		{"direct", "http://" + upstream + "/", "", "http://" + upstream + "/big"},
		{"edge", "https://box.froog.test:" + port(edgeAddr) + "/", cookie, "https://box.froog.test:" + port(edgeAddr) + "/big"},
		{"nginx-ssh", "https://nginx.froog.test:" + port(nginxAddr) + "/", "", "https://nginx.froog.test:" + port(nginxAddr) + "/big"},
		{"caddy-ssh", "https://caddy.froog.test:" + port(caddyAddr) + "/", "", "https://caddy.froog.test:" + port(caddyAddr) + "/big"},
		{"ssh-l", "", "", "http://" + forward + "/big"},
	}
	type result struct {
		Path  string  `json:"path"`
		RPS   float64 `json:"rps"`
		P50   float64 `json:"p50_ms"`
		P99   float64 `json:"p99_ms"`
		MBps  float64 `json:"mb_s"`
		Extra string  `json:"-"`
	}
	var results []result
	for _, p := range paths {
		r := result{Path: p.name}
		if p.url != "" {
			r.RPS, r.P50, r.P99 = wrk(t, hosts, dir, p.url, p.cookie, dur)
		}
		r.MBps = curlMBps(t, hosts, filepath.Join(dir, "ca", "ca.pem"), p.bulk, p.cookie)
		t.Logf("%s: %.0f req/s, p50 %.2f ms, p99 %.2f ms, %.0f MB/s", r.Path, r.RPS, r.P50, r.P99, r.MBps)
		results = append(results, r)
	}
	rtt := wsEcho(5 * time.Second)

	var md strings.Builder
	base := results[0]
	ratio := func(v, b float64) string {
		if v == 0 || b == 0 {
			return "–"
		}
		return fmt.Sprintf("%.2f×", v/b)
	}
	fmt.Fprintf(&md, "| path | req/s | × direct | p50 ms | p99 ms | MB/s (256 MiB) | × direct |\n|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		fmt.Fprintf(&md, "| %s | %.0f | %s | %.2f | %.2f | %.0f | %s |\n", r.Path, r.RPS, ratio(r.RPS, base.RPS), r.P50, r.P99, r.MBps, ratio(r.MBps, base.MBps))
	}
	fmt.Fprintf(&md, "\nwebsocket echo through the edge: %.0f round trips/s (64-byte messages, one connection)\n", rtt)
	out := filepath.Join(".bench")
	os.MkdirAll(out, 0o755)
	js, _ := json.MarshalIndent(results, "", "  ")
	os.WriteFile(filepath.Join(out, "results.json"), js, 0o644)
	os.WriteFile(filepath.Join(out, "results.md"), []byte(md.String()), 0o644)
	fmt.Println(md.String())
}

func port(addr string) string { _, p, _ := net.SplitHostPort(addr); return p }

func startAndWait(cmd *exec.Cmd, addr string) (string, error) {
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return "", err
	}
	for deadline := time.Now().Add(15 * time.Second); ; {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return "", nil
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			return out.String(), fmt.Errorf("nothing listened on %s", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// runNginx runs nginx with one server block, in its own prefix.
func runNginx(t *testing.T, dir, name, server string) {
	prefix := filepath.Join(dir, "nginx-"+name)
	os.MkdirAll(filepath.Join(prefix, "logs"), 0o755)
	user := ""
	if os.Getuid() == 0 {
		user = "user root;" // the files are in the test's private folder
	}
	conf := fmt.Sprintf(user+`worker_processes 1; pid %s/nginx.pid; error_log %s/logs/error.log;
events { worker_connections 4096; }
http { sendfile on; tcp_nopush on; keepalive_requests 100000;
client_body_temp_path %s; proxy_temp_path %s; fastcgi_temp_path %s; uwsgi_temp_path %s; scgi_temp_path %s;
%s }`, prefix, prefix, prefix, prefix, prefix, prefix, prefix, server)
	file := filepath.Join(prefix, "nginx.conf")
	os.WriteFile(file, []byte(conf), 0o644)
	addr := regexp.MustCompile(`listen (\S+?)[ ;]`).FindStringSubmatch(server)[1]
	cmd := exec.Command("nginx", "-p", prefix, "-c", file, "-g", "daemon off;")
	cmd.WaitDelay = 10 * time.Second
	if out, err := startAndWait(cmd, addr); err != nil {
		t.Fatalf("nginx %s: %v %s", name, err, out)
	}
	// TERM lets the master stop its worker, which holds the output pipe.
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() })
}

// wrk measures small keep-alive requests; it resolves the test's names
// through a private /etc/hosts (a mount namespace of its own).
func wrk(t *testing.T, hosts, dir, url, cookie, dur string) (rps, p50, p99 float64) {
	args := fmt.Sprintf("exec wrk -t2 -c64 -d%s --latency", dur)
	if cookie != "" {
		args += " -H 'Cookie: " + cookie + "'"
	}
	args += " " + url
	cmd := exec.Command("unshare", "--mount", "sh", "-c", "mount --bind "+hosts+" /etc/hosts && "+args)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("wrk %s: %v %s", url, err, out)
	}
	s := string(out)
	if !strings.Contains(s, "Non-2xx") {
		fmt.Sscan(field(s, "Requests/sec:"), &rps)
	} else {
		t.Fatalf("wrk %s saw errors:\n%s", url, s)
	}
	return rps, millis(percentile(s, "50")), millis(percentile(s, "99"))
}

// percentile finds a line of wrk's latency distribution ("     99%    3.19ms").
func percentile(s, p string) string {
	m := regexp.MustCompile(`(?m)^\s+` + p + `%\s+(\S+)`).FindStringSubmatch(s)
	if m == nil {
		return ""
	}
	return m[1]
}

func field(s, key string) string {
	i := strings.Index(s, key)
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+len(key):])
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

// millis reads wrk's durations: 812.00us, 1.23ms, 1.02s.
func millis(v string) float64 {
	for _, u := range []struct {
		suffix string
		ms     float64
	}{{"us", 0.001}, {"ms", 1}, {"s", 1000}} {
		if n, ok := strings.CutSuffix(v, u.suffix); ok {
			f, _ := strconv.ParseFloat(n, 64)
			return f * u.ms
		}
	}
	return 0
}

// curlMBps downloads url once and returns MB/s.
func curlMBps(t *testing.T, hosts, caFile, url, cookie string) float64 {
	args := []string{"-s", "-o", "/dev/null", "-w", "%{speed_download} %{http_code} %{size_download}", "--cacert", caFile}
	if cookie != "" {
		args = append(args, "-H", "Cookie: "+cookie)
	}
	args = append(args, "--resolve", resolveFor(url), url)
	out, err := exec.Command("curl", args...).Output()
	if err != nil {
		t.Fatalf("curl %s: %v", url, err)
	}
	var speed float64
	var code, size int64
	fmt.Sscan(string(out), &speed, &code, &size)
	if code != 200 || size != 256<<20 {
		t.Fatalf("curl %s: %d, %d bytes", url, code, size)
	}
	return speed / 1e6
}

func resolveFor(url string) string {
	hostport := strings.SplitN(strings.SplitN(url, "://", 2)[1], "/", 2)[0]
	return hostport + ":127.0.0.1"
}

// runEdge runs froog's edge in this process with a private URL to
// upstream through sshd, and returns its address, the cookie, and a
// websocket echo measurer.
func runEdge(t *testing.T, ca *certs.LocalCA, sshd *sshdtest.Server, signer ssh.Signer, upstream string) (string, string, func(time.Duration) float64) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	a, _ := st.CreateAccount(ctx, store.Account{MaxSandboxes: 1, URLNamesPerDay: 10})
	host, sp, _ := net.SplitHostPort(sshd.Addr)
	spn, _ := strconv.Atoi(sp)
	sb, err := st.CreateSandbox(ctx, store.Sandbox{AccountID: a.ID, Name: "box", State: store.StateRunning, SSHHost: host, SSHPort: spn, SSHHostKey: sshd.HostKey, CreatedAt: time.Now()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	up, _ := strconv.Atoi(port(upstream))
	mk := func(label string, p int) {
		if _, err := st.PutURL(ctx, sb.ID, p, func(*store.URL, *store.AuditEvent) (store.URL, error) {
			return store.URL{Hostname: label, TokenHash: store.HashSecret("pt_bench"), CreatedAt: time.Now(), UpdatedAt: time.Now()}, nil
		}, nil); err != nil {
			t.Fatal(err)
		}
	}
	mk("box", up)
	wsUp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		for {
			mt, m, err := c.ReadMessage()
			if err != nil {
				return
			}
			c.WriteMessage(mt, m)
		}
	}))
	t.Cleanup(wsUp.Close)
	wsPort, _ := strconv.Atoi(port(wsUp.Listener.Addr().String()))
	mk("ws", wsPort)
	tun, err := tunnel.New(tunnel.Options{Sandboxes: st, Signer: signer, User: "root"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tun.Close() })
	routes, err := route.New(route.Options{Store: st, Domain: "froog.test"})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := edge.New(edge.Options{Routes: routes, Sandboxes: st, Dialer: tun, GetCertificate: ca.GetCertificate, Logger: slog.New(slog.DiscardHandler),
		RateLimit: -1}) // wrk is one address: no per-address limit
	if err != nil {
		t.Fatal(err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go routes.Run(ctx)
	go srv.ServeTLS(ctx, ln)
	<-routes.Ready()
	addr := ln.Addr().String()
	echo := func(d time.Duration) float64 {
		dialer := websocket.Dialer{NetDial: func(n, _ string) (net.Conn, error) { return net.Dial(n, addr) },
			TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}}
		c, _, err := dialer.Dial("wss://ws.froog.test/?_token=pt_bench", nil)
		if err != nil {
			t.Fatalf("websocket through the edge: %v", err)
		}
		defer c.Close()
		msg := make([]byte, 64)
		n, end := 0, time.Now().Add(d)
		for ; time.Now().Before(end); n++ {
			c.WriteMessage(websocket.BinaryMessage, msg)
			if _, _, err := c.ReadMessage(); err != nil {
				t.Fatal(err)
			}
		}
		return float64(n) / d.Seconds()
	}
	return addr, "__Host-froog_url=pt_bench", echo
}
