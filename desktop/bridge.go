package desktop

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"froog.tech/froog/desktop/rfb"
)

// Websocket close codes the page turns into error pages; the close
// reason is the Code.
const (
	websocketGoingAway      = websocket.CloseGoingAway
	closeSandboxStopped     = 4001
	closeDesktopFailed      = 4002
	closeRefused            = 4003
	closeNoSession          = 4004
	maxClientMessage        = 1 << 20 // a websocket message from the viewer (clipboard text is the largest)
	writeWait               = 10 * time.Second
	vncReadBuffer           = 64 << 10
	websocketBufferSize     = 32 << 10
	readDeadlinePingPeriods = 3 // no frame nor pong for this many pings: the viewer is gone
)

var upgrader = websocket.Upgrader{
	ReadBufferSize:    websocketBufferSize,
	WriteBufferSize:   websocketBufferSize,
	EnableCompression: false, // frames are already compressed (Tight, ZRLE) and deflate costs CPU per viewer
	Subprotocols:      []string{"binary"},
	CheckOrigin:       sameOrigin,
}

// bridge is one viewer's websocket joined to its own VNC connection.
type bridge struct {
	s        *Server
	view     View
	viewOnly bool
	profile  string // the browser view's profile, from the link
	run      int64  // the session's run: the bridge ends when the sandbox's changes
	ws       *websocket.Conn
	cancel   context.CancelFunc

	once      sync.Once
	reason    string // why it ended, for the log
	in, out   atomic.Int64
	vncMu     sync.Mutex
	vnc       net.Conn
	startedAt time.Time
}

// websocket serves a viewer's websocket with serve: the VNC bridge
// (upgrader) or the fast stream (streamUpgrader, serveSelkies). Both check
// the session the same way and take their bridge's settings from it.
func (s *Server) websocket(w http.ResponseWriter, r *http.Request, v View, up *websocket.Upgrader, serve func(*bridge, context.Context)) {
	if !websocket.IsWebSocketUpgrade(r) {
		http.Error(w, "websocket only", http.StatusBadRequest)
		return
	}
	if !sameOrigin(r) {
		s.writeRefusal(w, r, v, refuse(CodeNoSession, errors.New("websocket from another origin")))
		return
	}
	sess, err := s.cookieSession(r, v)
	if err != nil {
		s.writeRefusal(w, r, v, err)
		return
	}
	ws, err := up.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader answered
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	b := &bridge{s: s, view: v, viewOnly: sess.ViewOnly || r.URL.Query().Get("viewonly") == "1",
		profile: sess.Profile, run: sess.Run, ws: ws, cancel: cancel, startedAt: time.Now()}
	if !s.track(b) {
		b.stop(websocketGoingAway, "edge shutting down")
		return
	}
	defer s.untrack(b)
	serve(b, ctx)
}

// serve starts the desktop, dials it and copies both ways until one side
// ends, the sandbox stops or the Server closes.
func (b *bridge) serve(ctx context.Context) {
	defer b.cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); b.watch(ctx) }()
	defer wg.Wait()

	vnc, err := b.dial(ctx)
	if err != nil {
		b.s.log.Info("desktop failed", "sandbox", b.view.ID, "kind", b.view.Kind, "err", err.Error())
		b.stop(closeDesktopFailed, CodeDesktopFailed)
		return
	}
	b.vncMu.Lock()
	b.vnc = vnc
	stopped := ctx.Err() != nil
	b.vncMu.Unlock()
	if stopped {
		vnc.Close()
		return
	}
	b.readFrom(maxClientMessage)
	f := rfb.NewFilter(b.viewOnly)
	wg.Add(1)
	go func() { defer wg.Done(); b.toViewer(vnc, f.Server()) }()
	b.toVNC(vnc, f)
	wg.Wait()
	b.s.log.Info("desktop closed", "sandbox", b.view.ID, "kind", b.view.Kind, "view_only", b.viewOnly,
		"reason", b.reason, "bytes_in", b.in.Load(), "bytes_out", b.out.Load(), "duration", time.Since(b.startedAt).Round(time.Millisecond).String())
}

// readFrom limits the viewer's messages to limit bytes and sets its read
// deadline, which every pong moves on: a viewer that answers no ping for
// readDeadlinePingPeriods is gone.
func (b *bridge) readFrom(limit int64) {
	b.ws.SetReadLimit(limit)
	b.ws.SetReadDeadline(time.Now().Add(readDeadlinePingPeriods * b.s.o.PingEvery))
	b.ws.SetPongHandler(func(string) error {
		return b.ws.SetReadDeadline(time.Now().Add(readDeadlinePingPeriods * b.s.o.PingEvery))
	})
}

func (b *bridge) dial(ctx context.Context) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, b.s.o.StartTimeout)
	defer cancel()
	port, err := b.s.o.Starter.StartDesktop(ctx, b.view.ID, b.view.Kind, b.profile)
	if err != nil {
		return nil, fmt.Errorf("start %s of sandbox %s: %w", b.view.Kind, b.view.ID, err)
	}
	c, err := b.s.o.Dialer.DialContext(ctx, b.view.ID, port)
	if err != nil {
		return nil, fmt.Errorf("dial sandbox %s port %d: %w", b.view.ID, port, err)
	}
	return c, nil
}

// toVNC reads the viewer's messages, filters them and writes what may go
// to the VNC server.
func (b *bridge) toVNC(vnc net.Conn, f *rfb.Filter) {
	var out []byte
	for {
		mt, data, err := b.ws.ReadMessage()
		if err != nil {
			b.stop(websocket.CloseNormalClosure, "viewer left")
			return
		}
		b.ws.SetReadDeadline(time.Now().Add(readDeadlinePingPeriods * b.s.o.PingEvery))
		if mt != websocket.BinaryMessage {
			b.stop(closeRefused, CodeRefused)
			return
		}
		b.in.Add(int64(len(data)))
		out, err = f.Feed(out[:0], data)
		if len(out) > 0 {
			if _, werr := vnc.Write(out); werr != nil {
				b.stop(closeDesktopFailed, CodeDesktopFailed)
				return
			}
		}
		if err != nil {
			b.s.log.Info("desktop viewer refused", "sandbox", b.view.ID, "kind", b.view.Kind, "err", err.Error())
			b.stop(closeRefused, CodeRefused)
			return
		}
	}
}

// toViewer copies the VNC server's stream to the viewer as binary frames;
// sf, for a view-only viewer, takes the server's clipboard out of it.
func (b *bridge) toViewer(vnc net.Conn, sf *rfb.ServerFilter) {
	buf := make([]byte, vncReadBuffer)
	var out []byte
	for {
		n, err := vnc.Read(buf)
		msg := buf[:n]
		if sf != nil && n > 0 {
			var ferr error
			if out, ferr = sf.Feed(out[:0], msg); ferr != nil {
				b.s.log.Info("desktop server refused", "sandbox", b.view.ID, "kind", b.view.Kind, "err", ferr.Error())
				b.stop(closeDesktopFailed, CodeDesktopFailed)
				return
			}
			msg = out
		}
		if len(msg) > 0 {
			b.ws.SetWriteDeadline(time.Now().Add(writeWait * 6))
			if werr := b.ws.WriteMessage(websocket.BinaryMessage, msg); werr != nil {
				b.stop(websocket.CloseGoingAway, "viewer write failed")
				return
			}
			b.out.Add(int64(len(msg)))
		}
		if err != nil {
			b.stop(closeDesktopFailed, CodeDesktopFailed)
			return
		}
	}
}

// watch pings the viewer and ends the bridge when the sandbox stops.
func (b *bridge) watch(ctx context.Context) {
	ping := time.NewTicker(b.s.o.PingEvery)
	defer ping.Stop()
	check := time.NewTicker(b.s.o.CheckEvery)
	defer check.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ping.C:
			if err := b.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(writeWait)); err != nil {
				b.stop(websocket.CloseGoingAway, "ping failed")
				return
			}
		case <-check.C:
			since, ok := b.s.o.Sandboxes.Running(b.view.ID)
			if !ok || since.UnixMicro() != b.run {
				b.stop(closeSandboxStopped, CodeSandboxStopped)
				return
			}
		}
	}
}

// stop ends the bridge once: a close frame with code and reason to the
// viewer, then both connections closed.
func (b *bridge) stop(code int, reason string) {
	b.once.Do(func() {
		b.reason = reason
		b.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), time.Now().Add(time.Second))
		b.cancel()
		b.ws.Close()
		b.vncMu.Lock()
		if b.vnc != nil {
			b.vnc.Close()
		}
		b.vncMu.Unlock()
	})
}
