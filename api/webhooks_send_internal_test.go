package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"froog.tech/froog/internal/loopback"
)

// A failed send says why in fixed words, never the address, the port or
// the certificate's details the error holds: the delivery log is no port
// scanner. Each case is a real failure of a real client.
func TestSendFailureSaysLittle(t *testing.T) {
	t.Parallel()
	closed := strconv.Itoa(loopback.FreePort(t)) // a port nothing listens on
	untrusted := httptest.NewTLSServer(http.NotFoundHandler())
	defer untrusted.Close()
	// A bound on a hang only: each case fails on its own, and a loaded
	// machine's TLS handshake took more than 5 s.
	client := &http.Client{Timeout: time.Minute}
	for _, c := range []struct{ url, want string }{
		{"https://127.0.0.1:" + closed + "/", "the endpoint refused the connection"},
		{untrusted.URL + "/", "the endpoint's TLS certificate is not valid for its name"},
		{"https://no-such-name.invalid/", "the endpoint's name did not resolve"},
	} {
		req, _ := http.NewRequestWithContext(context.Background(), "POST", c.url, nil)
		_, err := client.Do(req)
		if err == nil {
			t.Fatalf("%s: no error", c.url)
		}
		got := sendFailure(err)
		if got != c.want || strings.Contains(got, "127.0.0.1") || strings.Contains(got, closed) {
			t.Errorf("%s: %q, want %q (from %v)", c.url, got, c.want, err)
		}
	}
}
