package desktop

// Sound: a side channel next to the screen, whichever transport shows it
// (VNC or the fast stream). The page opens the /audio websocket only when
// its viewer unmutes (browsers' autoplay rules want a click anyway); the
// session is checked as for the screen, and a view-only session may
// listen (sound goes down only, and nothing a listener sends goes up).
//
// Inside the sandbox froog-desktop runs a PulseAudio server per screen
// and a sound server on 127.0.0.1 that encodes the screen's sound to Opus
// for as long as a connection is open (guest/sound.go). The edge keeps
// one such connection per screen and run while anyone listens — a
// soundHub — and fans its packets out to every listener: the sandbox
// encodes once however many listen, and nothing while nobody does.
//
// From the sandbox: the line "FROOG-SOUND 1 opus 48000 2\n", then per
// 20 ms Opus packet its length (u16 BE) and the packet. To the page: one
// binary message per packet, [0x01, 0x00, packet] — the framing of
// Selkies' audio messages (desktop/selkies.go), so that one decoder reads
// both. Selkies' own audio stays off (guest/selkies.go): one encoder per
// screen, the same sound on either transport, and switching transport
// does not interrupt it.

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// PathAudio is the sound's websocket on a view host.
const PathAudio = "/audio"

// Close codes of the sound's websocket; the reason is the code's name.
const (
	closeNoSound     = 4007 // the screen has no sound, or it could not be reached: "no_sound"
	closeSoundEnded  = 4008 // the sandbox's sound server closed the stream: "sound_ended"
	reasonNoSound    = "no_sound"
	reasonSoundEnded = "sound_ended"
)

const (
	// soundHeader is the sound server's first line (guest.SoundHeader).
	soundHeader = "FROOG-SOUND 1 opus 48000 2\n"
	// soundQueue is how many packets (20 ms each) a listener may fall
	// behind before it misses some: a slow listener loses sound, the
	// others and the sandbox do not wait for it.
	soundQueue = 16
	// soundSilence is how long the sound server may send nothing: it
	// sends a packet every 20 ms, silence included.
	soundSilence = 10 * time.Second
	// maxListenerMessage bounds what a listener may send (it has nothing
	// to say; a close frame, pongs).
	maxListenerMessage = 512
)

// ErrNoSound is StartSound's answer for a screen without sound (no
// PulseAudio or ffmpeg in the sandbox).
var ErrNoSound = errors.New("the desktop has no sound")

// SoundStarter is a Starter that also says where a screen's sound server
// listens inside the sandbox (starting the screen if need be). A Starter
// that is not one offers no sound.
type SoundStarter interface {
	StartSound(ctx context.Context, sandboxID, kind, profile string) (port int, err error)
}

// audioUpgrader is the listener's side: no compression (Opus does not
// shrink), no subprotocol.
var audioUpgrader = websocket.Upgrader{
	ReadBufferSize:    1024,
	WriteBufferSize:   4096,
	EnableCompression: false,
	CheckOrigin:       sameOrigin,
}

type soundKey struct {
	sandboxID, kind string
	run             int64
}

// soundHub is one screen's sound while anyone listens: one connection to
// the sandbox's sound server, its packets fanned out to every listener.
type soundHub struct {
	key     soundKey
	profile string
	cancel  context.CancelFunc

	mu        sync.Mutex
	listeners map[*bridge]chan []byte
	connected bool // the sound server answered

	packets, dropped atomic.Int64
}

// joinSound adds b to its screen's hub, starting the hub for the first
// listener; ch gets the listener's messages.
func (s *Server) joinSound(b *bridge) (h *soundHub, ch chan []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := soundKey{b.view.ID, b.view.Kind, b.run}
	h = s.hubs[k]
	if h == nil {
		ctx, cancel := context.WithCancel(context.Background())
		h = &soundHub{key: k, profile: b.profile, cancel: cancel, listeners: map[*bridge]chan []byte{}}
		s.hubs[k] = h
		go h.run(ctx, s)
	}
	ch = make(chan []byte, soundQueue)
	h.mu.Lock()
	h.listeners[b] = ch
	h.mu.Unlock()
	return h, ch
}

// leaveSound removes b from its hub; the last listener out ends the
// hub's connection, and with it the sandbox's encoder.
func (s *Server) leaveSound(h *soundHub, b *bridge) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h.mu.Lock()
	delete(h.listeners, b)
	n := len(h.listeners)
	h.mu.Unlock()
	if n == 0 {
		if s.hubs[h.key] == h {
			delete(s.hubs, h.key)
		}
		h.cancel()
	}
}

// SoundListeners is the number of listeners of every screen, and
// SoundStreams the number of connections to sandboxes' sound servers
// that serve them (one per screen listened to).
func (s *Server) SoundListeners() (listeners, streams int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range s.hubs {
		h.mu.Lock()
		listeners += len(h.listeners)
		h.mu.Unlock()
	}
	return listeners, len(s.hubs)
}

// run streams the screen's sound to the hub's listeners until the last
// one leaves (ctx) or the stream fails; then it stops whoever is left.
func (h *soundHub) run(ctx context.Context, s *Server) {
	began := time.Now()
	err := h.stream(ctx, s)
	s.mu.Lock()
	if s.hubs[h.key] == h {
		delete(s.hubs, h.key)
	}
	s.mu.Unlock()
	h.mu.Lock()
	left := make([]*bridge, 0, len(h.listeners))
	for b := range h.listeners {
		left = append(left, b)
	}
	connected := h.connected
	h.mu.Unlock()
	code, reason := closeSoundEnded, reasonSoundEnded
	if !connected {
		code, reason = closeNoSound, reasonNoSound
	}
	// The log says why before the listeners hear it: whoever reads it on
	// a close finds the reason there.
	s.log.Info("desktop sound stream closed", "sandbox", h.key.sandboxID, "kind", h.key.kind, "packets", h.packets.Load(),
		"dropped", h.dropped.Load(), "duration", time.Since(began).Round(time.Millisecond).String(), "err", fmt.Sprint(err))
	for _, b := range left {
		b.stop(code, reason)
	}
}

// stream connects to the screen's sound server and fans its packets out
// until ctx ends or the connection fails.
func (h *soundHub) stream(ctx context.Context, s *Server) error {
	ss, ok := s.o.Starter.(SoundStarter)
	if !ok {
		return ErrNoSound
	}
	sctx, cancel := context.WithTimeout(ctx, s.o.StartTimeout)
	defer cancel()
	port, err := ss.StartSound(sctx, h.key.sandboxID, h.key.kind, h.profile)
	if err != nil {
		return fmt.Errorf("start the sound of %s of sandbox %s: %w", h.key.kind, h.key.sandboxID, err)
	}
	c, err := s.o.Dialer.DialContext(sctx, h.key.sandboxID, port)
	if err != nil {
		// Its screen may have been started again elsewhere: ask afresh
		// next time.
		if f, ok := ss.(interface{ Forget(sandboxID, kind string) }); ok {
			f.Forget(h.key.sandboxID, h.key.kind)
		}
		return fmt.Errorf("dial sandbox %s port %d: %w", h.key.sandboxID, port, err)
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	r := bufio.NewReaderSize(c, 8192)
	c.SetReadDeadline(time.Now().Add(s.o.StartTimeout))
	line, err := r.ReadString('\n')
	if err != nil || line != soundHeader {
		return fmt.Errorf("sound server of sandbox %s said %q: %v", h.key.sandboxID, firstLine(line), err)
	}
	h.mu.Lock()
	h.connected = true
	h.mu.Unlock()
	var n [2]byte
	// The encoder's first packet may take a while (ffmpeg starting on a
	// busy or emulated machine: over 10 s under TCG); then one comes
	// every 20 ms.
	c.SetReadDeadline(time.Now().Add(s.o.StartTimeout))
	for first := true; ; first = false {
		if !first {
			c.SetReadDeadline(time.Now().Add(soundSilence))
		}
		if _, err := io.ReadFull(r, n[:]); err != nil {
			return err
		}
		msg := make([]byte, 2+int(binary.BigEndian.Uint16(n[:])))
		msg[0] = 0x01 // Selkies' audio message; msg[1] is 0
		if _, err := io.ReadFull(r, msg[2:]); err != nil {
			return err
		}
		h.packets.Add(1)
		h.mu.Lock()
		for _, ch := range h.listeners {
			select {
			case ch <- msg:
			default:
				h.dropped.Add(1)
			}
		}
		h.mu.Unlock()
	}
}

// serveAudio is one listener: it joins its screen's hub and writes the
// hub's packets to the page until the page leaves, the sandbox stops or
// the sound ends.
func (b *bridge) serveAudio(ctx context.Context) {
	defer b.cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); b.watch(ctx) }()
	defer wg.Wait()

	h, ch := b.s.joinSound(b)
	defer b.s.leaveSound(h, b)
	b.readFrom(maxListenerMessage)
	wg.Add(1)
	go func() { // a listener says nothing that goes anywhere: read for its close and pongs
		defer wg.Done()
		for {
			if _, _, err := b.ws.ReadMessage(); err != nil {
				b.stop(websocket.CloseNormalClosure, "listener left")
				return
			}
			b.ws.SetReadDeadline(time.Now().Add(readDeadlinePingPeriods * b.s.o.PingEvery))
		}
	}()
	for {
		select {
		case <-ctx.Done():
			b.s.log.Info("desktop sound closed", "sandbox", b.view.ID, "kind", b.view.Kind, "view_only", b.viewOnly,
				"reason", b.reason, "bytes_out", b.out.Load(), "duration", time.Since(b.startedAt).Round(time.Millisecond).String())
			return
		case m := <-ch:
			b.ws.SetWriteDeadline(time.Now().Add(writeWait))
			if err := b.ws.WriteMessage(websocket.BinaryMessage, m); err != nil {
				b.stop(websocket.CloseGoingAway, "listener write failed")
				continue
			}
			b.out.Add(int64(len(m)))
		}
	}
}
