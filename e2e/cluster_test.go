//go:build linux

package e2e_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"froog.tech/froog/internal/loopback"
	"froog.tech/froog/internal/testdep"
	"froog.tech/froog/internal/wait"
)

// forward relays TCP from addr (on the bridge) to target: Postgres,
// which listens on the root namespace's loopback, reached from the
// namespaces without changing its configuration.
func forward(t *testing.T, addr, target string) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for c := range conns {
			c.Close()
		}
	})
	track := func(c net.Conn, on bool) {
		mu.Lock()
		defer mu.Unlock()
		if on {
			conns[c] = true
		} else {
			delete(conns, c)
		}
	}
	go func() {
		for {
			a, err := ln.Accept()
			if err != nil {
				return
			}
			b, err := net.Dial("tcp", target)
			if err != nil {
				a.Close()
				continue
			}
			track(a, true)
			track(b, true)
			go func() {
				defer func() { a.Close(); b.Close(); track(a, false); track(b, false) }()
				go func() { io.Copy(b, a); b.Close() }()
				io.Copy(a, b)
			}()
		}
	}()
}

// kill ends p at once, as a machine that dies.
func (p *proc) kill() {
	p.cmd.Process.Kill()
	p.cmd.Wait()
}

// try is visit without failing: the status (0 when no answer) and body.
func try(c *http.Client, u string) (int, string) {
	res, err := c.Get(u)
	if err != nil {
		return 0, err.Error()
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// The cluster: two edges, one API and two host controllers (local
// driver), each in a network namespace of its own with its own address,
// all on the host's Postgres. Sandboxes spread over both hosts and are
// served through both edges; an edge killed and restarted; a host
// drained, then killed (its sandboxes reported in error, new ones on the
// other); an edge cut from Postgres (serves what it knows, not ready,
// recovers).
func TestCluster(t *testing.T) {
	// Alone: it makes network namespaces and nftables rules on the host.
	if os.Geteuid() != 0 {
		testdep.Missing(t, "the cluster test makes network namespaces, which needs root")
	}
	for _, bin := range []string{"ip", "nft"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s: %v (deploy/testdeps.sh installs it)", bin, err)
		}
	}
	rootDB, _, ctlKey, secret := selfHosted(t)
	key := adminAccount(t, []string{"--database-url", rootDB}, "--name", "cluster", "--max-sandboxes", "10")
	cl := newCluster(t, "e1", "e2", "api", "h1", "h2")
	u, err := url.Parse(rootDB)
	if err != nil {
		t.Fatal(err)
	}
	pgAddr := net.JoinHostPort(cl.gw, "15432")
	forward(t, pgAddr, u.Host)
	u.Host = pgAddr
	db := u.String() // Postgres as the namespaces reach it

	admin := func(node string) string { return "http://" + cl.addr[node] + ":9100" }
	waitReady := func(node string) {
		t.Helper()
		wait.For(t, 30*time.Second, node+" ready", func() bool { return getReadyz(admin(node)).code == 200 })
	}
	hosts := map[string]*proc{}
	for _, h := range []string{"h1", "h2"} {
		hosts[h] = cl.start(h, regexp.MustCompile(`hostctl `+h+` running`), "hostctl", "--database-url", db, "--host-name", h,
			"--data", t.TempDir(), "--control-key-file", ctlKey, "--capacity", "6", "--advertise-addr", cl.addr[h],
			"--heartbeat-secs", "1", "--host-down-secs", "4", "--metrics-addr", cl.addr[h]+":9100")
	}
	cl.start("api", regexp.MustCompile(`froog api on`), "api", "--database-url", db, "--api-addr", cl.addr["api"]+":8080",
		"--domain", "froog.test", "--secret-key-file", secret, "--control-key-file", ctlKey, "--metrics-addr", cl.addr["api"]+":9100")
	caDir := t.TempDir()
	edgeArgs := func(e string) []string {
		return []string{"edge", "--database-url", db, "--edge-addr", cl.addr[e] + ":8443", "--edge-http-addr", cl.addr[e] + ":8080",
			"--domain", "froog.test", "--ca-dir", caDir, "--control-key-file", ctlKey, "--metrics-addr", cl.addr[e] + ":9100", "--drain-secs", "1"}
	}
	edgeRE := regexp.MustCompile(`froog edge on`)
	edges := map[string]*proc{}
	for _, e := range []string{"e1", "e2"} {
		edges[e] = cl.start(e, edgeRE, edgeArgs(e)...)
	}
	for _, n := range []string{"h1", "h2", "api", "e1", "e2"} {
		waitReady(n)
	}
	web := map[string]*http.Client{}
	for _, e := range []string{"e1", "e2"} {
		web[e] = edgeClient(t, cl.addr[e]+":8443", filepath.Join(caDir, "ca.pem"), true)
	}
	c := client{t: t, base: "http://" + cl.addr["api"] + ":8080", key: key}

	// Sandboxes land on both hosts: each reports its host's address.
	on := func(name string) string {
		var s struct{ Host string }
		c.call("GET", "/v1/sandboxes/"+name+"/ssh", "", 200, &s)
		return s.Host
	}
	running := func(name string) {
		t.Helper()
		wait.For(t, 30*time.Second, name+" runs", func() bool {
			var sb struct{ State string }
			c.call("GET", "/v1/sandboxes/"+name, "", 200, &sb)
			return sb.State == "running"
		})
	}
	script, _ := json.Marshal(headerEcho)
	// app starts the header echo in sandbox name and hosts it publicly.
	app := func(name string) string {
		t.Helper()
		c.call("POST", "/v1/sandboxes/"+name+"/exec", `{"command": "cat > echo.py", "stdin": `+string(script)+`}`, 200, nil)
		port := loopback.FreePort(t)
		c.call("POST", "/v1/sandboxes/"+name+"/jobs", fmt.Sprintf(`{"command": "python3 echo.py %d"}`, port), 201, nil)
		var w struct{ Ready bool }
		c.call("POST", "/v1/sandboxes/"+name+"/wait", fmt.Sprintf(`{"port": %d, "timeout_secs": 30}`, port), 200, &w)
		if !w.Ready {
			t.Fatalf("%s: the app's port never listened", name)
		}
		var u struct{ URL string }
		c.call("POST", "/v1/sandboxes/"+name+"/urls", fmt.Sprintf(`{"port": %d, "public": true}`, port), 201, &u)
		return u.URL
	}
	served := func(e, u, what string) {
		t.Helper()
		wait.For(t, 30*time.Second, what+" through "+e, func() bool {
			code, body := try(web[e], u+"cluster")
			return code == 200 && strings.Contains(body, `"path": "/cluster"`)
		})
	}
	urls := map[string]string{}
	placed := map[string]string{} // sandbox → its host's address
	create := func(name string) {
		t.Helper()
		c.call("POST", "/v1/sandboxes", `{"name": "`+name+`"}`, 202, nil)
		running(name)
		placed[name] = on(name)
		urls[name] = app(name)
	}
	where := map[string]int{}
	for _, name := range []string{"s1", "s2", "s3", "s4"} {
		create(name)
		where[placed[name]]++
	}
	if where[cl.addr["h1"]] != 2 || where[cl.addr["h2"]] != 2 {
		t.Fatalf("four sandboxes on two hosts of 6: %v (h1 %s, h2 %s); want two on each", where, cl.addr["h1"], cl.addr["h2"])
	}
	for name, u := range urls {
		for _, e := range []string{"e1", "e2"} {
			served(e, u, name)
		}
	}
	listHosts := func() string {
		t.Helper()
		out, err := exec.Command(froogd, "admin", "hosts", "--database-url", rootDB, "--host-down-secs", "4").CombinedOutput()
		if err != nil {
			t.Fatalf("admin hosts: %v: %s", err, out)
		}
		return string(out)
	}
	hostLine := func(out, h, state string, sandboxes int) {
		t.Helper()
		re := regexp.MustCompile(`(?m)^` + h + `\s+` + regexp.QuoteMeta(cl.addr[h]) + `\s+` + regexp.QuoteMeta(state) + `\s+6\s+` + fmt.Sprint(sandboxes) + `\s+\S+ \(\S+ ago\)$`)
		if !re.MatchString(out) {
			t.Fatalf("admin hosts: no line for %s %s with %d sandboxes:\n%s", h, state, sandboxes, out)
		}
	}
	out := listHosts()
	hostLine(out, "h1", "up", 2)
	hostLine(out, "h2", "up", 2)

	// An edge dies: the other serves everything; a URL made meanwhile is
	// served by the dead one once it is back.
	edges["e1"].kill()
	for name, u := range urls {
		served("e2", u, name+" with e1 dead")
	}
	create("s5")
	served("e2", urls["s5"], "s5")
	restarted := time.Now()
	edges["e1"] = cl.start("e1", edgeRE, edgeArgs("e1")...)
	waitReady("e1")
	for name, u := range urls {
		served("e1", u, name+" after e1's restart")
	}
	t.Logf("e1 restarted, ready and serving all %d URLs in %v", len(urls), time.Since(restarted).Round(time.Millisecond))

	// h1 drained: no new placements there (s5 went by room; s6 must not).
	if out, err := exec.Command(froogd, "admin", "hosts", "drain", "--host", "h1", "--database-url", rootDB).CombinedOutput(); err != nil || !strings.Contains(string(out), "h1 is draining") {
		t.Fatalf("drain h1: %v: %s", err, out)
	}
	var onH1 []string
	for name, h := range placed {
		if h == cl.addr["h1"] {
			onH1 = append(onH1, name)
		}
	}
	create("s6")
	if h := placed["s6"]; h != cl.addr["h2"] {
		t.Fatalf("s6 on %s with h1 draining; want h2 (%s)", h, cl.addr["h2"])
	}
	out = listHosts()
	hostLine(out, "h1", "up,draining", len(onH1))
	// Then h1 dies: its sandboxes go to error saying why; new ones run on h2.
	hosts["h1"].kill()
	killed := time.Now()
	for _, name := range onH1 {
		wait.For(t, 30*time.Second, name+" in error after h1 died", func() bool {
			var sb struct{ State, Error string }
			c.call("GET", "/v1/sandboxes/"+name, "", 200, &sb)
			return sb.State == "error" && strings.Contains(sb.Error, "host h1 stopped heart-beating")
		})
	}
	t.Logf("h1 killed: its %d sandboxes in error after %v (--heartbeat-secs 1, --host-down-secs 4)", len(onH1), time.Since(killed).Round(time.Millisecond))
	out = listHosts()
	hostLine(out, "h1", "down,draining", len(onH1))
	hostLine(out, "h2", "up", 6-len(onH1))
	create("s7")
	if h := placed["s7"]; h != cl.addr["h2"] {
		t.Fatalf("s7 on %s with h1 down; want h2", h)
	}
	for name, u := range urls {
		if placed[name] == cl.addr["h2"] {
			served("e1", u, name+" with h1 dead")
			served("e2", u, name+" with h1 dead")
		}
	}

	// e2 cut from Postgres: it still serves the routes it knows, reports
	// not ready (the store), and recovers when the cut heals, catching up
	// with a URL made meanwhile.
	rules := fmt.Sprintf("table inet froogcut {\n chain out {\n  type filter hook output priority 0; policy accept;\n  ip daddr %s tcp dport 15432 drop\n }\n}\n", cl.gw)
	cut := exec.Command("ip", "netns", "exec", cl.ns("e2"), "nft", "-f", "-")
	cut.Stdin = strings.NewReader(rules)
	if out, err := cut.CombinedOutput(); err != nil {
		t.Fatalf("nft: %v: %s", err, out)
	}
	cutAt := time.Now()
	wait.For(t, 30*time.Second, "e2 not ready while cut off", func() bool {
		r := getReadyz(admin("e2"))
		return r.code == 503 && r.Checks["store"] != "" && r.Checks["store"] != "ok"
	})
	t.Logf("e2 cut off: /readyz 503 after %v", time.Since(cutAt).Round(time.Millisecond))
	served("e2", urls["s7"], "s7 with e2 cut off")
	create("s8")
	served("e1", urls["s8"], "s8")
	if code, _ := try(web["e2"], urls["s8"]+"cluster"); code == 200 {
		t.Fatal("e2 served s8, made while it was cut off from the store")
	}
	// Cut until e2's connections to the store are broken for real: TCP has
	// retransmitted on them several times (ss's retrans counter), not
	// only a read that timed out.
	wait.For(t, 60*time.Second, "e2's store connections retransmitting", func() bool {
		return storeRetransmits(t, cl.ns("e2"), cl.gw+":15432") >= 4
	})
	served("e2", urls["s7"], fmt.Sprintf("s7 still, with e2 cut off %v", time.Since(cutAt).Round(time.Second)))
	ipRun(t, "ip", "netns", "exec", cl.ns("e2"), "nft", "delete", "table", "inet", "froogcut")
	healed := time.Now()
	wait.For(t, 90*time.Second, "e2 ready again", func() bool { return getReadyz(admin("e2")).code == 200 })
	served("e2", urls["s8"], "s8 after the cut healed")
	t.Logf("e2's cut healed (after %v): ready and serving s8 in %v", healed.Sub(cutAt).Round(time.Millisecond), time.Since(healed).Round(time.Millisecond))
}

// storeRetransmits is the total of TCP's retransmissions on the
// connections from netns ns to addr (ss -ti's retrans:cur/total).
func storeRetransmits(t *testing.T, ns, addr string) int {
	t.Helper()
	out, err := exec.Command("ip", "netns", "exec", ns, "ss", "-tni", "dst", addr).CombinedOutput()
	if err != nil {
		t.Fatalf("ss: %v: %s", err, out)
	}
	n := 0
	for _, f := range strings.Fields(string(out)) {
		if v, ok := strings.CutPrefix(f, "retrans:"); ok {
			if _, total, ok := strings.Cut(v, "/"); ok {
				k, _ := strconv.Atoi(total)
				n += k
			}
		}
	}
	return n
}
