package testkit_test

import (
	"bytes"
	"encoding/binary"
	"image"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/gorilla/websocket"

	"froog.tech/froog/internal/testkit"
)

// serverHello is what a VNC server of w by h with security None sends
// up to ServerInit (its name "x").
func serverHello(w, h uint16) []byte {
	b := []byte("RFB 003.008\n")
	b = append(b, 2, 2, 1) // VNC auth, None
	b = append(b, 0, 0, 0, 0)
	b = binary.BigEndian.AppendUint16(b, w)
	b = binary.BigEndian.AppendUint16(b, h)
	b = append(b, 32, 24, 0, 1, 0, 255, 0, 255, 0, 255, 16, 8, 0, 0, 0, 0)
	return append(b, 0, 0, 0, 1, 'x')
}

// raw is a Raw rectangle at x, y of w by h, all of colour rgb.
func raw(x, y, w, h uint16, rgb uint32) []byte {
	b := rect(x, y, w, h, 0)
	return append(b, bytes.Repeat(binary.LittleEndian.AppendUint32(nil, rgb), int(w)*int(h))...)
}

func rect(x, y, w, h uint16, enc int32) []byte {
	var b []byte
	for _, v := range []uint16{x, y, w, h} {
		b = binary.BigEndian.AppendUint16(b, v)
	}
	return binary.BigEndian.AppendUint32(b, uint32(enc))
}

// script is a server that has said everything in advance; what the
// client writes is kept.
type script struct {
	io.Reader
	sent bytes.Buffer
}

func (s *script) Write(p []byte) (int, error) { return s.sent.Write(p) }

func newScript(server ...[]byte) *script {
	return &script{Reader: bytes.NewReader(bytes.Join(server, nil))}
}

// The handshake, what the client sends, and one update of every kind of
// rectangle after a bell and both kinds of cut text.
func TestRFBUpdate(t *testing.T) {
	t.Parallel()
	var upd []byte
	upd = append(upd, 2)                                                 // Bell
	upd = append(upd, 3, 0, 0, 0, 0, 0, 0, 2, 'h', 'i')                  // ServerCutText
	upd = append(upd, 3, 0, 0, 0, 0xff, 0xff, 0xff, 0xfd, 'a', 'b', 'c') // Extended Clipboard, -3
	upd = append(upd, 0, 0, 0, 5)
	upd = append(upd, raw(0, 0, 2, 2, 0x0000ff)...)
	upd = append(append(append(upd, rect(2, 0, 2, 2, 16)...), 0, 0, 0, 3), 1, 2, 3) // ZRLE, 3 bytes
	upd = append(upd, rect(0, 0, 8, 4, -223)...)                                    // DesktopSize
	upd = append(upd, rect(0, 0, 0, 0, -224)...)                                    // LastRect: the fifth is not read
	s := newScript(serverHello(4, 2), upd, raw(0, 0, 1, 1, 0x102030))
	c, err := testkit.NewRFB(s, false)
	if err != nil {
		t.Fatal(err)
	}
	if c.W != 4 || c.H != 2 {
		t.Fatalf("size %dx%d, want 4x2", c.W, c.H)
	}
	want := []byte("RFB 003.008\n\x01\x00")
	want = append(want, 0, 0, 0, 0, 32, 24, 0, 1, 0, 255, 0, 255, 0, 255, 16, 8, 0, 0, 0, 0)
	want = append(want, 2, 0, 0, 1, 0, 0, 0, 0)
	if got := s.sent.Bytes(); !bytes.Equal(got, want) {
		t.Fatalf("the client sent %v, want %v", got, want)
	}
	s.sent.Reset()
	u, err := c.ReadUpdate(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(u.Rects) != 4 || u.Rects[1] != (testkit.Rect{X: 2, W: 2, H: 2, Encoding: 16}) || u.Area() != 8 {
		t.Errorf("rectangles %+v (area %d), want 4 of area 8", u.Rects, u.Area())
	}
	if len(u.Cuts) != 2 || string(u.Cuts[0]) != "hi" || string(u.Cuts[1]) != "abc" {
		t.Errorf("cut texts %q, want hi and abc", u.Cuts)
	}
	if c.W != 8 || c.H != 4 {
		t.Errorf("after DesktopSize: %dx%d, want 8x4", c.W, c.H)
	}

	// Client messages.
	if err := c.Key('a'); err != nil {
		t.Fatal(err)
	}
	if err := c.Request(1, 2, 3, 4, true); err != nil {
		t.Fatal(err)
	}
	if err := c.SetEncodings(16, -1063131698); err != nil {
		t.Fatal(err)
	}
	want = []byte{4, 1, 0, 0, 0, 0, 0, 'a', 4, 0, 0, 0, 0, 0, 0, 'a'}
	want = append(want, 3, 1, 0, 1, 0, 2, 0, 3, 0, 4)
	want = append(want, 2, 0, 0, 2, 0, 0, 0, 16, 0xc0, 0xa1, 0xe5, 0xce)
	if got := s.sent.Bytes(); !bytes.Equal(got, want) {
		t.Fatalf("the client sent %v, want %v", got, want)
	}
}

// Screen draws the update's rectangles; Sync reads one update.
func TestRFBScreen(t *testing.T) {
	t.Parallel()
	upd := append([]byte{0, 0, 0, 2}, raw(0, 0, 2, 2, 0xff00ff)...)
	upd = append(upd, raw(2, 1, 2, 1, 0x010203)...)
	s := newScript(serverHello(4, 2), upd, append([]byte{0, 0, 0, 1}, raw(0, 0, 1, 1, 0)...))
	c, err := testkit.NewRFB(s, true)
	if err != nil {
		t.Fatal(err)
	}
	img, err := c.Screen()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct {
		x, y int
		want [3]byte
	}{{0, 0, [3]byte{255, 0, 255}}, {1, 1, [3]byte{255, 0, 255}}, {3, 1, [3]byte{1, 2, 3}}, {3, 0, [3]byte{}}} {
		if got := testkit.RGBAt(img, p.x, p.y); got != p.want {
			t.Errorf("(%d,%d): %v, want %v", p.x, p.y, got, p.want)
		}
	}
	if err := c.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ReadUpdate(nil); err == nil {
		t.Error("an update read past the end of the stream")
	}
}

// A server that is not one, or says what the client does not take, is
// an error, not a hang or a panic.
func TestRFBBadServer(t *testing.T) {
	t.Parallel()
	hello := serverHello(4, 2)
	for _, c := range []struct {
		name   string
		server []byte
		want   string
	}{
		{"not RFB", []byte("HTTP/1.1 400"), "ProtocolVersion"},
		{"no None", append([]byte("RFB 003.008\n"), 1, 2), "security types"},
		{"refused", append([]byte("RFB 003.008\n"), 1, 1, 0, 0, 0, 1), "security result"},
		{"short", hello[:20], "read"},
		{"colour map", append(hello, 1, 0, 0, 0, 0, 0), "server message type 1"},
		{"hextile", append(append(hello, 0, 0, 0, 1), rect(0, 0, 1, 1, 5)...), "encoding 5"},
		{"huge cut text", append(hello, 3, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff), "ServerCutText"},
		{"cut text of MinInt32", append(hello, 3, 0, 0, 0, 0x80, 0, 0, 0), "ServerCutText"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r, err := testkit.NewRFB(newScript(c.server), true)
			if err == nil {
				_, err = r.ReadUpdate(nil)
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error of %q", err, c.want)
			}
		})
	}
}

// A server that sends a ServerCutText, then a framebuffer of two
// rectangles: RFB.Pixel finds the one the pixel is in.
func TestRFBDial(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	shared := make(chan byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 64)
		c.Write([]byte("RFB 003.008\n"))
		io.ReadFull(c, buf[:12])
		c.Write([]byte{2, 2, 1}) // VNC auth, None
		io.ReadFull(c, buf[:1])
		c.Write([]byte{0, 0, 0, 0})
		io.ReadFull(c, buf[:1])
		shared <- buf[0]
		c.Write(serverHello(4, 2)[12+3+4:])
		io.ReadFull(c, buf[:20+8+10]) // SetPixelFormat, SetEncodings, the request
		msg := []byte{3, 0, 0, 0, 0, 0, 0, 2, 'h', 'i', 0, 0, 0, 2}
		msg = append(msg, raw(0, 0, 2, 2, 0xff)...)
		msg = append(msg, raw(2, 0, 2, 2, 0x010203)...)
		c.Write(msg)
		io.ReadFull(c, buf[:1])
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	p, _ := strconv.Atoi(port)
	c, err := testkit.DialRFB(p)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.W != 4 || c.H != 2 || <-shared != 1 {
		t.Fatalf("size %dx%d", c.W, c.H)
	}
	px, err := c.Pixel(3, 1)
	if err != nil || px != [3]byte{1, 2, 3} {
		t.Fatalf("pixel (3,1): %v, %v; want [1 2 3]", px, err)
	}
}

// Over a websocket: the server's messages split anywhere read as one
// stream, and each client Write is one message.
func TestRFBOverWebsocket(t *testing.T) {
	t.Parallel()
	got := make(chan []byte, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		hello := serverHello(4, 2)
		for _, part := range [][]byte{hello[:5], hello[5:13], hello[13:]} {
			ws.WriteMessage(websocket.BinaryMessage, part)
		}
		var msgs []byte
		for range 5 { // version, security, ClientInit, SetPixelFormat, SetEncodings
			_, m, err := ws.ReadMessage()
			if err != nil {
				return
			}
			msgs = append(msgs, byte(len(m)))
		}
		got <- msgs
		ws.ReadMessage() // the request
		ws.WriteMessage(websocket.BinaryMessage, append([]byte{0, 0, 0, 1}, raw(0, 0, 4, 2, 0x0a0b0c)...))
		ws.ReadMessage()
	}))
	defer srv.Close()
	ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	c, err := testkit.NewRFB(testkit.NewWSStream(ws), true)
	if err != nil {
		t.Fatal(err)
	}
	if m := <-got; !bytes.Equal(m, []byte{12, 1, 1, 20, 8}) {
		t.Errorf("client messages of %v bytes, want 12 1 1 20 8", m)
	}
	if px, err := c.Pixel(1, 1); err != nil || px != [3]byte{10, 11, 12} {
		t.Fatalf("pixel (1,1): %v, %v; want [10 11 12]", px, err)
	}
}

// Whatever a server sends after the handshake, ReadUpdate returns.
func FuzzRFBUpdate(f *testing.F) {
	f.Add(append([]byte{2, 3, 0, 0, 0, 0, 0, 0, 1, 'x', 0, 0, 0, 1}, raw(0, 0, 1, 1, 0xffffff)...))
	f.Add(append(append([]byte{0, 0, 0, 2}, rect(0, 0, 9, 9, 16)...), 0, 0, 0, 1, 0))
	f.Add(append([]byte{0, 0, 0xff, 0xff}, rect(0, 0, 0, 0, -224)...))
	f.Add([]byte{3, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 'a'})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := testkit.NewRFB(newScript(serverHello(4, 2), b), true)
		if err != nil {
			t.Fatal(err)
		}
		img := image.NewRGBA(image.Rect(0, 0, 4, 2))
		for range 4 {
			if _, err := c.ReadUpdate(img); err != nil {
				return
			}
		}
	})
}
