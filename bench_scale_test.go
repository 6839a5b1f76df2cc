//go:build bench

package froog_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/jackc/pgx/v5"

	"froog.tech/froog/internal/testkit"
	"froog.tech/froog/store"
	"froog.tech/froog/store/pg"
	"froog.tech/froog/store/pg/pgtest"
)

// hsPeer is a peer whose TLS handshakes the edge's are measured against:
// its name in the figures, where it listens, the server name to ask for,
// and the processes whose CPU a handshake costs.
type hsPeer struct {
	name, addr, server string
	pids               []int
}

// benchScale measures the edge at scale: memory and CPU with idle
// websockets and idle tunnels open through it, a 100,000-URL route table,
// and full TLS handshakes a second against peers with the same kind of
// certificate (ECDSA P-256 from the same CA).
func benchScale(t *testing.T, edge *child, out, edgeAddr string, roots *x509.CertPool, peers []hsPeer) map[string]float64 {
	sc := map[string]float64{}
	var stack float64 // KiB of goroutine stacks at the last gc
	gc := func() (rss int, heap float64) {
		f := edge.do("gc")
		h, _ := strconv.ParseFloat(f[0], 64)
		stack, _ = strconv.ParseFloat(f[2], 64)
		stack /= 1024
		return testkit.RSSKiB(edge.Pid), h / 1024
	}
	idleCPU := func(d time.Duration) float64 { // ms of CPU a second
		c0 := testkit.CPUTime(edge.Pid)
		time.Sleep(d)
		return float64((testkit.CPUTime(edge.Pid) - c0).Microseconds()) / 1000 / d.Seconds()
	}

	// TLS handshakes: the edge and each peer alternately, the server's CPU
	// per handshake and handshakes a second, offering X25519 and P-256
	// (nginx 1.22 here has no ML-KEM, and refuses a client offering X25519
	// alone); then the edge alone with the X25519MLKEM768 hybrid that
	// current browsers offer first.
	hs := func(addr, name string, pids []int, curves []tls.CurveID, resume bool) (rate, cpu float64) {
		c0 := testkit.CPUTime(pids...)
		d := 2 * time.Second
		n, err := handshakes(addr, name, curves, 8, d, resume)
		if err != nil {
			t.Fatalf("handshakes with %s: %v", name, err)
		}
		return float64(n) / d.Seconds(), float64((testkit.CPUTime(pids...) - c0).Microseconds()) / float64(n)
	}
	x25519 := []tls.CurveID{tls.X25519, tls.CurveP256}
	// Resumed handshakes, CPU only (each offers the same ticket).
	var edgeHS, edgeHSCPU, mlkemHS, mlkemCPU, edgeResCPU []float64
	peerHS, peerHSCPU, peerResCPU := make([][]float64, len(peers)), make([][]float64, len(peers)), make([][]float64, len(peers))
	for range 2 {
		r, c := hs(edgeAddr, "box.froog.test", []int{edge.Pid}, x25519, false)
		edgeHS, edgeHSCPU = append(edgeHS, r), append(edgeHSCPU, c)
		_, c = hs(edgeAddr, "box.froog.test", []int{edge.Pid}, x25519, true)
		edgeResCPU = append(edgeResCPU, c)
		for i, p := range peers {
			r, c = hs(p.addr, p.server, p.pids, x25519, false)
			peerHS[i], peerHSCPU[i] = append(peerHS[i], r), append(peerHSCPU[i], c)
			_, c = hs(p.addr, p.server, p.pids, x25519, true)
			peerResCPU[i] = append(peerResCPU[i], c)
		}
		r, c = hs(edgeAddr, "box.froog.test", []int{edge.Pid}, nil, false)
		mlkemHS, mlkemCPU = append(mlkemHS, r), append(mlkemCPU, c)
	}
	// The edge's profiles of handshakes, full and resumed, apart from the
	// measured ones.
	edge.do("cpu " + filepath.Join(out, "edge-cpu-tls.pprof"))
	hs(edgeAddr, "box.froog.test", []int{edge.Pid}, x25519, false)
	edge.do("cpu")
	edge.do("cpu " + filepath.Join(out, "edge-cpu-tls-resumed.pprof"))
	hs(edgeAddr, "box.froog.test", []int{edge.Pid}, x25519, true)
	edge.do("cpu")
	sc["tls_handshakes_s"], sc["tls_handshake_cpu_us"] = medianF(edgeHS), medianF(edgeHSCPU)
	sc["tls_handshakes_s_mlkem"], sc["tls_handshake_cpu_us_mlkem"] = medianF(mlkemHS), medianF(mlkemCPU)
	sc["tls_resumed_cpu_us"] = medianF(edgeResCPU)
	t.Logf("TLS resumed handshakes: edge %v µs CPU each", edgeResCPU)
	t.Logf("TLS handshakes/s (X25519 or P-256): edge %v (%v µs CPU each); edge with X25519MLKEM768 %v (%v µs)", edgeHS, edgeHSCPU, mlkemHS, mlkemCPU)
	for i, p := range peers {
		sc["tls_handshakes_s_"+p.name], sc["tls_handshake_cpu_us_"+p.name] = medianF(peerHS[i]), medianF(peerHSCPU[i])
		sc["tls_resumed_cpu_us_"+p.name] = medianF(peerResCPU[i])
		t.Logf("TLS resumed handshakes: %s %v µs CPU each", p.name, peerResCPU[i])
		t.Logf("TLS handshakes/s (X25519 or P-256): %s %v (%v µs CPU each)", p.name, peerHS[i], peerHSCPU[i])
	}

	// Idle tunnels: every idle sandbox's tunnel opened (one channel each,
	// closed), then left alone.
	rss0, heap0 := gc()
	f := edge.do("tunnels idle 1")
	n, _ := strconv.Atoi(f[0])
	if bad, _ := strconv.Atoi(f[1]); bad > 0 || n == 0 {
		t.Fatalf("idle tunnels: %d opened, %d failed", n, bad)
	}
	rss1, heap1 := gc()
	sc["tunnels_idle"] = float64(n)
	sc["tunnel_idle_kib"] = float64(rss1-rss0) / float64(n)
	sc["tunnel_idle_heap_kib"] = (heap1 - heap0) / float64(n)
	sc["tunnels_idle_cpu_ms_s"] = idleCPU(5 * time.Second)
	t.Logf("%d idle tunnels: RSS %d → %d KiB, heap %.0f → %.0f KiB, opened in %s ms", n, rss0, rss1, heap0, heap1, f[2])

	// Idle websockets, spread over loopback source addresses.
	nws := envInt("FROOG_BENCH_WEBSOCKETS", 10000)
	rss0, heap0 = gc()
	stack0 := stack
	conns := make([]*websocket.Conn, nws)
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr error
	var mu sync.Mutex
	start := time.Now()
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= nws {
					return
				}
				src := &net.TCPAddr{IP: net.IPv4(127, 0, 1, byte(1+i%200))}
				d := websocket.Dialer{
					NetDialContext: func(ctx context.Context, n, _ string) (net.Conn, error) {
						return (&net.Dialer{LocalAddr: src}).DialContext(ctx, n, edgeAddr)
					},
					TLSClientConfig: &tls.Config{RootCAs: roots},
				}
				c, _, err := d.Dial("wss://ws.froog.test/", http.Header{"Cookie": {"__Host-froog_url=pt_bench"}})
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("websocket %d: %w", i, err)
					}
					mu.Unlock()
					return
				}
				conns[i] = c
			}
		}()
	}
	wg.Wait()
	opened := time.Since(start)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	if firstErr != nil {
		t.Fatalf("idle websockets: %v", firstErr)
	}
	rss1, heap1 = gc()
	sc["websockets_idle"] = float64(nws)
	sc["websocket_idle_kib"] = float64(rss1-rss0) / float64(nws)
	sc["websocket_idle_heap_kib"] = (heap1 - heap0) / float64(nws)
	sc["websocket_idle_stack_kib"] = (stack - stack0) / float64(nws)
	edge.do("heap " + filepath.Join(out, "edge-heap-websockets.pprof"))
	sc["websockets_idle_cpu_ms_s"] = idleCPU(5 * time.Second)
	t.Logf("%d idle websockets: RSS %d → %d KiB, heap %.0f → %.0f KiB, stacks %.0f → %.0f KiB, opened in %s", nws, rss0, rss1, heap0, heap1, stack0, stack, opened)

	// A 100,000-URL route table, from Postgres (the store a fleet runs).
	nroutes := envInt("FROOG_BENCH_ROUTES", 100000)
	o := pgtest.Options(t)
	ctx := context.Background()
	st, err := pg.Open(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	a, err := st.CreateAccount(ctx, store.Account{MaxSandboxes: 10, URLNamesPerDay: 100})
	if err != nil {
		t.Fatal(err)
	}
	var sbs []string
	for i := range 5 {
		sb, err := st.CreateSandbox(ctx, store.Sandbox{AccountID: a.ID, Name: fmt.Sprintf("r%d", i), State: store.StateRunning, DesiredState: store.StateRunning, CreatedAt: time.Now()}, nil)
		if err != nil {
			t.Fatal(err)
		}
		sbs = append(sbs, sb.ID)
	}
	st.Close()
	conn, err := pgx.Connect(ctx, pgtest.URLWithSchema(o))
	if err != nil {
		t.Fatal(err)
	}
	// URLs straight into the table (the store's API keeps 50 a sandbox);
	// the route table reads only the documents.
	t0 := time.Now()
	if _, err := conn.Exec(ctx, `INSERT INTO urls (id, sandbox_id, port, hostname, doc)
SELECT 'url_' || i, sb, p, 'r' || i, jsonb_build_object('id', 'url_' || i, 'account_id', $1::text, 'sandbox_id', sb, 'port', p,
  'hostname', 'r' || i, 'public', false, 'token_hash', $2::text, 'created_at', now(), 'updated_at', now())
FROM (SELECT i, ($3::text[])[1 + i % 4] AS sb, 1 + i / 4 AS p FROM generate_series(1, $4::int) AS i) AS g`,
		a.ID, store.HashSecret("pt_bench"), sbs[:4], nroutes); err != nil {
		t.Fatalf("insert %d urls: %v", nroutes, err)
	}
	conn.Close(ctx)
	t.Logf("%d URLs inserted in %s", nroutes, time.Since(t0))
	rc := startChild(t, "routes", "FROOG_BENCH_PG="+o.URL, "FROOG_BENCH_PG_SCHEMA="+o.Schema, "FROOG_BENCH_PG_SANDBOX="+sbs[4])
	l := rc.next() // loaded MS HEAP RSSKIB
	var loadMS, heap, rss float64
	fmt.Sscanf(l, "loaded %f %f %f", &loadMS, &heap, &rss)
	l2 := rc.next() // changes COMMITUS PROPUS
	var commitUS, propUS float64
	fmt.Sscanf(l2, "changes %f %f", &commitUS, &propUS)
	sc["routes"] = float64(nroutes)
	sc["routes_100k_load_ms"] = loadMS
	sc["routes_100k_heap_mib"] = heap / (1 << 20)
	sc["routes_100k_rss_mib"] = rss / 1024
	sc["route_change_ms"] = propUS / 1000
	sc["route_change_commit_ms"] = commitUS / 1000
	t.Logf("route table: %s; %s", l, l2)
	return sc
}

func medianF(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
