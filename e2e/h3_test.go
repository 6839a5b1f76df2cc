package e2e_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

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
