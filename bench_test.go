//go:build bench

package froog_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"froog.tech/froog/certs"
	"froog.tech/froog/internal/loopback"
	"froog.tech/froog/internal/testkit"
	"froog.tech/froog/store"
	"froog.tech/froog/store/embedded"
	"froog.tech/froog/tunnel/sshdtest"
)

// TestEdgeBench is `make bench`'s whole-system measure of what the proxy
// itself costs. Every stack reaches the same upstream (nginx serving
// static files; a Go sink for uploads), over HTTPS with certificates from
// one CA, through a tunnel:
//
//	direct        the upstream itself, plain HTTP (the floor)
//	edge          froog's edge (a process of its own) with a private URL's
//	              cookie, through its tunnel to OpenSSH's sshd
//	nginx-ssh     nginx in front of `ssh -L` through the same sshd
//	caddy-ssh     Caddy in front of the same `ssh -L`
//	frp           frps's vhostHTTPSPort → frpc's https2http (startFrp)
//	nginx-frp     nginx → frps's vhostHTTPPort → frpc
//	nginx-chisel  nginx → chisel server's reverse remote → chisel client
//	ssh-l         the bare `ssh -L` (bulk only)
//
// For each stack, in rounds that rotate the order: small GETs at each
// fixed offered rate (open loop, latency from the intended send time),
// with the CPU time of the public side's processes (each stack's chain
// names them: what terminates TLS, proxies HTTP and holds the public end
// of the tunnel) read from /proc over the run, ÷ requests; then a 128 MiB
// download and upload with their CPU per MB. Then the edge's scale
// figures: idle websockets, idle tunnels, a 100,000-URL route table, TLS
// handshakes against nginx and frp. The figures are medians over the
// rounds, with their range. It writes .bench/results.json,
// .bench/results.md and the edge's CPU and allocation profiles
// (.bench/edge-*.pprof). Nothing here fails on a number.
func TestEdgeBench(t *testing.T) {
	if os.Getenv("FROOG_BENCH") == "" {
		t.Skip("make bench runs this (FROOG_BENCH=1); it takes a few minutes")
	}
	for _, bin := range []string{"nginx", "caddy", "curl"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s is not installed: make bench installs it", bin)
		}
	}
	raiseNoFile()
	var rates []int
	for _, f := range strings.Split(envStr("FROOG_BENCH_RATES", "1000,5000"), ",") {
		r, err := strconv.Atoi(f)
		if err != nil || r <= 0 {
			t.Fatalf("FROOG_BENCH_RATES: %q is not a rate a second", f)
		}
		rates = append(rates, r)
	}
	rounds := envInt("FROOG_BENCH_ROUNDS", 3)
	// FROOG_BENCH_PARTS=scale (or paths) runs a part alone, when working on it.
	parts := envStr("FROOG_BENCH_PARTS", "paths,scale")
	if !strings.Contains(parts, "paths") {
		rounds = 0
	}
	// FROOG_BENCH_DURATION is the window at the first rate; a higher
	// rate gets as many requests, in no less than 2 s (10,000 at 5,000/s:
	// p99.9 still rests on ten of them).
	dur, err := time.ParseDuration(envStr("FROOG_BENCH_DURATION", "4s"))
	if err != nil {
		t.Fatal(err)
	}
	out, _ := filepath.Abs(".bench")
	os.MkdirAll(out, 0o755)
	dir := t.TempDir()
	ca, err := certs.OpenLocalCA(filepath.Join(dir, "ca"), "froog.test")
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca", "ca.pem")

	// The upstream: nginx serving a small page and a 128 MiB file; a Go
	// sink that reads uploads.
	www := filepath.Join(dir, "www")
	os.MkdirAll(www, 0o755)
	os.WriteFile(filepath.Join(www, "index.html"), []byte("hello, world\n"), 0o644)
	bigFile := filepath.Join(www, "big")
	big, _ := os.Create(bigFile)
	big.Truncate(bigSize)
	big.Close()
	upstream := fmt.Sprintf("127.0.0.1:%d", loopback.FreePort(t))
	runNginx(t, dir, "upstream", fmt.Sprintf(`server { listen %s; root %s; access_log off; }`, upstream, www))
	sinkLn, _ := net.Listen("tcp", "127.0.0.1:0")
	sink := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "%d\n", n)
	})}
	go sink.Serve(sinkLn)
	t.Cleanup(func() { sink.Close() })
	sinkAddr := sinkLn.Addr().String()

	// OpenSSH's sshd, and `ssh -L` through it to the upstream and the sink.
	signer, keyPEM := testkit.NewKeyPEM(t)
	sshd := sshdtest.Start(t, signer.PublicKey())
	forward, forwardPid := sshd.ForwardProcess(t, keyPEM, upstream)
	forwardUp, forwardUpPid := sshd.ForwardProcess(t, keyPEM, sinkAddr)

	// The peers: nginx and Caddy over HTTPS in front of the forwards.
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
	// The tunnel systems: frp, and chisel; and one nginx (one worker, as
	// for `ssh -L`) fronting `ssh -L`, frps's HTTP vhosts and chisel.
	frp := startFrp(t, dir, upstream, sinkAddr, writeCert)
	chisel := startChisel(t, upstream, sinkAddr)
	nginxAddr := fmt.Sprintf("127.0.0.1:%d", loopback.FreePort(t))
	nginxFrpAddr := fmt.Sprintf("127.0.0.1:%d", loopback.FreePort(t))
	nginxChiselAddr := fmt.Sprintf("127.0.0.1:%d", loopback.FreePort(t))
	crt, key := writeCert("nginx.froog.test")
	frpCrt, frpKey := writeCert("nginx-frp.froog.test")
	chiselCrt, chiselKey := writeCert("nginx-chisel.froog.test")
	nginxPid := runNginx(t, dir, "front", nginxFront("ssh", nginxAddr, crt, key, forward, forwardUp, false)+
		nginxFront("frp", nginxFrpAddr, frpCrt, frpKey, frp.HTTP, frp.HTTP, true)+
		nginxFront("chisel", nginxChiselAddr, chiselCrt, chiselKey, chisel.App, chisel.Sink, false))
	frpURL := "https://frp.froog.test:" + port(frp.HTTPS)
	frpUpURL := "https://frp-up.froog.test:" + port(frp.HTTPS)
	nginxFrpURL := "https://nginx-frp.froog.test:" + port(nginxFrpAddr)
	nginxChiselURL := "https://nginx-chisel.froog.test:" + port(nginxChiselAddr)
	for _, w := range [][2]string{{frp.HTTPS, frpURL + "/"}, {frp.HTTPS, frpUpURL + "/upload"},
		{nginxFrpAddr, nginxFrpURL + "/"}, {nginxFrpAddr, nginxFrpURL + "/upload"},
		{nginxChiselAddr, nginxChiselURL + "/"}, {nginxChiselAddr, nginxChiselURL + "/upload"}} {
		waitOK(t, ca.Pool(), w[0], w[1])
	}
	caddyAddr := fmt.Sprintf("127.0.0.1:%d", loopback.FreePort(t))
	crt, key = writeCert("caddy.froog.test")
	caddyfile := filepath.Join(dir, "Caddyfile")
	os.WriteFile(caddyfile, []byte(fmt.Sprintf("{\n\tadmin off\n\tauto_https off\n}\nhttps://caddy.froog.test:%s {\n\tbind 127.0.0.1\n\ttls %s %s\n\treverse_proxy /upload* %s\n\treverse_proxy %s\n}\n",
		port(caddyAddr), crt, key, forwardUp, forward)), 0o644)
	caddy := exec.Command("caddy", "run", "--config", caddyfile, "--adapter", "caddyfile")
	caddy.Env = append(os.Environ(), "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir, "HOME="+dir)
	if out, err := startAndWait(caddy, caddyAddr); err != nil {
		t.Fatalf("caddy: %v %s", err, out)
	}
	t.Cleanup(func() { caddy.Process.Kill(); caddy.Wait() })

	// froog's edge in a process of its own, its tunnel reaching the same
	// sshd; and, for the scale figures, sandboxes behind an SSH server in
	// this process.
	goSSH, err := startGoSSH(signer.PublicKey(), testkit.NewKey(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(goSSH.Close)
	idleTunnels := envInt("FROOG_BENCH_TUNNELS", 1000)
	storeDir := filepath.Join(dir, "store")
	benchStore(t, storeDir, sshd, upstream, sinkAddr, goSSH, idleTunnels)
	keyFile := filepath.Join(dir, "client_key")
	os.WriteFile(keyFile, keyPEM, 0o600)
	edge := startChild(t, "edge", "FROOG_BENCH_STORE="+storeDir, "FROOG_BENCH_CA="+filepath.Join(dir, "ca"), "FROOG_BENCH_KEY="+keyFile)
	edgeAddr := strings.Fields(edge.next())[1]
	const cookie = "__Host-froog_url=pt_bench"

	type stack struct {
		name, chain       string
		peer              bool
		addr, url, cookie string
		down, up          string // bulk URLs; "" for none
		pids              func() []int
	}
	edgeURL := func(label, path string) string { return "https://" + label + ".froog.test:" + port(edgeAddr) + path }
	nginxURL := "https://nginx.froog.test:" + port(nginxAddr)
	caddyURL := "https://caddy.froog.test:" + port(caddyAddr)
	nginxPids := func(more ...int) func() []int {
		return func() []int { return append(withChildren(nginxPid), more...) }
	}
	stacks := []stack{
		{"direct", "the upstream, plain HTTP", false, upstream, "http://" + upstream + "/", "", "http://" + upstream + "/big", "http://" + sinkAddr + "/upload",
			func() []int { return nil }},
		{"edge", "**edge** (TLS, HTTP, SSH client) → sshd → upstream", false, edgeAddr, edgeURL("box", "/"), cookie, edgeURL("box", "/big"), edgeURL("up", "/upload"),
			func() []int { return []int{edge.Pid} }},
		{"nginx-ssh", "**nginx** (TLS, HTTP) → **`ssh -L`** → sshd → upstream", true, nginxAddr, nginxURL + "/", "", nginxURL + "/big", nginxURL + "/upload",
			nginxPids(forwardPid, forwardUpPid)},
		{"caddy-ssh", "**Caddy** (TLS, HTTP) → **`ssh -L`** → sshd → upstream", true, caddyAddr, caddyURL + "/", "", caddyURL + "/big", caddyURL + "/upload",
			func() []int { return []int{caddy.Process.Pid, forwardPid, forwardUpPid} }},
		{"frp", "**frps** (vhostHTTPSPort, by SNI) → TLS tunnel → **frpc** (https2http: TLS, HTTP) → upstream", true, frp.HTTPS, frpURL + "/", "", frpURL + "/big", frpUpURL + "/upload",
			func() []int { return []int{frp.Frps, frp.Frpc} }},
		{"nginx-frp", "**nginx** (TLS, HTTP) → **frps** (vhostHTTPPort, by Host) → TLS tunnel → frpc → upstream", true, nginxFrpAddr, nginxFrpURL + "/", "", nginxFrpURL + "/big", nginxFrpURL + "/upload",
			nginxPids(frp.Frps)},
		{"nginx-chisel", "**nginx** (TLS, HTTP) → **chisel server** (reverse remote) → SSH over websocket → chisel client → upstream", true, nginxChiselAddr, nginxChiselURL + "/", "", nginxChiselURL + "/big", nginxChiselURL + "/upload",
			nginxPids(chisel.Server)},
		{"ssh-l", "**`ssh -L`** → sshd → upstream, plain HTTP", false, "", "", "", "http://" + forward + "/big", "http://" + forwardUp + "/upload",
			func() []int { return []int{forwardPid, forwardUpPid} }},
		// The edge against itself: HTTP/3 beside its own HTTP/2, each
		// multiplexing one connection (small GETs only: curl has no h3).
		{"edge-h2", "**edge** over HTTP/2 → sshd → upstream", false, edgeAddr, edgeURL("box", "/"), cookie, "", "",
			func() []int { return []int{edge.Pid} }},
		{"edge-h3", "**edge** over HTTP/3 (QUIC) → sshd → upstream", false, edgeAddr, edgeURL("box", "/"), cookie, "", "",
			func() []int { return []int{edge.Pid} }},
	}

	type small struct{ rps, p50, p99, p999, cpuReq float64 }
	type sample struct {
		small                    []small // one a rate
		down, downCPU, up, upCPU float64
	}
	samples := map[string][]sample{}
	warm := 500 * time.Millisecond
	window := func(rate int) time.Duration {
		return max(2*time.Second, dur*time.Duration(rates[0])/time.Duration(rate))
	}
	for r := range rounds {
		for i := range stacks {
			s := stacks[(i+r)%len(stacks)]
			var sm sample
			for _, rate := range rates {
				if s.url == "" {
					break
				}
				var c0 time.Duration
				client := benchClientFor(s.name, ca.Pool(), s.addr)
				fr := runFixedRate(client, s.url, s.cookie, rate, warm, window(rate), func(begin bool) {
					if begin {
						c0 = testkit.CPUTime(s.pids()...)
					} else {
						c0 = testkit.CPUTime(s.pids()...) - c0
					}
				})
				client.CloseIdleConnections()
				x := small{rps: float64(fr.sent-fr.failed) / fr.elapsed.Seconds(), p50: ms(fr.p50), p99: ms(fr.p99), p999: ms(fr.p999),
					cpuReq: float64(c0.Microseconds()) / float64(fr.sent)}
				if fr.failed > 0 {
					t.Errorf("%s at %d/s: %d of %d requests failed", s.name, rate, fr.failed, fr.sent)
				}
				t.Logf("round %d %s: %.0f req/s at %d/s, p50 %.2f p99 %.2f p99.9 %.2f ms, %.1f µs CPU/req",
					r+1, s.name, x.rps, rate, x.p50, x.p99, x.p999, x.cpuReq)
				sm.small = append(sm.small, x)
			}
			if s.down != "" {
				sm.down, sm.downCPU = bulk(t, caFile, s.down, s.cookie, "", s.pids)
				sm.up, sm.upCPU = bulk(t, caFile, s.up, s.cookie, bigFile, s.pids)
				t.Logf("round %d %s: down %.0f MB/s %.2f ms CPU/MB, up %.0f MB/s %.2f ms CPU/MB", r+1, s.name, sm.down, sm.downCPU, sm.up, sm.upCPU)
			}
			samples[s.name] = append(samples[s.name], sm)
		}
	}

	// The edge's profiles: one more pass with the profiler on (the
	// measured rounds above ran without it).
	if rounds > 0 {
		edgeProfiles(t, edge, out, func() {
			client := benchClient(ca.Pool(), edgeAddr)
			runFixedRate(client, edgeURL("box", "/"), cookie, rates[0], 0, dur, nil)
			client.CloseIdleConnections()
		}, func() {
			bulk(t, caFile, edgeURL("box", "/big"), cookie, "", nil)
			bulk(t, caFile, edgeURL("up", "/upload"), cookie, bigFile, nil)
		})
	}

	var paths []pathResult
	for _, s := range stacks {
		ss := samples[s.name]
		if len(ss) == 0 {
			continue
		}
		pick := func(f func(sample) float64) (float64, [2]float64) {
			v := make([]float64, len(ss))
			for i := range ss {
				v[i] = f(ss[i])
			}
			slices.Sort(v)
			return v[len(v)/2], [2]float64{v[0], v[len(v)-1]}
		}
		p := pathResult{Path: s.name, Chain: s.chain, Peer: s.peer}
		for i, rate := range rates {
			if s.url == "" {
				break
			}
			at := func(f func(small) float64) func(sample) float64 {
				return func(x sample) float64 { return f(x.small[i]) }
			}
			sr := smallResult{Rate: rate}
			sr.RPS, _ = pick(at(func(x small) float64 { return x.rps }))
			sr.P50, _ = pick(at(func(x small) float64 { return x.p50 }))
			sr.P99, sr.P99Range = pick(at(func(x small) float64 { return x.p99 }))
			sr.P999, sr.P999Range = pick(at(func(x small) float64 { return x.p999 }))
			sr.CPUPerReq, sr.CPUPerReqRange = pick(at(func(x small) float64 { return x.cpuReq }))
			p.Small = append(p.Small, sr)
		}
		if s.down != "" {
			p.MBps, p.MBpsRange = pick(func(x sample) float64 { return x.down })
			p.CPUPerMB, p.CPUPerMBRange = pick(func(x sample) float64 { return x.downCPU })
			p.UpMBps, p.UpMBpsRange = pick(func(x sample) float64 { return x.up })
			p.UpCPUPerMB, p.UpCPUPerMBRange = pick(func(x sample) float64 { return x.upCPU })
		}
		paths = append(paths, p)
	}

	var scale map[string]float64
	if strings.Contains(parts, "scale") {
		scale = benchScale(t, edge, out, edgeAddr, ca.Pool(), []hsPeer{
			{"nginx", nginxAddr, "nginx.froog.test", withChildren(nginxPid)},
			{"frp", frp.HTTPS, "frp.froog.test", []int{frp.Frps, frp.Frpc}},
		})
	}
	res := results{Rounds: rounds, Rates: rates, Paths: paths, Scale: scale}
	js, _ := json.MarshalIndent(res, "", "  ")
	os.WriteFile(filepath.Join(out, "results.json"), append(js, '\n'), 0o644)
	md := res.markdown()
	os.WriteFile(filepath.Join(out, "results.md"), []byte(md), 0o644)
	fmt.Println(md)
	edge.do("quit")
}

// edgeProfiles writes the edge's CPU profiles of small requests and of
// bulk transfers, and its allocations, to out.
func edgeProfiles(t *testing.T, edge *child, out string, small, bulk func()) {
	edge.do("cpu " + filepath.Join(out, "edge-cpu-small.pprof"))
	small()
	edge.do("cpu")
	edge.do("cpu " + filepath.Join(out, "edge-cpu-bulk.pprof"))
	bulk()
	edge.do("cpu")
	edge.do("allocs " + filepath.Join(out, "edge-allocs.pprof"))
}

// benchStore fills the edge's store: the sandbox "box" behind OpenSSH's
// sshd with URLs box (the upstream) and up (the sink); "scale" and n idle
// sandboxes behind goSSH, scale with the URL ws.
func benchStore(t *testing.T, dir string, sshd *sshdtest.Server, upstream, sink string, goSSH *goSSHServer, n int) {
	ctx := context.Background()
	st, err := embedded.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	a, _ := st.CreateAccount(ctx, store.Account{MaxSandboxes: n + 10, URLNamesPerDay: 10, StartsPerMinute: n + 10, StartsPerHour: n + 10, StartsPerDay: n + 10})
	sandbox := func(name, addr, hostKey string) string {
		host, sp, _ := net.SplitHostPort(addr)
		spn, _ := strconv.Atoi(sp)
		sb, err := st.CreateSandbox(ctx, store.Sandbox{AccountID: a.ID, Name: name, State: store.StateRunning, DesiredState: store.StateRunning,
			SSHHost: host, SSHPort: spn, SSHHostKey: hostKey, CreatedAt: time.Now()}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return sb.ID
	}
	url := func(sb, label string, p int) {
		if _, err := st.PutURL(ctx, sb, p, func(*store.URL, *store.AuditEvent) (store.URL, error) {
			return store.URL{Hostname: label, TokenHash: store.HashSecret("pt_bench"), CreatedAt: time.Now(), UpdatedAt: time.Now()}, nil
		}, nil); err != nil {
			t.Fatal(err)
		}
	}
	box := sandbox("box", sshd.Addr, sshd.HostKey)
	url(box, "box", must(strconv.Atoi(port(upstream))))
	url(box, "up", must(strconv.Atoi(port(sink))))
	url(sandbox("scale", goSSH.Addr, goSSH.HostKey), "ws", 1)
	for i := range n {
		sandbox(fmt.Sprintf("idle%05d", i), goSSH.Addr, goSSH.HostKey)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func envStr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func envInt(k string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(k)); err == nil {
		return v
	}
	return def
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func median(d []time.Duration) time.Duration {
	d = slices.Clone(d)
	slices.Sort(d)
	return d[len(d)/2]
}

func port(addr string) string { _, p, _ := net.SplitHostPort(addr); return p }

func startAndWait(cmd *exec.Cmd, addr string) (string, error) {
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return "", err
	}
	if err := waitListen(addr, 15*time.Second); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return out.String(), err
	}
	return "", nil
}

// waitListen polls addr until something accepts there, for at most d.
func waitListen(addr string, d time.Duration) error {
	for deadline := time.Now().Add(d); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nothing listened on %s", addr)
		}
	}
}

// runNginx runs nginx with one server block, in its own prefix, and
// returns its master's process id.
func runNginx(t *testing.T, dir, name, server string) int {
	prefix := filepath.Join(dir, "nginx-"+name)
	os.MkdirAll(filepath.Join(prefix, "logs"), 0o755)
	user := ""
	if os.Getuid() == 0 {
		user = "user root;" // the files are in the test's private folder
	}
	conf := fmt.Sprintf(user+`worker_processes 1; pid %s/nginx.pid; error_log %s/logs/error.log;
events { worker_connections 16384; }
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
	return cmd.Process.Pid
}

// bigSize is the size of the upstream's big file, which bulk moves.
const bigSize = 128 << 20

// bulk moves the big file with curl, down from url or, with upload set, that
// file up to it, and returns MB/s and the CPU milliseconds per MB of the
// processes pids gives (0 when it is nil).
func bulk(t *testing.T, caFile, url, cookie, upload string, pids func() []int) (mbs, cpuPerMB float64) {
	args := []string{"-s", "-o", "/dev/null", "--cacert", caFile}
	if upload != "" {
		args = append(args, "-w", "%{speed_upload} %{http_code} %{size_upload}", "-T", upload)
	} else {
		args = append(args, "-w", "%{speed_download} %{http_code} %{size_download}")
	}
	if cookie != "" {
		args = append(args, "-H", "Cookie: "+cookie)
	}
	args = append(args, "--resolve", resolveFor(url), url)
	var c0 time.Duration
	if pids != nil {
		c0 = testkit.CPUTime(pids()...)
	}
	out, err := exec.Command("curl", args...).Output()
	if err != nil {
		t.Fatalf("curl %s: %v", url, err)
	}
	var cpu time.Duration
	if pids != nil {
		cpu = testkit.CPUTime(pids()...) - c0
	}
	var speed float64
	var code, size int64
	fmt.Sscan(string(out), &speed, &code, &size)
	if code != 200 || size != bigSize {
		t.Fatalf("curl %s: %d, %d bytes", url, code, size)
	}
	return speed / 1e6, float64(cpu.Microseconds()) / 1000 / (bigSize / 1e6)
}

func resolveFor(url string) string {
	hostport := strings.SplitN(strings.SplitN(url, "://", 2)[1], "/", 2)[0]
	return hostport + ":127.0.0.1"
}
