package e2e_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"froog.tech/froog/internal/testdep"
	"froog.tech/froog/internal/wait"
)

// h3Client reaches addr (its UDP port) over HTTP/3 for every host, with
// quic-go's own client, trusting pool.
func h3Client(t *testing.T, addr string, pool *x509.CertPool) *http.Client {
	tr := &http3.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool},
		Dial: func(ctx context.Context, _ string, tc *tls.Config, qc *quic.Config) (*quic.Conn, error) {
			return quic.DialAddr(ctx, addr, tc, qc)
		},
	}
	t.Cleanup(func() { tr.Close() })
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// froogd dev on port 0 advertises HTTP/3 (Alt-Svc) on the port it
// bound, and serves it there.
func TestH3DevAltSvc(t *testing.T) {
	t.Parallel()
	d := startDev(t, devOptions{})
	_, port, _ := net.SplitHostPort(d.edge)
	newSandbox(t, d.c, "alt", 15*time.Second)
	u := "https://" + publicURL(t, d.c, "alt", 3000) + "/" // nothing listens: the edge's own answer
	res, err := d.web(false).Get(u)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	want := `h3=":` + port + `"; ma=86400`
	if got := res.Header.Get("Alt-Svc"); got != want {
		t.Fatalf("Alt-Svc %q from the edge on %s, want %q", got, d.edge, want)
	}
	res, err = h3Client(t, "127.0.0.1:"+port, d.pool).Get(u)
	if err != nil {
		t.Fatalf("HTTP/3 on the advertised port: %v", err)
	}
	res.Body.Close()
	if res.Proto != "HTTP/3.0" || res.StatusCode != 502 {
		t.Fatalf("HTTP/3 on the advertised port: %s %d, want HTTP/3.0 502", res.Proto, res.StatusCode)
	}
}

// The edge drains HTTP/3 on SIGTERM as it drains TCP: a request in
// flight over HTTP/3 is answered whole, while new QUIC connections are
// refused and a new request on the open connection is not served; then
// the process exits cleanly.
func TestH3EdgeDrain(t *testing.T) {
	t.Parallel()
	edge, addr, _, caFile, host, _ := drainEdge(t, "--drain-secs", "8")
	pool := caPool(t, caFile)
	h3 := h3Client(t, addr, pool)
	res, err := h3.Get("https://" + host + "/slow")
	if err != nil || res.StatusCode != 200 || res.Proto != "HTTP/3.0" {
		t.Fatalf("GET /slow over HTTP/3: %v %v", res, err)
	}
	defer res.Body.Close()
	if _, err := io.ReadFull(res.Body, make([]byte, 1)); err != nil {
		t.Fatalf("GET /slow over HTTP/3: first byte: %v", err)
	}
	type result struct {
		n   int
		err error
	}
	slow := make(chan result, 1)
	go func() {
		b, err := io.ReadAll(res.Body)
		slow <- result{len(b) + 1, err}
	}()

	exited := edge.term()

	qtc := &tls.Config{RootCAs: pool, ServerName: host, NextProtos: []string{http3.NextProtoH3}}
	wait.For(t, 5*time.Second, "the draining edge refuses new QUIC connections", func() bool {
		qc, err := quic.DialAddr(context.Background(), addr, qtc, &quic.Config{HandshakeIdleTimeout: 500 * time.Millisecond})
		if err == nil {
			qc.CloseWithError(0, "")
		}
		return err != nil
	})
	if late, err := h3.Get("https://" + host + "/slow"); err == nil {
		late.Body.Close()
		t.Errorf("a new request over HTTP/3 during the drain: %d, want it refused", late.StatusCode)
	}
	if r := <-slow; r.err != nil || r.n != 10 {
		t.Errorf("the request in flight at SIGTERM: %d of 10 bytes, %v; want it whole", r.n, r.err)
	}
	edge.exitsClean(t, exited, 30*time.Second) // --drain-secs 8
}

// HTTP/3 conformance of the real edge with an outside client: ngtcp2's
// example client (gtlsclient, Debian's ngtcp2-client: ngtcp2's QUIC,
// nghttp3's HTTP/3 and QPACK, GnuTLS), against froogd dev on a public
// URL. Three GETs on one connection and two POSTs with a body on
// another each reach the app and come back whole with its answer, and
// the edge neither resets a stream nor closes a connection: only the
// client closes, H3_NO_ERROR, when it is done.
func TestH3Conformance(t *testing.T) {
	t.Parallel()
	testdep.Need(t, "gtlsclient")
	// gtlsclient sends SNI only for the host name it dials, which must
	// then resolve to the edge: a private /etc/hosts, as TestH2Spec's.
	if out, err := exec.Command("unshare", "--mount", "true").CombinedOutput(); err != nil {
		testdep.Missing(t, "gtlsclient needs a mount namespace for a private /etc/hosts (unshare --mount): %v: %s", err, out)
	}
	c, edgeAddr, _ := devEdge(t)
	_, host := hostEcho(t, c)
	c.call("POST", "/v1/sandboxes/e2e/urls", `{"port": `+echoPort(t, c)+`, "public": true}`, 200, nil)
	ip, port, _ := net.SplitHostPort(edgeAddr)
	hosts := filepath.Join(t.TempDir(), "hosts")
	os.WriteFile(hosts, []byte("127.0.0.1 localhost\n"+ip+" "+host+"\n"), 0o644)
	body := filepath.Join(t.TempDir(), "body")
	os.WriteFile(body, []byte("sent by ngtcp2"), 0o644)

	// run makes the requests of paths on one connection and returns
	// what each answer's body was, by path, and the client's log.
	run := func(method string, paths ...string) (map[string]string, string) {
		t.Helper()
		dl := t.TempDir()
		args := []string{"--mount", "sh", "-c", `mount --bind "$0" /etc/hosts && exec "$@"`, hosts,
			"gtlsclient", "--exit-on-all-streams-close", "--no-quic-dump", "--no-http-dump", "--timeout", "20s",
			"--download", dl, "-m", method}
		if method == "POST" {
			args = append(args, "-d", body)
		}
		args = append(args, host, port)
		for _, p := range paths {
			args = append(args, "https://"+host+p)
		}
		out, err := exec.Command("unshare", args...).CombinedOutput()
		log := string(out)
		if err != nil {
			t.Fatalf("gtlsclient %s: %v\n%s", method, err, log)
		}
		got := map[string]string{}
		for _, p := range paths {
			b, _ := os.ReadFile(filepath.Join(dl, strings.TrimPrefix(p, "/"))) // the query kept in the name
			got[p] = string(b)
		}
		return got, log
	}
	type seen struct {
		Path    string
		Headers [][2]string
		Body    string
	}
	check := func(method string, paths ...string) {
		t.Helper()
		got, log := run(method, paths...)
		for _, p := range paths {
			var s seen
			if err := json.Unmarshal([]byte(got[p]), &s); err != nil || s.Path != p {
				t.Fatalf("%s %s over HTTP/3 from gtlsclient: the app's answer %q (%v)\n%s", method, p, got[p], err, log)
			}
			if want := map[string]string{"GET": "", "POST": "sent by ngtcp2"}[method]; s.Body != want {
				t.Errorf("%s %s: the app got the body %q, want %q", method, p, s.Body, want)
			}
		}
		if n := strings.Count(log, "[:status: 200]"); n != len(paths) {
			t.Errorf("%s: %d answers 200, want %d:\n%s", method, n, len(paths), log)
		}
		for _, line := range strings.Split(log, "\n") {
			for _, bad := range []string{"RESET_STREAM", "STOP_SENDING", "CONNECTION_CLOSE"} {
				if strings.Contains(line, "frm rx") && strings.Contains(line, bad) {
					t.Errorf("%s: the edge sent %s: %s", method, bad, line)
				}
			}
		}
		if !strings.Contains(log, "CONNECTION_CLOSE(0x1d) error_code=(unknown)(0x100)") {
			t.Errorf("%s: the client did not close its connection H3_NO_ERROR when done:\n%s", method, log)
		}
	}
	check("GET", "/one", "/two?x=1", "/three")
	check("POST", "/hook", "/other")
}
