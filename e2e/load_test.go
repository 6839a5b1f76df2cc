package e2e_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"froog.tech/froog/internal/loopback"
	"froog.tech/froog/internal/wait"
)

// Load through the real binary: many well-behaved clients (HTTP/1.1,
// HTTP/2, websockets) on many URLs, and a few that trickle their bodies,
// for a while. The well-behaved get no error, the slow ones are cut, and
// afterwards the edge holds no more goroutines or file descriptors than
// before and its memory is back near where it started. In make test it
// runs small (200 clients, 10 s); FROOG_LOAD=full (make bench) runs 1,000
// clients on 100 URLs for 30 s. Clients come from 20 loopback addresses,
// as from many machines (the edge limits each address).
func TestLoad(t *testing.T) {
	// Alone: it loads the machine on purpose; beside others its deadlines would measure them.
	clients, urls, dur := 200, 20, 8*time.Second
	if os.Getenv("FROOG_LOAD") == "full" {
		clients, urls, dur = 1000, 100, 30*time.Second
	}
	metrics := fmt.Sprintf("127.0.0.1:%d", loopback.FreePort(t))
	// Pooled connections to the apps idle out after 2 s rather than 30:
	// the check below waits for them.
	d := startDev(t, devOptions{args: []string{"--metrics-addr", metrics, "--rate-limit", "0", "--upstream-idle-secs", "2"}, prepare: func(data string) string {
		// An account of its own, made as an operator would, with a name
		// for every URL a day (the dev account has 20).
		return adminAccount(t, []string{"--data", data}, "--name", "load", "--url-names-per-day", fmt.Sprint(urls))
	}})
	p, c := d.p, d.c
	// A sandbox has up to 50 URLs: the URLs are spread over as many as
	// they need.
	const perSandbox = 50
	script, _ := json.Marshal(headerEcho)
	ws, _ := json.Marshal(wsEcho)
	sandbox := func(i int) string { return fmt.Sprintf("/v1/sandboxes/load%d", i/perSandbox) }
	ports := make([]int, urls)
	for i := range urls {
		sb := sandbox(i)
		if i%perSandbox == 0 {
			c.call("POST", "/v1/sandboxes", fmt.Sprintf(`{"name": "load%d"}`, i/perSandbox), 202, nil)
			wait.For(t, 30*time.Second, "the sandbox runs", func() bool {
				var st struct{ State string }
				c.call("GET", sb, "", 200, &st)
				return st.State == "running"
			})
			// One app (the header echo) and one websocket echo, each on
			// many URLs: a URL is a port, so each app listens on several.
			c.call("POST", sb+"/exec", `{"command": "cat > echo.py", "stdin": `+string(script)+`}`, 200, nil)
			c.call("POST", sb+"/exec", `{"command": "cat > ws.py", "stdin": `+string(ws)+`}`, 200, nil)
		}
		// Ports picked before the apps take them: none twice.
		for ports[i] == 0 || slices.Contains(ports[:i], ports[i]) {
			ports[i] = loopback.FreePort(t)
		}
		app := "echo.py"
		if i%5 == 4 {
			app = "ws.py"
		}
		c.call("POST", sb+"/jobs", fmt.Sprintf(`{"command": "python3 %s %d"}`, app, ports[i]), 201, nil)
	}
	// The apps start meanwhile; then a URL for each.
	var hosts []string
	for i, port := range ports {
		c.call("POST", sandbox(i)+"/wait", fmt.Sprintf(`{"port": %d, "timeout_secs": 30}`, port), 200, nil)
		var u struct{ Host string }
		c.call("POST", sandbox(i)+"/urls", fmt.Sprintf(`{"port": %d, "public": true}`, port), 201, &u)
		hosts = append(hosts, u.Host)
	}
	pool, edge := d.pool, d.edge
	dialFrom := func(i int) func(ctx context.Context, network, _ string) (net.Conn, error) {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 1, byte(1+i%20))}}
		return func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, edge)
		}
	}
	// Warm every URL (certificates), then take the edge's resting figures.
	warm := &http.Client{Transport: &http.Transport{DialContext: dialFrom(0), TLSClientConfig: &tls.Config{RootCAs: pool}}}
	for i, h := range hosts {
		if i%5 == 4 {
			continue // a websocket echo
		}
		wait.For(t, 30*time.Second, h+" answers", func() bool {
			res, err := warm.Get("https://" + h + "/")
			if err != nil {
				return false
			}
			res.Body.Close()
			return res.StatusCode == 200
		})
	}
	warm.CloseIdleConnections()
	pid := p.cmd.Process.Pid
	fds0, gor0, heap0 := procFDs(t, pid), metric(t, metrics, "go_goroutines"), metric(t, metrics, "go_memstats_heap_inuse_bytes")

	var ok, failed, slowCut atomic.Int64
	var firstErr atomic.Value
	fail := func(err error) {
		failed.Add(1)
		firstErr.CompareAndSwap(nil, err.Error())
	}
	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()
	end, _ := ctx.Deadline()
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			host := hosts[i%len(hosts)]
			if i%len(hosts)%5 == 4 { // a websocket URL
				d := websocket.Dialer{NetDialContext: dialFrom(i), TLSClientConfig: &tls.Config{RootCAs: pool, NextProtos: []string{"http/1.1"}}}
				ws, _, err := d.DialContext(ctx, "wss://"+host+"/", nil)
				if err != nil {
					// The dialer sets ctx's deadline on the connection: a
					// handshake the run's end cut fails as an i/o timeout
					// an instant before ctx says it is done.
					if ctx.Err() == nil && time.Now().Before(end) {
						fail(err)
					}
					return
				}
				defer ws.Close()
				msg := []byte(strconv.Itoa(i))
				for ctx.Err() == nil {
					if err := ws.WriteMessage(websocket.TextMessage, msg); err != nil {
						fail(err)
						return
					}
					if _, got, err := ws.ReadMessage(); err != nil || string(got) != string(msg) {
						fail(fmt.Errorf("websocket echo: %q, %v", got, err))
						return
					}
					ok.Add(1)
					time.Sleep(50 * time.Millisecond) // a client's own pace, not a wait for the edge
				}
				return
			}
			tr := &http.Transport{DialContext: dialFrom(i), TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: i%2 == 0}
			if i%2 == 1 {
				tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
			}
			hc := &http.Client{Transport: tr}
			defer tr.CloseIdleConnections()
			if i%100 == 7 { // a slow client: trickles a body, and must be cut
				pr, pw := io.Pipe()
				go func() {
					for ctx.Err() == nil {
						if _, err := pw.Write([]byte("x")); err != nil {
							return
						}
						time.Sleep(500 * time.Millisecond) // the trickle under test: 2 bytes a second, far under the edge's minimum rate
					}
					pw.Close()
				}()
				req, _ := http.NewRequestWithContext(ctx, "POST", "https://"+host+"/slow", pr)
				req.ContentLength = 1 << 20 // the echo reads a body it knows the length of
				if res, err := hc.Do(req); err == nil {
					if res.StatusCode == 408 {
						slowCut.Add(1)
					}
					res.Body.Close()
				}
				pr.Close()
				return
			}
			for n := 0; ctx.Err() == nil; n++ {
				req, _ := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("https://%s/c%d/%d", host, i, n), nil)
				res, err := hc.Do(req)
				if err != nil {
					if ctx.Err() == nil {
						fail(err)
					}
					return
				}
				b, err := io.ReadAll(res.Body)
				res.Body.Close()
				if ctx.Err() != nil {
					return
				}
				if err != nil || res.StatusCode != 200 || !strings.Contains(string(b), fmt.Sprintf(`"path": "/c%d/%d"`, i, n)) {
					fail(fmt.Errorf("GET: %d %v %.100s", res.StatusCode, err, b))
					return
				}
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	t.Logf("%d clients on %d URLs for %v: %d answers, %d errors, %d slow clients cut", clients, urls, dur, ok.Load(), failed.Load(), slowCut.Load())
	if failed.Load() > 0 {
		t.Errorf("%d well-behaved requests failed; the first: %v", failed.Load(), firstErr.Load())
	}
	if want := int64((clients + 92) / 100); os.Getenv("FROOG_LOAD") == "full" && slowCut.Load() < want {
		t.Errorf("%d slow clients cut, want %d", slowCut.Load(), want)
	}
	// Afterwards: nothing left behind (once the pooled connections to the
	// sandbox have idled out: --upstream-idle-secs, then as long again
	// for the sweep), memory back near its start. The heap in use shrinks
	// only at the next collection, which an idle process may not have run
	// yet: its bound is loose; goroutines and descriptors are what a leak
	// shows in. The wait allows 90 s: a leak never comes back, and how
	// long it took is logged.
	rest := func() bool {
		return procFDs(t, pid) <= fds0+16 && metric(t, metrics, "go_goroutines") <= gor0+20 &&
			metric(t, metrics, "go_memstats_heap_inuse_bytes") <= heap0*2+64<<20
	}
	restBegan := time.Now()
	defer func() { t.Logf("the edge came back to rest in %v", time.Since(restBegan).Round(time.Second)) }()
	if !wait.Until(90*time.Second, rest) {
		t.Logf("the edge's descriptors at the end: %v", fdTargets(pid))
		t.Errorf("the edge never came back to rest: %d file descriptors (%d before), %d goroutines (%d before), %d MiB of heap in use (%d before)",
			procFDs(t, pid), fds0, metric(t, metrics, "go_goroutines"), gor0, metric(t, metrics, "go_memstats_heap_inuse_bytes")>>20, heap0>>20)
	}
}

// fdTargets counts a process's descriptors by what they are (socket,
// pipe, a file's path), for a failure to say what was left open.
func fdTargets(pid int) map[string]int {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, _ := os.ReadDir(dir)
	m := map[string]int{}
	for _, e := range ents {
		target, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		if i := strings.IndexByte(target, ':'); i > 0 && strings.HasSuffix(target, "]") {
			target = target[:i] // socket:[123] → socket
		}
		m[target]++
	}
	return m
}

func procFDs(t *testing.T, pid int) int {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// metric reads a gauge from froogd's metrics.
func metric(t *testing.T, metrics, name string) int64 {
	res, err := http.Get("http://" + metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	m := regexp.MustCompile(`(?m)^` + name + ` (\S+)`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("froogd's metrics have no %s", name)
	}
	f, _ := strconv.ParseFloat(string(m[1]), 64)
	return int64(f)
}
