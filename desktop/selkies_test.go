package desktop

import (
	"bytes"
	"compress/gzip"
	"crypto/tls"
	"image/color"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"froog.tech/froog/internal/wait"
	"froog.tech/froog/names"
)

var fakeGreen = color.RGBA{0, 200, 0, 255}

// dialStream opens the stream's websocket with a cookie, as the page does.
func (h *harness) dialStream(cookie *http.Cookie, query string) (*websocket.Conn, *http.Response, error) {
	d := websocket.Dialer{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, HandshakeTimeout: 5 * time.Second,
		EnableCompression: true} // as browsers offer it
	hdr := http.Header{"Origin": {h.ts.URL}}
	if cookie != nil {
		hdr.Set("Cookie", cookie.Name+"="+cookie.Value)
	}
	return d.Dial("wss://"+h.host()+PathStream+query, hdr)
}

// streamRecorder keeps everything a page received on the stream.
type streamRecorder struct {
	mu     sync.Mutex
	all    bytes.Buffer
	texts  []string
	frames map[byte]int
	pings  int // the edge's, each answered with a pong
	closed error
}

func record(ws *websocket.Conn) *streamRecorder {
	r := &streamRecorder{frames: map[byte]int{}}
	ws.SetPingHandler(func(data string) error {
		r.mu.Lock()
		r.pings++
		r.mu.Unlock()
		ws.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(time.Second))
		return nil // as the default handler: a pong that can't go is no read error
	})
	go func() {
		for {
			mt, b, err := ws.ReadMessage()
			r.mu.Lock()
			if err != nil {
				r.closed = err
				r.mu.Unlock()
				return
			}
			r.all.Write(b)
			if mt == websocket.TextMessage {
				r.texts = append(r.texts, string(b))
			} else if len(b) > 0 {
				r.frames[b[0]]++
			}
			r.mu.Unlock()
		}
	}()
	return r
}

func (r *streamRecorder) pingCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pings
}

func (r *streamRecorder) frameCount(typ byte) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.frames[typ]
}

func (r *streamRecorder) hasText(prefix string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.ContainsFunc(r.texts, func(s string) bool { return strings.HasPrefix(s, prefix) })
}

func (r *streamRecorder) bytes() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return bytes.Clone(r.all.Bytes())
}

// secrets are Selkies' credentials for the harness's view.
func secrets(v View) []string {
	m := SelkiesMaster(testKey, v.ID, v.Kind)
	c, w := selkiesTokens(m)
	return []string{m, c, w}
}

// The edge chooses Selkies where the starter offers it, provisions its
// tokens with the master token the starter handed over, connects with the
// controller's token, and relays Selkies' frames; no credential reaches
// the page, its headers or the log.
func TestStreamSelkies(t *testing.T) {
	master := SelkiesMaster(testKey, viewA.ID, viewA.Kind)
	fake := newFakeSelkies(t, master, fakeGreen)
	h, ss := newStreamHarness(t, viewA, 1, fake.port())
	_, cookie := h.exchange(h.link(false), false)
	ws, res, err := h.dialStream(cookie, "")
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	rec := record(ws)
	if err := ws.WriteMessage(websocket.TextMessage, []byte(`SETTINGS,{"displayId":"primary","encoder":"jpeg"}`)); err != nil {
		t.Fatal(err)
	}
	if !wait.Until(10*time.Second, func() bool { return rec.frameCount(0x03) >= 4 }) {
		t.Fatalf("no JPEG stripes reached the page (got %v, closed %v)", rec.frames, rec.closed)
	}
	if !rec.hasText(`AUTH_SUCCESS,{"role":"controller"`) || !rec.hasText("MODE websockets") || !rec.hasText("clipboard,") {
		t.Errorf("the page did not get Selkies' greeting as a controller: %q", rec.texts)
	}
	ws.WriteMessage(websocket.TextMessage, []byte("kd,65"))
	wait.Until(5*time.Second, func() bool { return slices.Contains(fake.texts("controller"), "kd,65") })
	if got := fake.texts("controller"); !slices.Contains(got, "kd,65") || !slices.Contains(got, `SETTINGS,{"displayId":"primary","encoder":"jpeg"}`) {
		t.Errorf("a controller's messages did not reach Selkies as sent: %q", got)
	}
	if len(ss.masters) == 0 || ss.masters[0] != master {
		t.Errorf("the starter was not handed the sandbox's master token")
	}
	if p, bad, _, _ := fake.stats(); p == 0 || bad != 0 {
		t.Errorf("tokens provisioned %d times, %d with a wrong master token", p, bad)
	}
	if slices.ContainsFunc(fake.origins, func(o string) bool { return o != "" }) {
		t.Errorf("the edge sent Selkies an Origin: %q", fake.origins)
	}
	// No permessage-deflate on either side, though the page offers it.
	if slices.ContainsFunc(fake.extensions, func(o string) bool { return o != "" }) {
		t.Errorf("the edge offered Selkies %q", fake.extensions)
	}
	if ext := res.Header.Get("Sec-WebSocket-Extensions"); ext != "" {
		t.Errorf("the edge accepted the page's %q", ext)
	}
	if other := SelkiesMaster(testKey, sbxB, names.ViewDesktop); other == master || SelkiesMaster(testKey, sbxA, names.ViewBrowser) == master {
		t.Errorf("master tokens are not per sandbox and kind")
	}
	ws.Close()
	wait.Until(5*time.Second, func() bool { return h.srv.Conns() == 0 })
	seen := append(rec.bytes(), []byte(h.logs.String())...)
	for k, vs := range res.Header {
		seen = append(seen, []byte(k+": "+strings.Join(vs, ",")+"\n")...)
	}
	for _, s := range secrets(viewA) {
		if bytes.Contains(seen, []byte(s)) {
			t.Errorf("a Selkies credential reached the page, its headers or the log")
		}
	}
	if !strings.Contains(h.logs.String(), "desktop stream closed") {
		t.Errorf("no log line for the closed stream: %s", h.logs.String())
	}
}

// A view-only session gets Selkies' viewer token, and of a hostile page's
// messages only a watcher's reach Selkies (SETTINGS rewritten); a full
// session's page that asks for view-only is a watcher too.
func TestStreamViewOnly(t *testing.T) {
	fake := newFakeSelkies(t, SelkiesMaster(testKey, viewA.ID, viewA.Kind), fakeGreen)
	h, _ := newStreamHarness(t, viewA, 1, fake.port())
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte("kd,65"))
	zw.Close()
	for _, c := range []struct {
		name           string
		linkViewOnly   bool
		pageViewOnly   bool
		query, sentry  string
		wantForwarded  []string
		hostile        []string
		hostileBinary  [][]byte
		wantRoleViewer bool
	}{
		{name: "view-only link", linkViewOnly: true, sentry: "CLIENT_FRAME_ACK 1"},
		{name: "view-only page", pageViewOnly: true, sentry: "CLIENT_FRAME_ACK 2"},
		{name: "viewonly query", query: "?viewonly=1", sentry: "CLIENT_FRAME_ACK 3"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, cookie := h.exchange(h.link(c.linkViewOnly), c.pageViewOnly)
			ws, _, err := h.dialStream(cookie, c.query)
			if err != nil {
				t.Fatal(err)
			}
			defer ws.Close()
			rec := record(ws)
			for _, m := range []string{
				`SETTINGS,{"displayId":"display2","encoder":"jpeg","framerate":240}`,
				"kd,65", "ku,65", "kr", "m,10,10,1,0", "m2,5,5,1,0", "cw,aGk=", "cr", "REQUEST_CLIPBOARD",
				"cmd,xterm", "r,4000x4000,primary", "js,b,0,1,1", "co,end,x", "START_AUDIO",
				"REQUEST_KEYFRAME", "START_VIDEO", "CLIENT_FRAME_ACK 99999",
			} {
				ws.WriteMessage(websocket.TextMessage, []byte(m))
			}
			ws.WriteMessage(websocket.BinaryMessage, append([]byte{0x05}, gz.Bytes()...))
			ws.WriteMessage(websocket.BinaryMessage, []byte{0x02, 1, 2, 3, 4})
			ws.WriteMessage(websocket.TextMessage, []byte(c.sentry))
			if !wait.Until(10*time.Second, func() bool { return slices.Contains(fake.texts("viewer"), c.sentry) }) {
				t.Fatalf("the watcher's last message never reached Selkies as a viewer's: %q", fake.texts("viewer"))
			}
			got := fake.texts("viewer")
			want := []string{watcherSettings, "REQUEST_KEYFRAME", "START_VIDEO", c.sentry}
			got = got[len(got)-len(want):]
			if !slices.Equal(got, want) {
				t.Errorf("Selkies got %q from the watcher; want %q", got, want)
			}
			if !wait.Until(10*time.Second, func() bool { return rec.frameCount(0x03) > 0 }) {
				t.Errorf("the watcher got no frames")
			}
			if !rec.hasText(`AUTH_SUCCESS,{"role":"viewer"`) {
				t.Errorf("the watcher was not Selkies' viewer: %q", rec.texts)
			}
			if rec.hasText("clipboard,") {
				t.Errorf("the watcher got the sandbox's clipboard: %q", rec.texts)
			}
		})
	}
	if ctl := fake.texts("controller"); len(ctl) > 0 {
		t.Errorf("a watcher's messages reached Selkies as a controller's: %q", ctl)
	}
	fake.mu.Lock()
	bins := len(fake.binaries)
	fake.mu.Unlock()
	if bins != 0 {
		t.Errorf("a watcher's binary messages reached Selkies: %v", fake.binaries)
	}
}

// Three pages on one desktop — a controller and two watchers — share one
// encode at Selkies, and all three get its frames.
func TestStreamThreePagesOneEncode(t *testing.T) {
	fake := newFakeSelkies(t, SelkiesMaster(testKey, viewA.ID, viewA.Kind), fakeGreen)
	h, _ := newStreamHarness(t, viewA, 1, fake.port())
	var recs []*streamRecorder
	for i, viewOnly := range []bool{false, true, true} {
		_, cookie := h.exchange(h.link(viewOnly), false)
		ws, _, err := h.dialStream(cookie, "")
		if err != nil {
			t.Fatal(err)
		}
		defer ws.Close()
		recs = append(recs, record(ws))
		ws.WriteMessage(websocket.TextMessage, []byte(`SETTINGS,{"displayId":"primary"}`))
		if i == 0 && !wait.Until(10*time.Second, func() bool { return recs[0].frameCount(0x03) > 0 }) {
			t.Fatal("the first page got no frames")
		}
	}
	for i, r := range recs {
		if !wait.Until(10*time.Second, func() bool { return r.frameCount(0x03) >= 4 }) {
			t.Errorf("page %d got %d stripes", i, r.frameCount(0x03))
		}
	}
	if _, _, encodes, conns := fake.stats(); encodes != 1 || conns != 3 {
		t.Errorf("three pages made %d encodes over %d connections; want 1 over 3", encodes, conns)
	}
}

// Where there is no Selkies — the starter knows none, the desktop has
// none, or its port does not answer — the stream closes with no_stream
// (the page then uses VNC), and the log says why.
func TestStreamUnavailable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadPort := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	for _, c := range []struct {
		name string
		port int
	}{
		{"starter without selkies", -1},
		{"not installed", 0},
		{"not answering", deadPort},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, _ := newStreamHarness(t, viewA, 1, c.port)
			_, cookie := h.exchange(h.link(false), false)
			ws, _, err := h.dialStream(cookie, "")
			if err != nil {
				t.Fatal(err)
			}
			defer ws.Close()
			code, reason := closeOf(t, ws)
			if code != closeNoStream || reason != reasonNoStream {
				t.Errorf("closed with %d %q; want %d %q", code, reason, closeNoStream, reasonNoStream)
			}
			if !strings.Contains(h.logs.String(), "desktop stream unavailable") {
				t.Errorf("the log does not say why: %s", h.logs.String())
			}
			for _, sec := range secrets(viewA) {
				if strings.Contains(h.logs.String(), sec) {
					t.Errorf("a Selkies credential is in the log: %s", h.logs.String())
				}
			}
		})
	}
}

// The stream's websocket checks the session as the VNC one does.
func TestStreamRefusals(t *testing.T) {
	fake := newFakeSelkies(t, SelkiesMaster(testKey, viewA.ID, viewA.Kind), fakeGreen)
	h, _ := newStreamHarness(t, viewA, 1, fake.port())
	_, cookie := h.exchange(h.link(false), false)
	if _, res, err := h.dialStream(nil, ""); err == nil || res == nil || res.StatusCode != http.StatusForbidden {
		t.Errorf("without a cookie: %v", err)
	}
	d := websocket.Dialer{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	hdr := http.Header{"Origin": {"https://evil.example"}, "Cookie": {cookie.Name + "=" + cookie.Value}}
	if _, res, err := d.Dial("wss://"+h.host()+PathStream, hdr); err == nil || res == nil || res.StatusCode != http.StatusForbidden {
		t.Errorf("from another origin: %v", err)
	}
	if _, _, _, conns := fake.stats(); conns != 0 {
		t.Errorf("refused pages reached Selkies %d times", conns)
	}
	// A stop of the sandbox ends an open stream with sandbox_stopped.
	ws, _, err := h.dialStream(cookie, "")
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	ws.WriteMessage(websocket.TextMessage, []byte(`SETTINGS,{}`))
	wait.For(t, 10*time.Second, "the stream to connect", func() bool { _, _, _, c := fake.stats(); return c == 1 })
	h.sandboxes.set(sbxA, time.Time{}, false)
	if code, reason := closeOf(t, ws); code != closeSandboxStopped || reason != CodeSandboxStopped {
		t.Errorf("closed with %d %q after a stop", code, reason)
	}
}

// An idle stream stays open: nothing from Selkies nor the page for more
// than the read deadline (3 pings), only the edge's pings and the page's
// pongs, and the next message still goes through. The edge has no idle
// timeout of its own.
func TestStreamIdle(t *testing.T) {
	fake := newFakeSelkies(t, SelkiesMaster(testKey, viewA.ID, viewA.Kind), fakeGreen)
	fake.silent = true
	h, _ := newStreamHarness(t, viewA, 1, fake.port()) // PingEvery 1 s
	_, cookie := h.exchange(h.link(false), false)
	ws, _, err := h.dialStream(cookie, "")
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	rec := record(ws) // reading answers the edge's pings
	wait.For(t, 10*time.Second, "the greeting", func() bool { return rec.hasText("MODE websockets") })
	// Idle past the read deadline: more pings than it is long.
	pings := rec.pingCount()
	wait.For(t, 30*time.Second, "the edge's pings past its read deadline", func() bool {
		return rec.pingCount() > pings+readDeadlinePingPeriods
	})
	ws.WriteMessage(websocket.TextMessage, []byte("REQUEST_KEYFRAME"))
	if !wait.Until(10*time.Second, func() bool { return slices.Contains(fake.texts("controller"), "REQUEST_KEYFRAME") }) {
		t.Fatalf("after %d pings idle the stream is gone (%v)", readDeadlinePingPeriods+1, rec.closed)
	}
	if h.srv.Conns() != 1 {
		t.Errorf("%d open bridges", h.srv.Conns())
	}
}

// A Selkies that refuses the master token (one started with another, as
// before a fork's first open) gives no_stream too, and nothing reaches
// its websocket.
func TestStreamWrongMaster(t *testing.T) {
	fake := newFakeSelkies(t, SelkiesMaster(testKey, sbxB, names.ViewDesktop), fakeGreen)
	h, _ := newStreamHarness(t, viewA, 1, fake.port())
	_, cookie := h.exchange(h.link(false), false)
	ws, _, err := h.dialStream(cookie, "")
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	if code, reason := closeOf(t, ws); code != closeNoStream || reason != reasonNoStream {
		t.Errorf("closed with %d %q", code, reason)
	}
	if p, bad, _, conns := fake.stats(); p != 0 || bad != 1 || conns != 0 {
		t.Errorf("provisioned %d, refused %d, websockets %d; want 0, 1, 0", p, bad, conns)
	}
}

// The stream starts a browser view with its link's profile, as VNC does.
func TestStreamBrowserProfile(t *testing.T) {
	v := View{Kind: names.ViewBrowser, ID: sbxA}
	fake := newFakeSelkies(t, SelkiesMaster(testKey, v.ID, v.Kind), fakeGreen)
	h, ss := newStreamHarness(t, v, 1, fake.port())
	tok := "dt_" + strings.Repeat("s", 21)
	h.links.add(tok, Link{SandboxID: sbxA, Kind: names.ViewBrowser, Profile: "/home/u/work", Run: started, ExpiresAt: h.clock().Add(time.Minute)})
	_, cookie := h.exchange(tok, false)
	ws, _, err := h.dialStream(cookie, "")
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	wait.Until(10*time.Second, func() bool { ss.mu.Lock(); defer ss.mu.Unlock(); return len(ss.profiles) > 0 })
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if !slices.Equal(ss.profiles, []string{"/home/u/work"}) {
		t.Errorf("the stream's starter was asked for profiles %q, want the link's", ss.profiles)
	}
}
