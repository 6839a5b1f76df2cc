package desktop

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"froog.tech/froog/internal/syncbuf"
)

// fakeSelkies stands in for Selkies (the pinned commit, see selkies.go)
// where it cannot be installed: an HTTP server on 127.0.0.1 with POST
// /api/tokens behind "Bearer MASTER" and GET /api/websockets?token=T,
// which answers as Selkies' secure mode does (AUTH_SUCCESS with the
// token's role, MODE websockets, a stream_resolution) and, once a client
// has sent SETTINGS, sends it the screen as Selkies' binary frames: JPEG
// stripes (0x03, two stripes a frame) or, with h264 set, H.264 (0x04)
// from h264 (Annex B access units, sent in turn). One "encoder" runs
// while any client watches, shared by all of them, as in Selkies; encodes
// counts how many times it was started. It records every text message
// with the role of its sender, and binary messages by first byte.
type fakeSelkies struct {
	t      testing.TB
	master string
	w, h   int
	colour color.RGBA
	silent bool     // accept, answer, but never send a frame
	noSize bool     // send no stream_resolution: the page learns the size from the stripes
	h264   [][]byte // access units to send as 0x04 (the first a keyframe), else JPEG
	// feed, if set, is the encoder instead: every message taken from it
	// goes to every watcher, as fast as they take it (benchmarks).
	feed chan []byte
	// published is set by publish: an outside encoder sends the frames.
	published bool

	srv *httptest.Server

	mu          sync.Mutex
	tokens      map[string]string // token → role, as last provisioned
	provisions  int
	badAuth     int
	origins     []string
	extensions  []string // Sec-WebSocket-Extensions the edge offered
	msgs        []fakeSelkiesMsg
	binaries    map[byte]int
	watchers    map[*websocket.Conn]*sync.Mutex
	relays      map[*websocket.Conn]*fakeRelay // publish's, per watcher
	encoding    bool
	encodes     int
	framesSent  int
	connections int
}

type fakeSelkiesMsg struct {
	role, text string
}

func newFakeSelkies(t testing.TB, master string, colour color.RGBA) *fakeSelkies {
	f := &fakeSelkies{t: t, master: master, w: 64, h: 48, colour: colour, binaries: map[byte]int{},
		watchers: map[*websocket.Conn]*sync.Mutex{}, relays: map[*websocket.Conn]*fakeRelay{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/tokens", f.handleTokens)
	mux.HandleFunc("GET /api/websockets", f.handleWS)
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.close)
	return f
}

func (f *fakeSelkies) close() {
	f.srv.CloseClientConnections()
	f.srv.Close()
	f.mu.Lock()
	f.encoding = false
	f.mu.Unlock()
}

func (f *fakeSelkies) port() int { return f.srv.Listener.Addr().(*net.TCPAddr).Port }

func (f *fakeSelkies) handleTokens(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+f.master {
		f.mu.Lock()
		f.badAuth++
		f.mu.Unlock()
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
		return
	}
	var table map[string]struct {
		Role string `json:"role"`
		Slot *int   `json:"slot"`
	}
	if err := json.NewDecoder(r.Body).Decode(&table); err != nil {
		http.Error(w, "Bad Request", http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.tokens = map[string]string{}
	for tok, p := range table {
		f.tokens[tok] = p.Role
	}
	f.provisions++
	f.mu.Unlock()
	w.Write([]byte("OK"))
}

func (f *fakeSelkies) handleWS(w http.ResponseWriter, r *http.Request) {
	tok := r.URL.Query().Get("token")
	if tok == "" {
		http.Error(w, "Token missing in secure mode", http.StatusUnauthorized)
		return
	}
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	c, err := up.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer c.Close()
	f.mu.Lock()
	f.origins = append(f.origins, r.Header.Get("Origin"))
	f.extensions = append(f.extensions, r.Header.Get("Sec-WebSocket-Extensions"))
	role, ok := f.tokens[tok]
	f.connections++
	f.mu.Unlock()
	if !ok {
		c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(4001, "Invalid authentication token"), time.Now().Add(time.Second))
		return
	}
	var wmu sync.Mutex
	send := func(mt int, b []byte) error {
		wmu.Lock()
		defer wmu.Unlock()
		c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		return c.WriteMessage(mt, b)
	}
	send(websocket.TextMessage, []byte(`AUTH_SUCCESS,{"role":"`+role+`","slot":null}`))
	send(websocket.TextMessage, []byte("MODE websockets"))
	send(websocket.TextMessage, []byte("clipboard,"+base64.StdEncoding.EncodeToString([]byte("from the sandbox ✓"))))
	if !f.noSize {
		send(websocket.TextMessage, []byte(fmt.Sprintf(`{"type":"stream_resolution","width":%d,"height":%d,"displayId":"primary"}`, f.w, f.h)))
	}
	defer func() {
		f.mu.Lock()
		delete(f.watchers, c)
		if r := f.relays[c]; r != nil {
			close(r.ch)
			delete(f.relays, c)
		}
		f.mu.Unlock()
	}()
	for {
		mt, data, err := c.ReadMessage()
		if err != nil {
			return
		}
		f.mu.Lock()
		if mt == websocket.BinaryMessage {
			if len(data) > 0 {
				f.binaries[data[0]]++
			}
			f.mu.Unlock()
			continue
		}
		f.msgs = append(f.msgs, fakeSelkiesMsg{role: role, text: string(data)})
		watch := strings.HasPrefix(string(data), "SETTINGS,") && f.watchers[c] == nil
		if watch {
			f.watchers[c] = &wmu
		}
		start := watch && !f.encoding && !f.silent && !f.published
		if start {
			f.encoding = true
			f.encodes++
		}
		f.mu.Unlock()
		if start {
			go f.encode()
		}
	}
}

// encode sends frames to every watcher every 50 ms until none is left.
func (f *fakeSelkies) encode() {
	if f.feed != nil {
		for fr := range f.feed {
			f.mu.Lock()
			var ws []*websocket.Conn
			var mus []*sync.Mutex
			for c, mu := range f.watchers {
				ws, mus = append(ws, c), append(mus, mu)
			}
			f.framesSent++
			f.mu.Unlock()
			for i, c := range ws {
				mus[i].Lock()
				c.WriteMessage(websocket.BinaryMessage, fr)
				mus[i].Unlock()
			}
		}
		return
	}
	jpegFrame := f.jpegStripes()
	for id := 0; ; id++ {
		var frames [][]byte
		if len(f.h264) > 0 {
			au := f.h264[id%len(f.h264)]
			hdr := []byte{0x04, 0, 0, 0, 0, 0, 0, 0, 0, 0}
			if id%len(f.h264) == 0 {
				hdr[1] = 0x01
			}
			binary.BigEndian.PutUint16(hdr[2:], uint16(id))
			binary.BigEndian.PutUint16(hdr[6:], uint16(f.w))
			binary.BigEndian.PutUint16(hdr[8:], uint16(f.h))
			frames = [][]byte{append(hdr, au...)}
		} else {
			for _, s := range jpegFrame {
				b := bytes.Clone(s)
				binary.BigEndian.PutUint16(b[2:], uint16(id))
				frames = append(frames, b)
			}
		}
		f.mu.Lock()
		if !f.encoding || len(f.watchers) == 0 {
			f.encoding = false
			f.mu.Unlock()
			return
		}
		type w struct {
			c  *websocket.Conn
			mu *sync.Mutex
		}
		var ws []w
		for c, mu := range f.watchers {
			ws = append(ws, w{c, mu})
		}
		f.framesSent++
		f.mu.Unlock()
		for _, x := range ws {
			x.mu.Lock()
			x.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
			for _, fr := range frames {
				x.c.WriteMessage(websocket.BinaryMessage, fr)
			}
			x.mu.Unlock()
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// jpegStripes is the screen as two 0x03 messages: the top and bottom
// halves, each a JPEG, with header [0x03, 0, frame id, stripe y].
func (f *fakeSelkies) jpegStripes() [][]byte {
	var out [][]byte
	for _, y := range []int{0, f.h / 2} {
		img := image.NewRGBA(image.Rect(0, 0, f.w, f.h/2))
		for i := 0; i < len(img.Pix); i += 4 {
			img.Pix[i], img.Pix[i+1], img.Pix[i+2], img.Pix[i+3] = f.colour.R, f.colour.G, f.colour.B, 255
		}
		var b bytes.Buffer
		b.Write([]byte{0x03, 0, 0, 0, byte(y >> 8), byte(y)})
		if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 95}); err != nil {
			f.t.Error(err)
		}
		out = append(out, b.Bytes())
	}
	return out
}

// texts is every text message received from clients of role.
func (f *fakeSelkies) texts(role string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, m := range f.msgs {
		if m.role == role {
			out = append(out, m.text)
		}
	}
	return out
}

func (f *fakeSelkies) stats() (provisions, badAuth, encodes, connections int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.provisions, f.badAuth, f.encodes, f.connections
}

// fakeStreamStarter is a StreamStarter: VNC on vncPort, Selkies on
// selkiesPort (0: not installed); it keeps the master tokens it was given.
type fakeStreamStarter struct {
	fakeStarter
	selkiesPort int
	masters     []string
}

func (f *fakeStreamStarter) StartStream(_ context.Context, sandboxID, kind, profile, master string) (Stream, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	f.profiles = append(f.profiles, profile)
	f.masters = append(f.masters, master)
	return Stream{VNCPort: f.port, SelkiesPort: f.selkiesPort}, f.err
}

// newStreamHarness is newHarness with a Starter that offers Selkies on
// selkiesPort (0: a desktop without it; -1: a Starter that knows nothing
// of Selkies).
func newStreamHarness(t testing.TB, v View, vncPort, selkiesPort int) (*harness, *fakeStreamStarter) {
	h := &harness{t: t, links: &fakeLinks{}, sandboxes: &fakeSandboxes{}, starter: &fakeStarter{port: vncPort},
		now: started.Add(time.Minute), logs: &syncbuf.Buffer{}, view: v}
	h.sandboxes.set(sbxA, started, true)
	h.sandboxes.set(sbxB, started, true)
	ss := &fakeStreamStarter{fakeStarter: fakeStarter{port: vncPort}, selkiesPort: selkiesPort}
	var st Starter = ss
	if selkiesPort < 0 {
		st = h.starter
	}
	srv, err := New(Options{Links: h.links, Starter: st, Dialer: fakeLoopbackDialer{}, Sandboxes: h.sandboxes,
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
	return h, ss
}

// fakeRelay is one watcher's queue of published frames, as Selkies'
// VideoRelay: up to 64 messages; when it overflows, the watcher's delta
// frames are dropped until the next keyframe, and a new watcher starts
// at a keyframe.
type fakeRelay struct {
	ch    chan []byte
	gated bool
}

// publish sends an encoder's frame (key: a keyframe) to every watcher
// through its relay, never blocking the encoder.
func (f *fakeSelkies) publish(msg []byte, key bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.published = true
	f.framesSent++
	for c, mu := range f.watchers {
		r := f.relays[c]
		if r == nil {
			r = &fakeRelay{ch: make(chan []byte, 64), gated: true}
			f.relays[c] = r
			go func(c *websocket.Conn, mu *sync.Mutex, ch chan []byte) {
				for m := range ch {
					mu.Lock()
					c.SetWriteDeadline(time.Now().Add(5 * time.Second))
					err := c.WriteMessage(websocket.BinaryMessage, m)
					mu.Unlock()
					if err != nil {
						for range ch {
						}
						return
					}
				}
			}(c, mu, r.ch)
		}
		if key {
			r.gated = false
		}
		if r.gated {
			continue
		}
		select {
		case r.ch <- msg:
		default:
			r.gated = true
		}
	}
}
