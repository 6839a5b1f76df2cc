//go:build bench

package froog_test

import (
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"froog.tech/froog/internal/loopback"
)

// The tunnel systems people install to expose a local port at a public
// name, as TestEdgeBench's peers: frp (frps and frpc) and chisel, built at
// pinned versions into .bench/bin by deploy/testdeps.sh --bench.

// benchBin is the path of a peer's binary in .bench/bin.
func benchBin(t *testing.T, name string) string {
	p, err := filepath.Abs(filepath.Join(".bench", "bin", name))
	if err == nil {
		_, err = os.Stat(p)
	}
	if err != nil {
		t.Fatalf("%s is not built: make bench builds it (deploy/testdeps.sh --bench): %v", name, err)
	}
	return p
}

// nginxFront is an nginx server block that terminates TLS at listen with
// crt and key, and proxies / to app and /upload to sink, both plain HTTP;
// passHost sends the client's Host on (frps routes by it) instead of the
// upstream's name.
func nginxFront(name, listen, crt, key, app, sink string, passHost bool) string {
	host := ""
	if passHost {
		host = " proxy_set_header Host $host;"
	}
	return fmt.Sprintf(`upstream %[1]s_app { server %[5]s; keepalive 64; }
upstream %[1]s_sink { server %[6]s; keepalive 8; }
server { listen %[2]s ssl http2; ssl_certificate %[3]s; ssl_certificate_key %[4]s; access_log off;
  location / { proxy_pass http://%[1]s_app; proxy_http_version 1.1; proxy_set_header Connection "";%[7]s proxy_buffering off; }
  location /upload { proxy_pass http://%[1]s_sink; proxy_http_version 1.1; proxy_set_header Connection "";%[7]s proxy_request_buffering off; client_max_body_size 0; } }
`, name, listen, crt, key, app, sink, host)
}

// frpPeer is frps with frpc logged in to it, as its docs set them up:
// frpc's tunnel to frps is TLS (frp's default) carrying yamux streams.
// Behind frps's vhostHTTPSPort, frp.froog.test (/) and frp-up.froog.test
// (/upload) reach frpc's https2http plugin, which terminates TLS with the
// bench CA's certificates and proxies to the app and the sink; behind its
// vhostHTTPPort, nginx-frp.froog.test routes by Host and path to frpc's
// http proxies of the same two.
type frpPeer struct {
	HTTPS, HTTP string // frps's vhost listeners
	Frps, Frpc  int    // process ids
}

func startFrp(t *testing.T, dir, app, sink string, cert func(name string) (string, string)) *frpPeer {
	bind := loopback.FreePort(t)
	f := &frpPeer{HTTPS: fmt.Sprintf("127.0.0.1:%d", loopback.FreePort(t)), HTTP: fmt.Sprintf("127.0.0.1:%d", loopback.FreePort(t))}
	frps := filepath.Join(dir, "frps.toml")
	os.WriteFile(frps, fmt.Appendf(nil, `bindAddr = "127.0.0.1"
bindPort = %d
vhostHTTPSPort = %s
vhostHTTPPort = %s
auth.token = "bench"
log.to = "console"
log.level = "warn"
`, bind, port(f.HTTPS), port(f.HTTP)), 0o600)
	conf := fmt.Appendf(nil, `serverAddr = "127.0.0.1"
serverPort = %d
auth.token = "bench"
loginFailExit = true
log.to = "console"
log.level = "warn"
`, bind)
	for _, p := range []struct{ name, domain, to, location string }{
		{"app", "frp.froog.test", app, "/"},
		{"sink", "frp-up.froog.test", sink, "/upload"},
	} {
		crt, key := cert(p.domain)
		conf = fmt.Appendf(conf, `
[[proxies]]
name = "%[1]s-https"
type = "https"
customDomains = [%[2]q]
plugin = { type = "https2http", localAddr = %[3]q, crtPath = %[4]q, keyPath = %[5]q }

[[proxies]]
name = "%[1]s-http"
type = "http"
localIP = "127.0.0.1"
localPort = %[6]s
customDomains = ["nginx-frp.froog.test"]
locations = [%[7]q]
`, p.name, p.domain, p.to, crt, key, port(p.to), p.location)
	}
	frpc := filepath.Join(dir, "frpc.toml")
	os.WriteFile(frpc, conf, 0o600)
	f.Frps = startPeer(t, f.HTTPS, benchBin(t, "frps"), "-c", frps)
	f.Frpc = startPeer(t, "", benchBin(t, "frpc"), "-c", frpc)
	return f
}

// chiselPeer is `chisel server --reverse` with a chisel client holding two
// reverse remotes (SSH over a websocket): App on the server's side reaches
// the app, Sink the sink. Neither speaks TLS to a browser: nginx fronts
// them as it fronts `ssh -L`.
type chiselPeer struct {
	App, Sink      string
	Server, Client int // process ids
}

func startChisel(t *testing.T, app, sink string) *chiselPeer {
	srv := fmt.Sprintf("127.0.0.1:%d", loopback.FreePort(t))
	c := &chiselPeer{App: fmt.Sprintf("127.0.0.1:%d", loopback.FreePort(t)), Sink: fmt.Sprintf("127.0.0.1:%d", loopback.FreePort(t))}
	bin := benchBin(t, "chisel")
	c.Server = startPeer(t, srv, bin, "server", "--host", "127.0.0.1", "--port", port(srv), "--reverse", "--auth", "bench:bench")
	c.Client = startPeer(t, c.App, bin, "client", "--auth", "bench:bench", "http://"+srv, "R:"+c.App+":"+app, "R:"+c.Sink+":"+sink)
	if err := waitListen(c.Sink, 15*time.Second); err != nil {
		t.Fatalf("chisel: %v", err)
	}
	return c
}

// startPeer runs a peer's binary until the test ends, once something
// listens on addr (at once when addr is ""), and returns its process id.
func startPeer(t *testing.T, addr, bin string, args ...string) int {
	cmd := exec.Command(bin, args...)
	cmd.WaitDelay = 10 * time.Second
	if addr == "" {
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatalf("%s: %v", filepath.Base(bin), err)
		}
	} else if out, err := startAndWait(cmd, addr); err != nil {
		t.Fatalf("%s: %v %s", filepath.Base(bin), err, out)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd.Process.Pid
}

// waitOK polls GET url through addr until it answers 200: a tunnel's
// routes exist only once its client has logged in.
func waitOK(t *testing.T, roots *x509.CertPool, addr, url string) {
	c := benchClient(roots, addr)
	defer c.CloseIdleConnections()
	var last string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		resp, err := c.Get(url)
		if err != nil {
			last = err.Error()
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return
		}
		last = resp.Status
	}
	t.Fatalf("%s never answered 200: %s", url, last)
}
