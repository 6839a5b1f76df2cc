package desktop

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"froog.tech/froog/desktop/rfb"
	"froog.tech/froog/internal/syncbuf"
	"froog.tech/froog/store"
)

const (
	sbxA = "sbx_00000000000000aa"
	sbxB = "sbx_00000000000000bb"
)

var testKey = bytes.Repeat([]byte{7}, 32)

// fakeLinks is an in-memory Links.
type fakeLinks struct {
	mu    sync.Mutex
	links map[string]Link         // by hash
	keys  map[string]store.APIKey // by id
}

// setKey adds or replaces an API key that links name as theirs.
func (f *fakeLinks) setKey(k store.APIKey) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.keys == nil {
		f.keys = map[string]store.APIKey{}
	}
	f.keys[k.ID] = k
}

func (f *fakeLinks) APIKeyByID(_ context.Context, id string) (store.APIKey, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k, ok := f.keys[id]
	if !ok {
		return store.APIKey{}, store.ErrNotFound
	}
	return k, nil
}

func (f *fakeLinks) add(token string, l Link) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.links == nil {
		f.links = map[string]Link{}
	}
	f.links[HashToken(token)] = l
}

func (f *fakeLinks) DesktopLink(_ context.Context, hash string) (Link, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.links[hash]
	if !ok {
		return Link{}, ErrLinkNotFound
	}
	return l, nil
}

func (f *fakeLinks) LockDesktopLinkViewOnly(_ context.Context, hash string) (Link, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.links[hash]
	if !ok {
		return Link{}, ErrLinkNotFound
	}
	l.ViewOnly = true
	f.links[hash] = l
	return l, nil
}

// fakeSandboxes says which sandboxes run, since when.
type fakeSandboxes struct {
	mu    sync.Mutex
	since map[string]time.Time
}

func (f *fakeSandboxes) set(id string, since time.Time, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.since == nil {
		f.since = map[string]time.Time{}
	}
	if ok {
		f.since[id] = since
	} else {
		delete(f.since, id)
	}
}

func (f *fakeSandboxes) Running(id string) (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.since[id]
	return t, ok
}

// fakeStarter "starts" a desktop by returning a port on the loopback,
// where the test runs the VNC server.
type fakeStarter struct {
	mu       sync.Mutex
	port     int
	err      error
	calls    int
	profiles []string // asked for, in order
	audio    int      // the sound server's port; 0: no sound
}

func (f *fakeStarter) StartDesktop(_ context.Context, sandboxID, kind, profile string) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	f.profiles = append(f.profiles, profile)
	return f.port, f.err
}

func (f *fakeStarter) StartSound(ctx context.Context, sandboxID, kind, profile string) (int, error) {
	if _, err := f.StartDesktop(ctx, sandboxID, kind, profile); err != nil {
		return 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.audio == 0 {
		return 0, ErrNoSound
	}
	return f.audio, nil
}

// fakeLoopbackDialer stands in for the tunnel: the sandbox's port is a port
// on 127.0.0.1.
type fakeLoopbackDialer struct{}

func (fakeLoopbackDialer) DialContext(ctx context.Context, sandboxID string, port int) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", fmt.Sprintf("127.0.0.1:%d", port))
}

// fakeRFB is a minimal RFB 3.8 server (security None) with a 64x48
// framebuffer of one colour: it answers every FramebufferUpdateRequest
// with a Raw rectangle of the whole screen (in the pixel format the
// client set, if it sent SetPixelFormat) and records every client
// message it gets, so a test can assert what reached "the desktop".
type fakeRFB struct {
	ln     net.Listener
	colour [3]byte // under mu

	mu       sync.Mutex
	shared   []byte       // ClientInit shared flags, one per connection
	types    map[byte]int // client messages by type
	accepted int          // connections so far
	open     int          // connections open now
}

func (f *fakeRFB) setColour(c [3]byte) {
	f.mu.Lock()
	f.colour = c
	f.mu.Unlock()
}

// conns returns how many connections were made and are open.
func (f *fakeRFB) conns() (accepted, open int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.accepted, f.open
}

func newFakeRFB(t *testing.T, colour [3]byte) *fakeRFB {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeRFB{ln: ln, colour: colour, types: map[byte]int{}}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go f.serve(c)
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return f
}

func (f *fakeRFB) port() int { return f.ln.Addr().(*net.TCPAddr).Port }

func (f *fakeRFB) count(typ byte) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.types[typ]
}

func (f *fakeRFB) serve(c net.Conn) {
	defer c.Close()
	f.mu.Lock()
	f.accepted++
	f.open++
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.open--
		f.mu.Unlock()
	}()
	shifts := [3]byte{16, 8, 0} // red, green, blue, as ServerInit says
	buf := make([]byte, 20)
	c.Write([]byte("RFB 003.008\n"))
	if _, err := io.ReadFull(c, buf[:12]); err != nil {
		return
	}
	c.Write([]byte{1, 1}) // one security type: None
	if _, err := io.ReadFull(c, buf[:1]); err != nil || buf[0] != 1 {
		return
	}
	c.Write([]byte{0, 0, 0, 0}) // SecurityResult OK
	if _, err := io.ReadFull(c, buf[:1]); err != nil {
		return
	}
	f.mu.Lock()
	f.shared = append(f.shared, buf[0])
	f.mu.Unlock()
	// ServerInit: 64x48, 32 bpp, depth 24, little endian, true colour,
	// red at bit 16, green 8, blue 0.
	init := []byte{0, 64, 0, 48, 32, 24, 0, 1, 0, 255, 0, 255, 0, 255, 16, 8, 0, 0, 0, 0}
	init = binary.BigEndian.AppendUint32(init, 4)
	c.Write(append(init, "fake"...))
	for {
		if _, err := io.ReadFull(c, buf[:1]); err != nil {
			return
		}
		typ := buf[0]
		var rest int
		switch typ {
		case rfb.MsgSetPixelFormat:
			if _, err := io.ReadFull(c, buf[:19]); err != nil {
				return
			}
			shifts = [3]byte{buf[13], buf[14], buf[15]}
		case rfb.MsgSetEncodings:
			if _, err := io.ReadFull(c, buf[:3]); err != nil {
				return
			}
			rest = 4 * int(binary.BigEndian.Uint16(buf[1:3]))
		case rfb.MsgFramebufferUpdateRequest:
			rest = 9
		case rfb.MsgKeyEvent:
			rest = 7
		case rfb.MsgPointerEvent:
			rest = 5
		case rfb.MsgClientCutText:
			if _, err := io.ReadFull(c, buf[:7]); err != nil {
				return
			}
			rest = int(binary.BigEndian.Uint32(buf[3:7]))
		default:
			return // the fake knows no more; a real server would close too
		}
		if _, err := io.CopyN(io.Discard, c, int64(rest)); err != nil {
			return
		}
		f.mu.Lock()
		f.types[typ]++
		f.mu.Unlock()
		if typ == rfb.MsgFramebufferUpdateRequest {
			c.Write(f.frame(shifts))
		}
	}
}

// frame is a FramebufferUpdate of the whole 64x48 screen in Raw, 32 bpp
// little endian with the given shifts.
func (f *fakeRFB) frame(shifts [3]byte) []byte {
	f.mu.Lock()
	colour := f.colour
	f.mu.Unlock()
	b := []byte{0, 0, 0, 1, 0, 0, 0, 0, 0, 64, 0, 48, 0, 0, 0, 0}
	v := uint32(colour[0])<<shifts[0] | uint32(colour[1])<<shifts[1] | uint32(colour[2])<<shifts[2]
	px := binary.LittleEndian.AppendUint32(nil, v)
	return append(b, bytes.Repeat(px, 64*48)...)
}

// harness is a Server behind an httptest TLS server, with its fakes.
type harness struct {
	t         testing.TB
	srv       *Server
	ts        *httptest.Server
	links     *fakeLinks
	sandboxes *fakeSandboxes
	starter   *fakeStarter
	now       time.Time
	nowMu     sync.Mutex
	logs      *syncbuf.Buffer
	view      View
}

var started = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func newHarness(t *testing.T, v View, port int) *harness {
	h := &harness{t: t, links: &fakeLinks{}, sandboxes: &fakeSandboxes{}, starter: &fakeStarter{port: port},
		now: started.Add(time.Minute), logs: &syncbuf.Buffer{}, view: v}
	h.sandboxes.set(sbxA, started, true)
	h.sandboxes.set(sbxB, started, true)
	srv, err := New(Options{Links: h.links, Starter: h.starter, Dialer: fakeLoopbackDialer{}, Sandboxes: h.sandboxes,
		Key: testKey, Domain: "froog.test", Log: slog.New(slog.NewJSONHandler(h.logs, nil)), Now: h.clock,
		PingEvery: time.Second, CheckEvery: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	h.srv = srv
	h.ts = httptest.NewTLSServer(srv.Handler(v))
	t.Cleanup(func() {
		srv.Close()
		h.ts.Close()
	})
	return h
}

func (h *harness) clock() time.Time {
	h.nowMu.Lock()
	defer h.nowMu.Unlock()
	return h.now
}

func (h *harness) advance(d time.Duration) {
	h.nowMu.Lock()
	h.now = h.now.Add(d)
	h.nowMu.Unlock()
}

// link makes a link for the harness's view, expiring in 10 minutes.
func (h *harness) link(viewOnly bool) string {
	tok := "dt_" + strings.Repeat("x", 20) + fmt.Sprint(time.Now().UnixNano())
	h.links.add(tok, Link{SandboxID: h.view.ID, Kind: h.view.Kind, ViewOnly: viewOnly, Run: started, ExpiresAt: h.clock().Add(10 * time.Minute)})
	return tok
}

func (h *harness) host() string { return strings.TrimPrefix(h.ts.URL, "https://") }

// exchange posts a token as the page does; it returns the response and
// the session cookie, if one was set.
func (h *harness) exchange(token string, viewOnly bool) (*http.Response, *http.Cookie) {
	h.t.Helper()
	body := fmt.Sprintf(`{"token":%q,"view_only":%v}`, token, viewOnly)
	req, _ := http.NewRequest("POST", h.ts.URL+PathSession, strings.NewReader(body))
	req.Header.Set("Origin", h.ts.URL)
	req.Header.Set("Content-Type", "application/json")
	res, err := h.ts.Client().Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	res.Body.Close()
	for _, c := range res.Cookies() {
		if c.Name == CookieName {
			return res, c
		}
	}
	return res, nil
}

// dialWS opens the bridge's websocket with a cookie, as the page does.
func (h *harness) dialWS(cookie *http.Cookie, query string) (*websocket.Conn, *http.Response, error) {
	d := websocket.Dialer{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, HandshakeTimeout: 5 * time.Second}
	hdr := http.Header{"Origin": {h.ts.URL}}
	if cookie != nil {
		hdr.Set("Cookie", cookie.Name+"="+cookie.Value)
	}
	return d.Dial("wss://"+h.host()+PathWebsocket+query, hdr)
}
