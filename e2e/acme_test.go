package e2e_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"froog.tech/froog/certs/pebbletest"
	"froog.tech/froog/internal/loopback"
	"froog.tech/froog/internal/wait"
)

// The certificates issue's end-to-end checks against the real binary and
// a real ACME CA (Pebble): a new URL's first visit gets a certificate
// issued on the spot; a second edge on the same Postgres serves the same
// certificate without a new order; two edges asked for one new name at
// once make one order.
func TestACMEOnDemand(t *testing.T) {
	t.Parallel()
	httpPort, tlsPort := loopback.FreePort(t), loopback.FreePort(t)
	ca := pebbletest.Start(t, httpPort, tlsPort, 0)
	root := filepath.Join(t.TempDir(), "pebble-dir.pem")
	os.WriteFile(root, ca.DirectoryRootPEM, 0o644)

	db, key, ctlKey, secret := selfHosted(t)
	start(t, regexp.MustCompile(`hostctl h1 running`), "hostctl", "--database-url", db, "--host-name", "h1", "--data", t.TempDir(), "--control-key-file", ctlKey)
	_, m := start(t, regexp.MustCompile(`on (http://\S+)/v1`), "api", "--database-url", db, "--api-addr", "127.0.0.1:0",
		"--domain", "froog.test", "--secret-key-file", secret, "--control-key-file", ctlKey)
	edgeRE := regexp.MustCompile(`froog edge on https://(\S+) `)
	acme := []string{"--database-url", db, "--domain", "froog.test", "--control-key-file", ctlKey, "--acme-ca", ca.Directory, "--acme-ca-root", root}
	// Pebble validates against the first edge's ports; the second answers
	// from the store what the first ordered, and the other way round.
	metrics := fmt.Sprintf("127.0.0.1:%d", loopback.FreePort(t))
	_, e1 := start(t, edgeRE, append([]string{"edge", "--edge-addr", fmt.Sprintf("127.0.0.1:%d", tlsPort), "--edge-http-addr", fmt.Sprintf("127.0.0.1:%d", httpPort),
		"--metrics-addr", metrics}, acme...)...)
	_, e2 := start(t, edgeRE, append([]string{"edge", "--edge-addr", "127.0.0.1:0", "--edge-http-addr", "127.0.0.1:0"}, acme...)...)
	trust := ca.IssuerRoots()
	edges := []*http.Client{edgeClientWith(e1[1], trust, true), edgeClientWith(e2[1], trust, false)}

	c := client{t: t, base: m[1], key: key}
	link, host := hostEcho(t, c)
	if ca.Orders() != 0 {
		t.Fatalf("%d orders before any visit", ca.Orders())
	}
	// The feed brings the new URL to the edge within milliseconds; until
	// then its name is refused.
	var res *http.Response
	wait.For(t, 15*time.Second, "the first visit", func() bool {
		var err error
		res, err = edges[0].Get(link)
		if err == nil {
			res.Body.Close()
		}
		return err == nil
	})
	if res.StatusCode != 302 {
		t.Fatalf("first visit: %d", res.StatusCode)
	}
	cookie := strings.SplitN(res.Header.Get("Set-Cookie"), ";", 2)[0]
	first := res.TLS.PeerCertificates[0]
	if ca.Orders() != 1 || first.Subject.CommonName != host && !contains(first.DNSNames, host) {
		t.Fatalf("after the first visit: %d orders, certificate for %v", ca.Orders(), first.DNSNames)
	}
	if res, _ := visit(t, edges[0], "GET", "https://"+host+"/", "Cookie", cookie); res.StatusCode != 200 {
		t.Fatalf("behind the new certificate: %d", res.StatusCode)
	}
	res, body := visit(t, edges[1], "GET", "https://"+host+"/", "Cookie", cookie)
	if res.StatusCode != 200 {
		t.Fatalf("second edge: %d %s", res.StatusCode, body)
	}
	if got := res.TLS.PeerCertificates[0]; got.SerialNumber.Cmp(first.SerialNumber) != 0 || ca.Orders() != 1 {
		t.Fatalf("second edge: serial %v (first %v), %d orders", got.SerialNumber, first.SerialNumber, ca.Orders())
	}

	// A second URL, asked of both edges at once.
	var u struct{ Host string }
	c.call("POST", "/v1/sandboxes/e2e/urls", `{"port": 9, "public": true}`, 201, &u)
	var wg sync.WaitGroup
	serials := make([]string, 2)
	for i, web := range edges {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Until the feed brings the URL (milliseconds), the name is
			// unknown and the handshake is refused.
			wait.Until(10*time.Second, func() bool {
				res, err := web.Get("https://" + u.Host + "/")
				if err == nil {
					res.Body.Close()
					serials[i] = res.TLS.PeerCertificates[0].SerialNumber.String()
				}
				return err == nil
			})
		}()
	}
	wg.Wait()
	if serials[0] == "" || serials[0] != serials[1] || ca.Orders() != 2 {
		t.Fatalf("one new name on two edges: serials %v, %d orders in all (want 2)", serials, ca.Orders())
	}
	res, err := http.Get("http://" + metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	// The first name was ordered here; the second by one of the two.
	for _, want := range []string{`froog_certs_orders_started_total [12]\n`, `froog_certs_orders_succeeded_total [12]\n`, `froog_certs_issuance_seconds_count [12]\n`,
		`froog_certs_served_total [1-9]`, `froog_certs_refused_total \d`, `froog_certs_loaded_from_storage_total \d`} {
		if !regexp.MustCompile(want).Match(b) {
			t.Errorf("the first edge's metrics lack %q:\n%s", want, grep(string(b), "froog_certs"))
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
