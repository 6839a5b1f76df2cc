package desktop

import (
	"crypto/tls"
	"encoding/binary"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"froog.tech/froog/internal/wait"
)

// fakeSoundServer stands in for froog-desktop's sound server: after the
// header it sends, without packets, a 4-byte packet every 5 ms holding
// its sequence number (not Opus: the edge does not look inside); with
// them, packets over and over, one every 20 ms (as real Opus would come).
// It goes on until the connection closes, or until end is closed.
type fakeSoundServer struct {
	ln      net.Listener
	end     chan struct{}
	packets [][]byte

	mu             sync.Mutex
	accepted, open int
}

func newFakeSoundServer(t *testing.T, packets [][]byte) *fakeSoundServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeSoundServer{ln: ln, end: make(chan struct{}), packets: packets}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go f.serve(c)
		}
	}()
	return f
}

func (f *fakeSoundServer) port() int { return f.ln.Addr().(*net.TCPAddr).Port }

func (f *fakeSoundServer) conns() (accepted, open int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.accepted, f.open
}

func (f *fakeSoundServer) serve(c net.Conn) {
	f.mu.Lock()
	f.accepted++
	f.open++
	f.mu.Unlock()
	defer func() { f.mu.Lock(); f.open--; f.mu.Unlock(); c.Close() }()
	if _, err := c.Write([]byte(soundHeader)); err != nil {
		return
	}
	every := 5 * time.Millisecond
	if f.packets != nil {
		every = 20 * time.Millisecond
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for seq := uint32(0); ; seq++ {
		select {
		case <-f.end:
			return
		case <-t.C:
		}
		p := binary.BigEndian.AppendUint32(nil, seq)
		if f.packets != nil {
			p = f.packets[int(seq)%len(f.packets)]
		}
		c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(p))), p...)); err != nil {
			return
		}
	}
}

// dialAudio opens the sound's websocket with a cookie, as the page does.
func (h *harness) dialAudio(cookie *http.Cookie) (*websocket.Conn, *http.Response, error) {
	d := websocket.Dialer{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, HandshakeTimeout: 5 * time.Second}
	hdr := http.Header{"Origin": {h.ts.URL}}
	if cookie != nil {
		hdr.Set("Cookie", cookie.Name+"="+cookie.Value)
	}
	return d.Dial("wss://"+h.host()+PathAudio, hdr)
}

// packetSeq reads a sound message and returns the fake's sequence number
// in it.
func packetSeq(t *testing.T, ws *websocket.Conn) uint32 {
	t.Helper()
	ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	mt, m, err := ws.ReadMessage()
	if err != nil || mt != websocket.BinaryMessage || len(m) != 6 || m[0] != 0x01 || m[1] != 0 {
		t.Fatalf("sound message %v %x, %v; want binary [1 0 seq]", mt, m, err)
	}
	return binary.BigEndian.Uint32(m[2:])
}

// Listeners of one screen, one with input and one view-only, share one
// connection to the sandbox's sound server and get the same packets; it
// is opened by the first and closed after the last has left.
func TestSoundFanOut(t *testing.T) {
	t.Parallel()
	snd := newFakeSoundServer(t, nil)
	h := newHarness(t, viewA, 1)
	h.starter.audio = snd.port()
	_, full := h.exchange(h.link(false), false)
	_, watcher := h.exchange(h.link(true), false)
	if a, _ := snd.conns(); a != 0 {
		t.Fatalf("%d connections to the sound server before anyone listens", a)
	}
	a, _, err := h.dialAudio(full)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	first := packetSeq(t, a)
	// a is read while b joins: a listener that reads nothing (not even a
	// ping) for three ping periods, 3 s here, is taken for gone, and b's
	// join took longer than that on a loaded machine.
	fromA, done := make(chan uint32, 4*soundQueue), make(chan struct{})
	defer close(done)
	go func() {
		defer close(fromA)
		for {
			a.SetReadDeadline(time.Now().Add(30 * time.Second))
			mt, m, err := a.ReadMessage()
			if err != nil || mt != websocket.BinaryMessage || len(m) != 6 {
				return
			}
			select {
			case fromA <- binary.BigEndian.Uint32(m[2:]):
			case <-done:
				return
			}
		}
	}()
	nextA := func() uint32 {
		t.Helper()
		seq, ok := <-fromA
		if !ok {
			t.Fatal("listener a's stream ended")
		}
		return seq
	}
	b, _, err := h.dialAudio(watcher)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	// b joins the stream where it is: its first packet is one a gets.
	fromB := packetSeq(t, b)
	for seq := nextA(); seq != fromB; seq = nextA() {
		if seq > fromB {
			t.Fatalf("listener a got %d after %d and never %d, b's first", seq, first, fromB)
		}
	}
	for range 20 {
		if sa, sb := nextA(), packetSeq(t, b); sa != sb {
			t.Fatalf("listeners got packets %d and %d, want the same", sa, sb)
		}
	}
	if acc, open := snd.conns(); acc != 1 || open != 1 {
		t.Fatalf("sound server: %d connections, %d open; want 1, 1", acc, open)
	}
	if l, s := h.srv.SoundListeners(); l != 2 || s != 1 {
		t.Fatalf("SoundListeners: %d, %d; want 2, 1", l, s)
	}
	// Sending is refused by nobody and goes nowhere.
	b.WriteMessage(websocket.TextMessage, []byte("hello"))
	a.Close()
	packetSeq(t, b)
	b.Close()
	wait.For(t, 5*time.Second, "the sound server's connection to close with the last listener", func() bool {
		_, open := snd.conns()
		return open == 0
	})
	if l, s := h.srv.SoundListeners(); l != 0 || s != 0 {
		t.Fatalf("SoundListeners after all left: %d, %d", l, s)
	}
}

func TestSoundRefusals(t *testing.T) {
	t.Parallel()
	t.Run("no session", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, viewA, 1)
		h.starter.audio = newFakeSoundServer(t, nil).port()
		if _, res, err := h.dialAudio(nil); err == nil || res == nil || res.StatusCode != http.StatusForbidden {
			t.Fatalf("without a session: %v, %v; want 403", res, err)
		}
	})
	t.Run("no sound in the sandbox", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, viewA, 1) // starter.audio 0: ErrNoSound
		_, c := h.exchange(h.link(false), false)
		ws, _, err := h.dialAudio(c)
		if err != nil {
			t.Fatal(err)
		}
		defer ws.Close()
		if code, reason := closeOf(t, ws); code != closeNoSound || reason != reasonNoSound {
			t.Fatalf("close %d %q, want %d %q", code, reason, closeNoSound, reasonNoSound)
		}
		if !strings.Contains(h.logs.String(), "the desktop has no sound") {
			t.Errorf("the log does not say why: %s", h.logs.String())
		}
	})
	t.Run("the sound server ends", func(t *testing.T) {
		t.Parallel()
		snd := newFakeSoundServer(t, nil)
		h := newHarness(t, viewA, 1)
		h.starter.audio = snd.port()
		_, c := h.exchange(h.link(true), false)
		ws, _, err := h.dialAudio(c)
		if err != nil {
			t.Fatal(err)
		}
		defer ws.Close()
		packetSeq(t, ws)
		close(snd.end)
		if code, reason := closeOf(t, ws); code != closeSoundEnded || reason != reasonSoundEnded {
			t.Fatalf("close %d %q, want %d %q", code, reason, closeSoundEnded, reasonSoundEnded)
		}
	})
	t.Run("the sandbox stops", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, viewA, 1)
		h.starter.audio = newFakeSoundServer(t, nil).port()
		_, c := h.exchange(h.link(false), false)
		ws, _, err := h.dialAudio(c)
		if err != nil {
			t.Fatal(err)
		}
		defer ws.Close()
		packetSeq(t, ws)
		h.sandboxes.set(sbxA, time.Time{}, false)
		if code, reason := closeOf(t, ws); code != closeSandboxStopped || reason != CodeSandboxStopped {
			t.Fatalf("close %d %q, want %d %q", code, reason, closeSandboxStopped, CodeSandboxStopped)
		}
	})
}
