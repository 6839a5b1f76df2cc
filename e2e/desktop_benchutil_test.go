//go:build bench

package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"froog.tech/froog/internal/testkit"
)

// What the desktop and wall benchmarks share: a minimal X11 client that
// paints a display, an RFB stream that counts its bytes, and the froogd process's CPU
// and memory from /proc and its metrics.

// xPainter is an X11 client with no library: it connects to a display's
// unix socket (the local driver's Xvnc has no X authority) and paints the
// root window, which the desktop shows (openbox has no desktop window
// over it).
type xPainter struct {
	c      net.Conn
	w      *bufio.Writer
	root   uint32
	gc     uint32
	maxReq int // bytes
	width  int
	height int
}

func newXPainter(display string) (*xPainter, error) {
	n := strings.TrimPrefix(display, ":")
	c, err := net.Dial("unix", "/tmp/.X11-unix/X"+n)
	if err != nil {
		return nil, err
	}
	// Little-endian, protocol 11.0, no authorization.
	if _, err := c.Write([]byte{'l', 0, 11, 0, 0, 0, 0, 0, 0, 0, 0, 0}); err != nil {
		c.Close()
		return nil, err
	}
	var h [8]byte
	if _, err := io.ReadFull(c, h[:]); err != nil {
		c.Close()
		return nil, err
	}
	rest := make([]byte, 4*int(binary.LittleEndian.Uint16(h[6:])))
	if _, err := io.ReadFull(c, rest); err != nil {
		c.Close()
		return nil, err
	}
	if h[0] != 1 {
		c.Close()
		return nil, fmt.Errorf("x11 setup refused: %q", rest)
	}
	le := binary.LittleEndian
	base := le.Uint32(rest[4:])
	vendor := int(le.Uint16(rest[16:]))
	formats := int(rest[21])
	screen := rest[32+(vendor+3)/4*4+8*formats:]
	p := &xPainter{c: c, w: bufio.NewWriterSize(c, 1<<20), root: le.Uint32(screen[0:]), gc: base | 1,
		maxReq: 4 * int(le.Uint16(rest[18:])), width: int(le.Uint16(screen[20:])), height: int(le.Uint16(screen[22:]))}
	go io.Copy(io.Discard, c) // errors and events: nothing is asked that answers
	// CreateGC on the root, no values.
	p.put(55, 0, le.AppendUint32(le.AppendUint32(le.AppendUint32(nil, p.gc), p.root), 0))
	return p, p.w.Flush()
}

// put queues one request: opcode, its data byte, and the rest (a
// multiple of 4 bytes).
func (p *xPainter) put(op, data byte, body []byte) {
	p.w.Write([]byte{op, data})
	binary.Write(p.w, binary.LittleEndian, uint16(1+len(body)/4))
	p.w.Write(body)
}

// fill paints the whole root window one colour (0xRRGGBB).
func (p *xPainter) fill(rgb uint32) error {
	le := binary.LittleEndian
	// ChangeWindowAttributes: background-pixel; then ClearArea of all of it.
	p.put(2, 0, le.AppendUint32(le.AppendUint32(le.AppendUint32(nil, p.root), 0x2), rgb))
	p.put(61, 0, le.AppendUint32(le.AppendUint32(le.AppendUint32(nil, p.root), 0), 0))
	return p.w.Flush()
}

// image draws a full-screen picture of B, G, R, X bytes (ZPixmap, depth
// 24, 32 bits a pixel) in strips that fit a request.
func (p *xPainter) image(bgrx []byte, w, h int) error {
	le := binary.LittleEndian
	rows := max(1, (p.maxReq-64)/(4*w))
	for y := 0; y < h; y += rows {
		n := min(rows, h-y)
		body := le.AppendUint32(nil, p.root)
		body = le.AppendUint32(body, p.gc)
		body = le.AppendUint16(body, uint16(w))
		body = le.AppendUint16(body, uint16(n))
		body = le.AppendUint16(body, 0)
		body = le.AppendUint16(body, uint16(y))
		body = append(body, 0, 24, 0, 0)
		p.put(72, 2, append(body, bgrx[4*w*y:4*w*(y+n)]...))
	}
	return p.w.Flush()
}

func (p *xPainter) close() { p.c.Close() }

// textScreen is a synthetic screen of text, as a terminal or an editor
// shows it: random 5x9 glyphs in 8x16 cells, dark on white, lines of
// random length. It stands in for an agent's desktop in tile sizes.
func textScreen(w, h int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	px := make([]byte, 4*w*h)
	for i := range px {
		px[i] = 0xff
	}
	for line := 0; line+16 <= h; line += 16 {
		n := r.IntN(w / 8)
		for col := 0; col < n; col++ {
			if r.IntN(6) == 0 {
				continue // a space
			}
			for gy := 0; gy < 9; gy++ {
				for gx := 0; gx < 5; gx++ {
					if r.IntN(100) < 35 {
						o := 4 * ((line+4+gy)*w + col*8 + 1 + gx)
						px[o], px[o+1], px[o+2] = 0x20, 0x20, 0x20
					}
				}
			}
		}
	}
	return px
}

// photoScreen is a photo-like picture: value noise of six octaves per
// channel, from 256-pixel features down to 8.
func photoScreen(w, h int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 2))
	px := make([]byte, 4*w*h)
	acc := make([]float64, w*h)
	for ch := 0; ch < 3; ch++ {
		clear(acc)
		amp := 0.5
		for cell := 256; cell >= 8; cell /= 2 {
			gw, gh := w/cell+2, h/cell+2
			grid := make([]float64, gw*gh)
			for i := range grid {
				grid[i] = r.Float64()
			}
			for y := 0; y < h; y++ {
				gy, fy := y/cell, float64(y%cell)/float64(cell)
				for x := 0; x < w; x++ {
					gx, fx := x/cell, float64(x%cell)/float64(cell)
					a := grid[gy*gw+gx]*(1-fx) + grid[gy*gw+gx+1]*fx
					b := grid[(gy+1)*gw+gx]*(1-fx) + grid[(gy+1)*gw+gx+1]*fx
					acc[y*w+x] += amp * (a*(1-fy) + b*fy)
				}
			}
			amp /= 2
		}
		for i, v := range acc {
			px[4*i+2-ch] = byte(min(255, v*255))
		}
	}
	return px
}

// rfbStream is one RFB client connection for a benchmark (testkit.RFB,
// shared), counting the bytes it reads.
type rfbStream struct {
	*testkit.RFB
	n     *atomic.Int64 // bytes read
	close func()
}

// counted is a stream whose reads are counted; its SetReadDeadline is
// the stream's.
type counted struct {
	io.ReadWriter
	n *atomic.Int64
}

func (c counted) Read(p []byte) (int, error) {
	n, err := c.ReadWriter.Read(p)
	c.n.Add(int64(n))
	return n, err
}

func (c counted) SetReadDeadline(t time.Time) error {
	if d, ok := c.ReadWriter.(interface{ SetReadDeadline(time.Time) error }); ok {
		return d.SetReadDeadline(t)
	}
	return nil
}

// newRFBStream does the handshake over rw; closer ends rw.
func newRFBStream(rw io.ReadWriter, closer func()) (*rfbStream, error) {
	n := new(atomic.Int64)
	c, err := testkit.NewRFB(counted{rw, n}, true)
	if err != nil {
		closer()
		return nil, err
	}
	return &rfbStream{RFB: c, n: n, close: closer}, nil
}

// rfbDirect is an RFB stream over TCP to the VNC port.
func rfbDirect(addr string) (*rfbStream, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	return newRFBStream(c, func() { c.Close() })
}

// rfbWebsocket is an RFB stream over the edge's websocket.
func rfbWebsocket(ws *websocket.Conn) (*rfbStream, error) {
	return newRFBStream(testkit.NewWSStream(ws), func() { ws.Close() })
}

// request asks for an update of the whole screen.
func (s *rfbStream) request(incremental bool) error {
	return s.Request(0, 0, s.W, s.H, incremental)
}

// update reads server messages up to the end of the next
// FramebufferUpdate and returns the pixels it covered.
func (s *rfbStream) update() (int, error) {
	u, err := s.ReadUpdate(nil)
	return u.Area(), err
}

// memory is froogd's resident memory and Go heap in use, after a pause
// for the garbage collector's next cycle to settle.
type memory struct{ RSS, Heap, Retained, Goroutines float64 }

func memoryOf(t *testing.T, pid int, metrics string) memory {
	time.Sleep(3 * time.Second)
	return memory{RSS: float64(testkit.RSSKiB(pid) << 10), Heap: float64(metric(t, metrics, "go_memstats_heap_inuse_bytes")),
		Goroutines: float64(metric(t, metrics, "go_goroutines")),
		// Freed heap the runtime has not yet given back to the OS: part
		// of the RSS, not of the heap in use.
		Retained: float64(metric(t, metrics, "go_memstats_heap_idle_bytes") - metric(t, metrics, "go_memstats_heap_released_bytes"))}
}

// benchEdge is a froogd dev for a benchmark: its API client, the edge's
// address, the CA to trust, its pid and its metrics address.
type benchEdge struct {
	p       *proc
	c       client
	edge    string
	pool    *x509.CertPool
	metrics string
	pprof   string // where a -tags pprof build serves its profiles
}

// startBenchEdge starts froogd dev; maxSandboxes above dev's 10 is set in
// its store's log between a first start (which creates the account) and
// the one returned.
func startBenchEdge(t *testing.T, maxSandboxes int) *benchEdge {
	data := t.TempDir()
	if maxSandboxes > 10 {
		p, _ := start(t, devReady, "dev", "--data", data, "--api-addr", "127.0.0.1:0", "--edge-addr", "127.0.0.1:0",
			"--edge-http-addr", "127.0.0.1:0", "--domain", "froog.test")
		p.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { p.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(time.Minute):
			p.cmd.Process.Kill()
			<-done
		}
		changed := false
		filepath.WalkDir(data, func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.Name() == "store.log" {
				b, _ := os.ReadFile(path)
				nb := bytes.ReplaceAll(b, []byte(`"max_sandboxes":10,`), []byte(fmt.Sprintf(`"max_sandboxes":%d,`, maxSandboxes)))
				changed = !bytes.Equal(b, nb)
				os.WriteFile(path, nb, 0o600)
			}
			return nil
		})
		if !changed {
			t.Fatal("no account with max_sandboxes 10 in the dev store's log")
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metrics := ln.Addr().String()
	ln.Close()
	ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pprofAddr := ln.Addr().String()
	ln.Close()
	t.Setenv("FROOG_PPROF_ADDR", pprofAddr)
	p, m := start(t, regexp.MustCompile(`API:\s+(http://\S+)/v1(?s:.*)Edge:\s+https://(\S+) `), "dev", "--data", data,
		"--api-addr", "127.0.0.1:0", "--edge-addr", "127.0.0.1:0", "--edge-http-addr", "127.0.0.1:0", "--domain", "froog.test",
		"--metrics-addr", metrics, "--rate-limit", "0", "--capacity", strconv.Itoa(max(16, maxSandboxes)))
	key, _ := os.ReadFile(filepath.Join(data, "api-key"))
	pool := x509.NewCertPool()
	caPEM, _ := os.ReadFile(filepath.Join(data, "ca.pem"))
	pool.AppendCertsFromPEM(caPEM)
	return &benchEdge{p: p, c: client{t: t, base: m[1], key: strings.TrimSpace(string(key))}, edge: m[2], pool: pool, metrics: metrics, pprof: pprofAddr}
}

func (e *benchEdge) pid() int { return e.p.cmd.Process.Pid }

// dial reaches the edge whatever the host, counting the bytes read.
func (e *benchEdge) dial(n *atomic.Int64) func(ctx context.Context, network, _ string) (net.Conn, error) {
	return func(ctx context.Context, network, _ string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, e.edge)
		if err != nil || n == nil {
			return c, err
		}
		return &countConn{Conn: c, n: n}, nil
	}
}

type countConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// web is an HTTPS client to the edge; h2 as a browser would.
func (e *benchEdge) web(n *atomic.Int64, h2 bool) *http.Client {
	tr := &http.Transport{DialContext: e.dial(n), TLSClientConfig: &tls.Config{RootCAs: e.pool}, ForceAttemptHTTP2: h2,
		MaxConnsPerHost: 0, MaxIdleConnsPerHost: 64}
	return &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// session exchanges a link's token (after #) on its host for the session
// cookie, as the page does, and returns the Cookie header's value.
func (e *benchEdge) session(t *testing.T, web *http.Client, host, token string) string {
	req, _ := http.NewRequest("POST", "https://"+host+"/session", strings.NewReader(fmt.Sprintf(`{"token": %q}`, token)))
	req.Header.Set("Origin", "https://"+host)
	req.Header.Set("Content-Type", "application/json")
	res, err := web.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("the link's exchange on %s: %d", host, res.StatusCode)
	}
	for _, ck := range res.Cookies() {
		if strings.HasPrefix(ck.Name, "__Host-") {
			return ck.Name + "=" + ck.Value
		}
	}
	t.Fatalf("no session cookie from %s", host)
	return ""
}

// websocket opens the viewer's websocket on host with the session cookie.
func (e *benchEdge) websocket(host, cookie string) (*websocket.Conn, error) {
	d := websocket.Dialer{NetDialContext: e.dial(nil), TLSClientConfig: &tls.Config{RootCAs: e.pool, NextProtos: []string{"http/1.1"}},
		HandshakeTimeout: 30 * time.Second}
	ws, res, err := d.Dial("wss://"+host+"/websockify", http.Header{"Origin": {"https://" + host}, "Cookie": {cookie}})
	if err != nil {
		return nil, fmt.Errorf("websocket: %w (%v)", err, res)
	}
	return ws, nil
}

// machine says what the figures were measured on.
func machine() map[string]any {
	model := "unknown"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		if m := regexp.MustCompile(`model name\s*:\s*(.+)`).FindSubmatch(b); m != nil {
			model = string(m[1])
		}
	}
	load := ""
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		load = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	return map[string]any{"cpus": runtime.NumCPU(), "cpu": model, "loadavg_at_start": load, "go": runtime.Version(),
		"when": time.Now().UTC().Format(time.RFC3339)}
}

// profile saves froogd's pprof profile (path, e.g. "profile?seconds=10"
// or "heap") as $FROOG_BENCH_PPROF/name, when that is set and froogd
// serves /debug/pprof (a build with -tags pprof, given as FROOGD_BIN:
// the release binary does not); it returns at once and wait waits for it.
func (e *benchEdge) profile(t *testing.T, path, name string) (wait func()) {
	dir := os.Getenv("FROOG_BENCH_PPROF")
	if dir == "" {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		res, err := http.Get("http://" + e.pprof + "/debug/pprof/" + path)
		if err != nil {
			t.Logf("pprof %s: %v", path, err)
			return
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != 200 {
			t.Logf("pprof %s: %d (froogd built without pprof?)", path, res.StatusCode)
			return
		}
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, name), b, 0o644)
	}()
	return func() { <-done }
}
