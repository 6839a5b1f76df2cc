//go:build bench

package froog_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"froog.tech/froog/certs"
	"froog.tech/froog/edge"
	"froog.tech/froog/edge/route"
	"froog.tech/froog/internal/testkit"
	"froog.tech/froog/store"
	"froog.tech/froog/store/embedded"
	"froog.tech/froog/store/pg"
	"froog.tech/froog/tunnel"
)

// The bench accounts CPU time and memory per process, so the edge runs in
// a process of its own: this test binary again, running TestBenchChild
// with FROOG_BENCH_CHILD naming its role. The parent drives it with one
// command a line on its stdin and reads "bench: " lines from its stdout.

// withChildren is pid and its child processes (nginx's master and its
// workers).
func withChildren(pid int) []int {
	return append([]int{pid}, testkit.Children(pid)...)
}

// raiseNoFile lifts the soft open-files limit to the hard one.
func raiseNoFile() uint64 {
	var l syscall.Rlimit
	syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l)
	l.Cur = l.Max
	syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
	return l.Cur
}

// child is a running TestBenchChild.
type child struct {
	t   testing.TB
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
	Pid int
}

func startChild(t testing.TB, role string, env ...string) *child {
	cmd := exec.Command(os.Args[0], "-test.run=^TestBenchChild$", "-test.count=1", "-test.timeout=0")
	cmd.Env = append(append(os.Environ(), "FROOG_BENCH_CHILD="+role), env...)
	cmd.Stderr = os.Stderr
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the %s process: %v", role, err)
	}
	c := &child{t: t, cmd: cmd, in: in, out: bufio.NewScanner(out), Pid: cmd.Process.Pid}
	t.Cleanup(func() { c.in.Close(); c.cmd.Wait() })
	return c
}

// next is the child's next "bench: " line, without the prefix.
func (c *child) next() string {
	for c.out.Scan() {
		if l, ok := strings.CutPrefix(c.out.Text(), "bench: "); ok {
			return l
		}
	}
	c.t.Fatalf("the bench process ended: %v", c.out.Err())
	return ""
}

// do sends one command and returns its answer's fields after "ok".
func (c *child) do(cmd string) []string {
	fmt.Fprintln(c.in, cmd)
	l := c.next()
	f := strings.Fields(l)
	if len(f) == 0 || f[0] != "ok" {
		c.t.Fatalf("bench process, %q: %s", cmd, l)
	}
	return f[1:]
}

func say(format string, args ...any) { fmt.Printf("bench: "+format+"\n", args...) }

// TestBenchChild is one of the bench's processes; it runs only when
// TestEdgeBench starts it.
func TestBenchChild(t *testing.T) {
	switch role := os.Getenv("FROOG_BENCH_CHILD"); role {
	case "":
		t.Skip("TestEdgeBench starts this as a process of its own")
	case "edge":
		benchEdgeProcess(t)
	case "routes":
		benchRoutesProcess(t)
	default:
		t.Fatalf("unknown bench role %q", role)
	}
}

// benchEdgeProcess runs the edge on the store in FROOG_BENCH_STORE and the
// CA in FROOG_BENCH_CA, then follows commands.
func benchEdgeProcess(t *testing.T) {
	raiseNoFile()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := embedded.Open(os.Getenv("FROOG_BENCH_STORE"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ca, err := certs.OpenLocalCA(os.Getenv("FROOG_BENCH_CA"), "froog.test")
	if err != nil {
		t.Fatal(err)
	}
	key, err := os.ReadFile(os.Getenv("FROOG_BENCH_KEY"))
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.ParsePrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	tun, err := tunnel.New(tunnel.Options{Sandboxes: st, Signer: signer, User: "root"})
	if err != nil {
		t.Fatal(err)
	}
	defer tun.Close()
	routes, err := route.New(route.Options{Store: st, Domain: "froog.test"})
	if err != nil {
		t.Fatal(err)
	}
	// Session tickets as a deployed edge seals them (froogd edge with its
	// --secret-key-file): the resumed handshakes are measured through them.
	secret := make([]byte, 32)
	rand.Read(secret)
	tickets, err := edge.NewTicketKeys(st, secret, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := tickets.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	srv, err := edge.New(edge.Options{Routes: routes, Sandboxes: st, Dialer: tun, GetCertificate: ca.GetCertificate, Logger: slog.New(slog.DiscardHandler),
		RateLimit: -1, MaxConnsPerIP: 1 << 20, HTTP3: true, Tickets: tickets}) // the bench is one address
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pc, err := net.ListenPacket("udp", ln.Addr().String()) // HTTP/3, for the edge-h3 row
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	go routes.Run(ctx)
	go srv.ServeTLS(ctx, ln)
	go srv.ServeQUIC(ctx, pc)
	<-routes.Ready()
	say("addr %s", ln.Addr())
	var prof *os.File
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		f := strings.Fields(in.Text())
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "cpu": // cpu FILE starts a CPU profile; cpu stops it
			if prof != nil {
				pprof.StopCPUProfile()
				prof.Close()
				prof = nil
			} else {
				prof, _ = os.Create(f[1])
				pprof.StartCPUProfile(prof)
			}
			say("ok")
		case "allocs", "heap": // allocs FILE, heap FILE: a profile of either
			w, _ := os.Create(f[1])
			pprof.Lookup(f[0]).WriteTo(w, 0)
			w.Close()
			say("ok")
		case "gc":
			runtime.GC()
			debug.FreeOSMemory()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			say("ok %d %d %d", m.HeapInuse, runtime.NumGoroutine(), m.StackInuse)
		case "tunnels": // tunnels PREFIX PORT opens the tunnel of every sandbox named PREFIX*
			sbs, _ := st.AllSandboxes(ctx)
			port, _ := strconv.Atoi(f[2])
			var wg sync.WaitGroup
			var mu sync.Mutex
			n, bad := 0, 0
			ids := make(chan string)
			start := time.Now()
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for id := range ids {
						c, err := tun.DialContext(ctx, id, port)
						mu.Lock()
						if err != nil {
							bad++
						} else {
							n++
							c.Close()
						}
						mu.Unlock()
					}
				}()
			}
			for _, sb := range sbs {
				if strings.HasPrefix(sb.Name, f[1]) {
					ids <- sb.ID
				}
			}
			close(ids)
			wg.Wait()
			say("ok %d %d %d", n, bad, time.Since(start).Milliseconds())
		case "quit":
			say("ok")
			return
		default:
			say("unknown command %q", f[0])
		}
	}
}

// benchRoutesProcess loads the route table from the Postgres schema in
// FROOG_BENCH_PG (which TestEdgeBench filled), then measures changes.
func benchRoutesProcess(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := pg.Open(ctx, pg.Options{URL: os.Getenv("FROOG_BENCH_PG"), Schema: os.Getenv("FROOG_BENCH_PG_SCHEMA")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	rssBefore := testkit.RSSKiB(os.Getpid())
	start := time.Now()
	routes, err := route.New(route.Options{Store: st, Domain: "froog.test"})
	if err != nil {
		t.Fatal(err)
	}
	go routes.Run(ctx)
	<-routes.Ready()
	load := time.Since(start)
	runtime.GC()
	debug.FreeOSMemory()
	runtime.ReadMemStats(&after)
	if routes.Lookup("r1.froog.test") == nil {
		t.Fatal("route r1 is not in the table")
	}
	say("loaded %d %d %d", load.Milliseconds(), after.HeapInuse-before.HeapInuse, testkit.RSSKiB(os.Getpid())-rssBefore)
	// Changes: a new URL on a sandbox of its own, each a new name; the
	// time is from the store's commit returning to the table serving it.
	sbID := os.Getenv("FROOG_BENCH_PG_SANDBOX")
	var commits, props []time.Duration
	for i := range 9 {
		name := fmt.Sprintf("change%d", i)
		t0 := time.Now()
		_, err := st.PutURL(ctx, sbID, 1000+i, func(*store.URL, *store.AuditEvent) (store.URL, error) {
			return store.URL{Hostname: name, TokenHash: store.HashSecret("pt_bench"), CreatedAt: time.Now(), UpdatedAt: time.Now()}, nil
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t1 := time.Now()
		for routes.Lookup(name+".froog.test") == nil {
			if time.Since(t1) > 30*time.Second {
				t.Fatalf("change %s never reached the table", name)
			}
			runtime.Gosched()
		}
		commits, props = append(commits, t1.Sub(t0)), append(props, time.Since(t1))
	}
	say("changes %d %d", median(commits).Microseconds(), median(props).Microseconds())
	fmt.Fprintln(os.Stderr, filepath.Base(os.Args[0]), "route changes:", props)
}
