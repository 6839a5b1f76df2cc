package e2e_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"testing"
	"time"

	"froog.tech/froog/internal/loopback"
	"froog.tech/froog/internal/wait"
)

// A URL's policy through the real binary: an allowlisted URL refuses
// another source address, spoofed X-Forwarded-For and all, and lets the
// allowed one in; the URL's own limit answers 429; frame_ancestors
// becomes the answers' Content-Security-Policy. Two loopback addresses
// are two clients.
func TestURLPolicyE2E(t *testing.T) {
	t.Parallel()
	d := startDev(t, devOptions{args: []string{"--rate-limit", "0"}})
	newSandbox(t, d.c, "pol", 15*time.Second)
	port := loopback.FreePort(t)
	d.c.call("POST", "/v1/sandboxes/pol/jobs", fmt.Sprintf(`{"command": "python3 -m http.server %d --bind 127.0.0.1"}`, port), 201, nil)
	var w struct{ Ready bool }
	d.c.call("POST", "/v1/sandboxes/pol/wait", fmt.Sprintf(`{"port": %d, "timeout_secs": 30}`, port), 200, &w)
	if !w.Ready {
		t.Fatal("the app never listened")
	}
	var u struct{ Host string }
	d.c.call("POST", "/v1/sandboxes/pol/urls", fmt.Sprintf(`{"port": %d, "public": true, "allow_ips": ["127.0.0.2/32"], "frame_ancestors": ["https://app.example"]}`, port), 201, &u)
	from := func(src string) *http.Client { return clientFrom(d.edge, d.pool, src) }
	get := func(c *http.Client, hdr ...string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("GET", "https://"+u.Host+"/", nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res
	}
	allowed, other := from("127.0.0.2"), from("127.0.0.1")
	// The first visit waits for the certificate and the route.
	deadline := time.Now().Add(20 * time.Second)
	for res := get(allowed); res.StatusCode != 200; res = get(allowed) {
		if time.Now().After(deadline) {
			t.Fatalf("127.0.0.2 never let in: %d", res.StatusCode)
		}
		time.Sleep(100 * time.Millisecond)
	}
	res := get(allowed)
	if got := res.Header.Values("Content-Security-Policy"); !slices.Equal(got, []string{"frame-ancestors https://app.example"}) {
		t.Errorf("the app's answer: Content-Security-Policy %q, want frame-ancestors https://app.example", got)
	}
	for _, hdr := range [][]string{nil, {"X-Forwarded-For", "127.0.0.2"}, {"Forwarded", "for=127.0.0.2", "X-Real-Ip", "127.0.0.2"}} {
		if res := get(other, hdr...); res.StatusCode != 403 || res.Header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("127.0.0.1 with %q: %d %s, want 403 problem+json", hdr, res.StatusCode, res.Header.Get("Content-Type"))
		}
	}
	// The URL's own limit, per client address: 127.0.0.3 is used up
	// until the limit is seen to be on the edge; 127.0.0.4, a fresh
	// bucket, gets three, then 429 with Retry-After (a request a minute
	// refills nothing within the test).
	d.c.call("POST", "/v1/sandboxes/pol/urls", fmt.Sprintf(`{"port": %d, "public": true, "allow_ips": ["127.0.0.0/8"], "rate_limit": {"per_second": 0.016, "burst": 3}}`, port), 200, nil)
	probe := from("127.0.0.3")
	deadline = time.Now().Add(10 * time.Second)
	for res := get(probe); res.StatusCode != 429; res = get(probe) {
		if time.Now().After(deadline) {
			t.Fatalf("the limit never reached the edge: %d", res.StatusCode)
		}
	}
	fresh := from("127.0.0.4")
	var codes []int
	for range 4 {
		res := get(fresh)
		codes = append(codes, res.StatusCode)
		if res.StatusCode == 429 && res.Header.Get("Retry-After") == "" {
			t.Error("429 without Retry-After")
		}
	}
	if !slices.Equal(codes, []int{200, 200, 200, 429}) {
		t.Fatalf("with rate_limit burst 3: statuses %v, want [200 200 200 429]", codes)
	}
}

// clientFrom reaches the edge at addr for every host from the source
// address src (one of loopback's), trusting pool.
func clientFrom(addr string, pool *x509.CertPool, src string) *http.Client {
	dl := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return dl.DialContext(ctx, network, addr)
		},
		TLSClientConfig: &tls.Config{RootCAs: pool},
	}}
}

// A policy changed through the API on two edges on one Postgres: each
// edge follows the store's change feed, and a change "applies from the
// next request" once the feed has brought it (docs/guide/urls.md), so
// each edge is polled from the PATCH's answer, with a short deadline,
// and must not go back once it has switched. allow_ips without the
// test's address shuts it out on both edges while the allowed address
// still gets in; allow_ips [] lets it in again on both.
func TestURLPolicyChangeOnTwoEdges(t *testing.T) {
	t.Parallel()
	db, key, ctlKey, secret := selfHosted(t)
	cl := startCluster(t, db, key, ctlKey, secret, 2)
	newSandbox(t, cl.c, "pol", 30*time.Second)
	port := serveIn(t, cl.c, "pol", "python3 -m http.server %d --bind 127.0.0.1")
	host := publicURL(t, cl.c, "pol", port)
	caPEM, err := os.ReadFile(cl.caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	// Per edge, the test's address (127.0.0.1) and another (127.0.0.2).
	var mine, other []*http.Client
	for _, e := range cl.edgeAddrs {
		mine, other = append(mine, clientFrom(e, pool, "127.0.0.1")), append(other, clientFrom(e, pool, "127.0.0.2"))
	}
	status := func(c *http.Client) int {
		code, _, err := get(c, "https://"+host+"/")
		if err != nil {
			return 0
		}
		return code
	}
	for i, c := range mine {
		wait.For(t, 30*time.Second, fmt.Sprintf("edge %d serves the URL", i), func() bool { return status(c) == 200 })
	}
	// switched PATCHes the policy and polls both edges together until
	// each answers want to the test's address.
	switched := func(policy string, want int) {
		t.Helper()
		cl.c.call("PATCH", fmt.Sprintf("/v1/sandboxes/pol/urls/%d", port), policy, 200, nil)
		patched := time.Now()
		took, stale := make([]time.Duration, len(mine)), make([]int, len(mine))
		for left := len(mine); left > 0; {
			if time.Since(patched) > 5*time.Second {
				t.Fatalf("after %s, edges still answering the old policy 5 s on: %v (0: not yet)", policy, took)
			}
			for i, c := range mine {
				switch got := status(c); {
				case got == want && took[i] == 0:
					took[i], left = time.Since(patched), left-1
				case got != want && took[i] != 0:
					t.Fatalf("after %s, edge %d answered %d %v after it had switched to %d", policy, i, got, time.Since(patched), want)
				case got != want:
					stale[i]++
				}
			}
		}
		t.Logf("%s: each edge answered the test's address %d %v after the PATCH's answer, after %v requests with the old answer", policy, want, took, stale)
	}
	switched(`{"allow_ips": ["127.0.0.2/32"]}`, 403)
	for i, c := range other {
		if got := status(c); got != 200 {
			t.Errorf("with allow_ips 127.0.0.2/32, edge %d answered 127.0.0.2 %d, want 200", i, got)
		}
	}
	switched(`{"allow_ips": []}`, 200)
}
