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
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"froog.tech/froog/internal/testdep"
	"froog.tech/froog/internal/wait"
)

// A URL's policy through the real binary: frame_ancestors becomes the
// answers' Content-Security-Policy; the URL's own limit answers 429.
// Loopback addresses are the clients (the allowlist's are in network
// namespaces: TestURLPolicyAllowIPsFromNamespaces).
func TestURLPolicyE2E(t *testing.T) {
	t.Parallel()
	d := startDev(t, devOptions{args: []string{"--rate-limit", "0"}})
	newSandbox(t, d.c, "pol", 15*time.Second)
	port := serveIn(t, d.c, "pol", "python3 -m http.server %d --bind 127.0.0.1")
	var u struct{ Host string }
	d.c.call("POST", "/v1/sandboxes/pol/urls", fmt.Sprintf(`{"port": %d, "public": true, "frame_ancestors": ["https://app.example"]}`, port), 201, &u)
	from := func(src string) *http.Client { return clientFrom(d.edge, d.pool, src) }
	get := func(c *http.Client) *http.Response {
		t.Helper()
		res, err := c.Get("https://" + u.Host + "/")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res
	}
	web := from("127.0.0.2")
	// The first visit waits for the certificate and the route.
	deadline := time.Now().Add(20 * time.Second)
	for res := get(web); res.StatusCode != 200; res = get(web) {
		if time.Now().After(deadline) {
			t.Fatalf("the URL never served: %d", res.StatusCode)
		}
		time.Sleep(100 * time.Millisecond)
	}
	res := get(web)
	if got := res.Header.Values("Content-Security-Policy"); !slices.Equal(got, []string{"frame-ancestors https://app.example"}) {
		t.Errorf("the app's answer: Content-Security-Policy %q, want frame-ancestors https://app.example", got)
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

// An allowlisted URL judges the connection's source address, with
// clients that are machines of their own: froogd dev runs in one network
// namespace, its edge on every address there (one dual-stack socket: an
// IPv4 client arrives as an IPv4-mapped IPv6 address), and curl runs in
// two others, "in" and "out", each with an IPv4 and an IPv6 address on
// the test's bridge. allow_ips names in's two addresses: in gets the
// app's answer over both families, on HTTP/1.1 and HTTP/2; out gets 403
// problem+json on each, also when it names in's address in
// X-Forwarded-For, Forwarded or X-Real-Ip. Then a list of IPv4 only
// refuses in's IPv6 address, and still lets its IPv4 one in.
func TestURLPolicyAllowIPsFromNamespaces(t *testing.T) {
	// Alone: it makes network namespaces and a bridge on the host.
	if os.Geteuid() != 0 {
		testdep.Missing(t, "the allowlist test makes network namespaces, which needs root")
	}
	testdep.Need(t, "curl")
	cl := newCluster(t, "edge", "in", "out")
	data := t.TempDir()
	_, m := startIn(t, cl.ns("edge"), devEdgeReady, "dev", "--data", data, "--api-addr", cl.addr["edge"]+":0", "--edge-addr", "[::]:0",
		"--edge-http-addr", "127.0.0.1:0", "--domain", "froog.test", "--rate-limit", "0")
	key, err := os.ReadFile(filepath.Join(data, "api-key"))
	if err != nil {
		t.Fatal(err)
	}
	c := client{t: t, base: m[1], key: strings.TrimSpace(string(key))}
	_, edgePort, _ := net.SplitHostPort(m[2])
	newSandbox(t, c, "pol", 15*time.Second)
	port := serveIn(t, c, "pol", "python3 -m http.server %d --bind 127.0.0.1")
	in4, in6 := cl.addr["in"], cl.addr6["in"]
	var u struct{ Host string }
	c.call("POST", "/v1/sandboxes/pol/urls", fmt.Sprintf(`{"port": %d, "public": true, "allow_ips": ["%s/32", "%s/128"]}`, port, in4, in6), 201, &u)

	type answer struct {
		code          int
		version, kind string // HTTP version, Content-Type
		body          string
	}
	const marker = "--froog-test-- " // ends the app's body in curl's output
	// visit is a GET of the URL by curl in node's namespace, to the edge's
	// IPv6 address or its IPv4 one, with proto (--http1.1, --http2) and
	// headers hdr ("Name: value").
	visit := func(node string, v6 bool, proto string, hdr ...string) answer {
		edge := cl.addr["edge"]
		if v6 {
			edge = "[" + cl.addr6["edge"] + "]"
		}
		args := []string{"netns", "exec", cl.ns(node), "curl", "-sS", "--max-time", "10", "--cacert", filepath.Join(data, "ca.pem"),
			"--connect-to", u.Host + ":443:" + edge + ":" + edgePort, proto, "-w", "\n" + marker + "%{http_code} %{http_version} %{content_type}"}
		for _, h := range hdr {
			args = append(args, "-H", h)
		}
		out, err := exec.Command("ip", append(args, "https://"+u.Host+"/")...).CombinedOutput()
		if err != nil {
			return answer{body: fmt.Sprintf("%v: %s", err, out)}
		}
		body, tail, _ := strings.Cut(string(out), "\n"+marker)
		var a answer
		f := strings.SplitN(tail, " ", 3)
		if len(f) == 3 {
			a.code, _ = strconv.Atoi(f[0])
			a.version, a.kind = f[1], f[2]
		}
		a.body = body
		return a
	}
	// The version the answer came in: the edge's own, HTTP/1.1 (the app,
	// Python's http.server, answers in 1.0) or 2.
	protos := []struct{ flag, version string }{{"--http1.1", "1.1"}, {"--http2", "2"}}
	app := func(a answer) bool { return a.code == 200 && strings.Contains(a.body, "Directory listing for /") }
	refused := func(a answer) bool {
		return a.code == 403 && a.kind == "application/problem+json" && strings.Contains(a.body, `"ip_not_allowed"`)
	}
	// spoofs are headers naming addr, which a proxy in front would set.
	spoofs := func(addr string, v6 bool) [][]string {
		fwd := "for=" + addr
		if v6 {
			fwd = `for="[` + addr + `]"`
		}
		return [][]string{nil, {"X-Forwarded-For: " + addr}, {"Forwarded: " + fwd, "X-Real-Ip: " + addr}}
	}
	// The first visit waits for the certificate and the route.
	var last answer
	if !wait.Until(20*time.Second, func() bool { last = visit("in", false, "--http2"); return app(last) }) {
		t.Fatalf("in's first visit: never the app's answer; the last %d %.200q", last.code, last.body)
	}
	for _, p := range protos {
		for _, v6 := range []bool{false, true} {
			fam, allowed := "IPv4", in4
			if v6 {
				fam, allowed = "IPv6", in6
			}
			if a := visit("in", v6, p.flag); !app(a) || !strings.HasPrefix(a.version, p.version) {
				t.Errorf("in over %s %s: %d HTTP/%s %.200q, want the app's answer in HTTP/%s", fam, p.flag, a.code, a.version, a.body, p.version)
			}
			for _, hdr := range spoofs(allowed, v6) {
				if a := visit("out", v6, p.flag, hdr...); !refused(a) {
					t.Errorf("out over %s %s with %q: %d %s %.200q, want 403 problem+json ip_not_allowed", fam, p.flag, hdr, a.code, a.kind, a.body)
				}
			}
		}
	}

	// A list of IPv4 only: in's IPv6 address is another source, refused
	// from the request after the feed brings the change, even naming in's
	// IPv4 address.
	c.call("PATCH", fmt.Sprintf("/v1/sandboxes/pol/urls/%d", port), fmt.Sprintf(`{"allow_ips": ["%s/32"]}`, in4), 200, nil)
	if !wait.Until(5*time.Second, func() bool { last = visit("in", true, "--http2"); return refused(last) }) {
		t.Fatalf("in over IPv6 with allow_ips %s/32: still %d %.200q 5 s after the PATCH's answer", in4, last.code, last.body)
	}
	for _, p := range protos {
		for _, hdr := range spoofs(in4, false) {
			if a := visit("in", true, p.flag, hdr...); !refused(a) {
				t.Errorf("in over IPv6 %s with %q, allow_ips %s/32: %d %s %.200q, want 403 problem+json ip_not_allowed", p.flag, hdr, in4, a.code, a.kind, a.body)
			}
		}
		if a := visit("in", false, p.flag); !app(a) {
			t.Errorf("in over IPv4 %s, allow_ips %s/32: %d %.200q, want the app's answer", p.flag, in4, a.code, a.body)
		}
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
