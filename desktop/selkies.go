package desktop

// The fast stream: Selkies (github.com/selkies-project/selkies) inside
// the sandbox encodes the screen (H.264, or JPEG stripes) and serves it
// over one websocket; the edge carries that websocket to the viewer page
// on the view host, next to the VNC bridge, which stays the fallback.
//
// Pinned: Selkies at commit 3a0bc7af4b3c0b6270bd1173f8f20c41348d17ea
// (2026-08-21, 615 commits after v1.6.2, the main branch's "2.x"
// websockets mode). What was read, and what this file relies on:
//
//   - src/selkies/stream_server.py: one aiohttp server on --addr/--port
//     (default 0.0.0.0:8080; froog-desktop binds 127.0.0.1); with
//     --master-token (or SELKIES_MASTER_TOKEN) set, POST /api/tokens needs
//     "Authorization: Bearer MASTER" and nothing else; --enable-basic-auth
//     is on by default and refuses to start without a password, so
//     froog-desktop turns it off (the master token is the gate). A
//     websocket upgrade with no Origin header passes its origin check.
//   - src/selkies/selkies.py, register_routes/handle_tokens/
//     data_ws_handler/ws_handler: GET /api/websockets?token=T is the
//     stream; in secure mode T must be a key of the table last POSTed to
//     /api/tokens — a full replacement, {"T": {"role": "controller" or
//     "viewer", "slot": null}} — or the socket is closed with 4001, and
//     before the first POST every connection waits (its "config gate"),
//     which is why the edge POSTs the table before every connection: a
//     restarted Selkies has forgotten it. A viewer may send only
//     SETTINGS, START_VIDEO, STOP_VIDEO, REQUEST_KEYFRAME and js,
//     (VIEWER_ALLOWED_PREFIXES in input_handler.py). The server opens
//     with text "AUTH_SUCCESS,{role,slot}", "MODE websockets" and JSON
//     (server_settings, stream_resolution, cursor, stats).
//   - Binary server→client frames (selkies.py VideoRelay, and the web
//     client addons/selkies-web-core/selkies-ws-core.js, which decodes
//     them): 0x01 audio (Opus, a 2-byte header); 0x03 a JPEG stripe,
//     header [0x03, 0, frame id u16 BE, stripe y u16 BE] then the JPEG;
//     0x04 H.264, header [0x04, type (0x01 keyframe), frame id u16 BE,
//     stripe y u16 BE, width u16 BE, height u16 BE] then Annex B; 0x05 a
//     gzip'd text message (only to clients that sent "_gz,1").
//   - Client→server text: kd,KEYSYM and ku,KEYSYM; m,X,Y,MASK,SCROLL and
//     m2 (relative); cw,BASE64 (clipboard); SETTINGS,JSON (the first
//     message: displayId, encoder, framerate, …); CLIENT_FRAME_ACK ID;
//     REQUEST_KEYFRAME; START_VIDEO/STOP_VIDEO. Binary: 0x02 microphone,
//     0x05 gzip'd text. FilterSelkies (selkiesfilter.go) is the edge's
//     allowlist for view-only sessions.
//
// The browser never holds a Selkies secret: the edge terminates the
// viewer's session (the __Host- cookie), derives the sandbox's master
// token (SelkiesMaster), has froog-desktop hand it to Selkies when the
// desktop starts (over the SSH session's stdin), provisions two tokens
// with it — one controller, one viewer — and dials /api/websockets with
// the one the session's role allows.

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// PathStream is the websocket of the fast stream on a view host (query:
// viewonly=1), carried to Selkies' /api/websockets.
const PathStream = "/stream"

// Close codes of the stream's websocket that tell the page to use VNC
// instead; the reason is the code's name.
const (
	closeNoStream     = 4005 // Selkies is not installed, or did not answer: "no_stream"
	closeStreamEnded  = 4006 // Selkies closed the stream: "stream_ended"
	reasonNoStream    = "no_stream"
	reasonStreamEnded = "stream_ended"

	// maxSelkiesMessage bounds one message from Selkies (its own hard
	// cap on any frame it sends, WS_MESSAGE_SIZE_HARD_CAP).
	maxSelkiesMessage = 32 << 20
)

// Stream is where a started desktop listens inside its sandbox.
type Stream struct {
	VNCPort int
	// SelkiesPort is Selkies' port on 127.0.0.1, or 0 where Selkies is
	// not installed (the desktop is VNC only).
	SelkiesPort int
	// AudioPort is the screen's sound server on 127.0.0.1 (sound.go), or
	// 0 where it has no sound.
	AudioPort int
}

// StreamStarter is a Starter that also starts Selkies where it is
// installed, handing it masterToken (SelkiesMaster) as its master token.
// A Starter that is not one offers VNC only.
type StreamStarter interface {
	Starter
	StartStream(ctx context.Context, sandboxID, kind, profile, masterToken string) (Stream, error)
}

// SelkiesMaster is the master token of a sandbox's Selkies for one kind
// of view: derived from the edge's session key, so that every edge knows
// it and nothing needs to store it, and different for every sandbox (a
// fork's is not its source's). The edge hands it to froog-desktop over
// stdin; it is never in a log, an argv, a URL or an answer to a browser.
func SelkiesMaster(key []byte, sandboxID, kind string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("froog selkies master v1\x00" + sandboxID + "\x00" + kind))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// selkiesTokens are the per-viewer tokens the edge provisions with the
// master token: one for sessions with input (Selkies' controller role),
// one for view-only sessions (its viewer role).
func selkiesTokens(master string) (controller, viewer string) {
	tok := func(role string) string {
		m := hmac.New(sha256.New, []byte(master))
		m.Write([]byte("froog selkies token v1\x00" + role))
		return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:24])
	}
	return tok("controller"), tok("viewer")
}

// selkiesTokenTable is the body of POST /api/tokens: both tokens, with
// their roles, and no gamepad slot.
func selkiesTokenTable(master string) []byte {
	c, v := selkiesTokens(master)
	type perms struct {
		Role string `json:"role"`
		Slot *int   `json:"slot"`
	}
	b, _ := json.Marshal(map[string]perms{c: {Role: "controller"}, v: {Role: "viewer"}})
	return b
}

// streamUpgrader is the viewer side of the stream: no permessage-deflate
// (H.264 and JPEG do not shrink, and deflate costs CPU per viewer), no
// subprotocol.
var streamUpgrader = websocket.Upgrader{
	ReadBufferSize:    websocketBufferSize,
	WriteBufferSize:   websocketBufferSize,
	EnableCompression: false,
	CheckOrigin:       sameOrigin,
}

// serveSelkies starts the desktop with Selkies, dials it and relays both
// ways, message by message, until one side ends, the sandbox stops or the
// Server closes. Nothing is queued at the edge: a message is written to
// the other side before the next is read.
func (b *bridge) serveSelkies(ctx context.Context) {
	defer b.cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); b.watch(ctx) }()
	defer wg.Wait()

	up, err := b.dialSelkies(ctx)
	if err != nil {
		b.s.log.Info("desktop stream unavailable", "sandbox", b.view.ID, "kind", b.view.Kind, "err", err.Error())
		b.stop(closeNoStream, reasonNoStream)
		return
	}
	b.vncMu.Lock()
	b.vnc = up.NetConn()
	stopped := ctx.Err() != nil
	b.vncMu.Unlock()
	if stopped {
		up.Close()
		return
	}
	b.readFrom(maxClientMessage)
	up.SetReadLimit(maxSelkiesMessage)
	var dropped int64
	wg.Add(1)
	go func() { defer wg.Done(); b.fromSelkies(up) }()
	dropped = b.toSelkies(up)
	wg.Wait()
	b.s.log.Info("desktop stream closed", "sandbox", b.view.ID, "kind", b.view.Kind, "view_only", b.viewOnly,
		"reason", b.reason, "bytes_in", b.in.Load(), "bytes_out", b.out.Load(), "dropped", dropped,
		"duration", time.Since(b.startedAt).Round(time.Millisecond).String())
}

// dialSelkies starts the desktop with Selkies, provisions the tokens and
// opens Selkies' websocket with the token of the bridge's role.
func (b *bridge) dialSelkies(ctx context.Context) (*websocket.Conn, error) {
	ss, ok := b.s.o.Starter.(StreamStarter)
	if !ok {
		return nil, errors.New("the starter offers VNC only")
	}
	ctx, cancel := context.WithTimeout(ctx, b.s.o.StartTimeout)
	defer cancel()
	master := SelkiesMaster(b.s.o.Key, b.view.ID, b.view.Kind)
	st, err := ss.StartStream(ctx, b.view.ID, b.view.Kind, b.profile, master)
	if err != nil {
		return nil, fmt.Errorf("start %s of sandbox %s: %w", b.view.Kind, b.view.ID, err)
	}
	if st.SelkiesPort <= 0 || st.SelkiesPort > 65535 {
		return nil, errors.New("selkies is not installed in the sandbox")
	}
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		return b.s.o.Dialer.DialContext(ctx, b.view.ID, st.SelkiesPort)
	}
	// Selkies not answering may have moved (its desktop stopped and
	// started again): the starter asks the sandbox afresh next time.
	forget := func() {
		if f, ok := ss.(interface{ Forget(sandboxID, kind string) }); ok {
			f.Forget(b.view.ID, b.view.Kind)
		}
	}
	if err := provisionSelkies(ctx, dial, st.SelkiesPort, master); err != nil {
		forget()
		return nil, err
	}
	controller, viewer := selkiesTokens(master)
	tok := controller
	if b.viewOnly {
		tok = viewer
	}
	d := websocket.Dialer{NetDialContext: dial, HandshakeTimeout: 15 * time.Second, EnableCompression: false,
		ReadBufferSize: websocketBufferSize, WriteBufferSize: websocketBufferSize}
	u := "ws://127.0.0.1:" + strconv.Itoa(st.SelkiesPort) + "/api/websockets?token=" + url.QueryEscape(tok)
	up, res, err := d.DialContext(ctx, u, nil)
	if err != nil {
		forget()
		status := 0
		if res != nil {
			status = res.StatusCode
		}
		// gorilla's errors carry no URL, so no token.
		return nil, fmt.Errorf("selkies websocket (status %d): %w", status, err)
	}
	return up, nil
}

// provisionSelkies POSTs the token table to Selkies' /api/tokens with
// the master token. Selkies replaces its table with it (the same table
// every time: connected viewers keep their roles).
func provisionSelkies(ctx context.Context, dial func(context.Context, string, string) (net.Conn, error), port int, master string) error {
	c := &http.Client{Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://127.0.0.1:"+strconv.Itoa(port)+"/api/tokens", bytes.NewReader(selkiesTokenTable(master)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+master)
	res, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("selkies tokens: %w", err)
	}
	defer res.Body.Close()
	io.Copy(io.Discard, io.LimitReader(res.Body, 4096))
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("selkies tokens: status %d", res.StatusCode)
	}
	return nil
}

// toSelkies reads the viewer's messages, filters them (FilterSelkies) and
// writes what may go to Selkies. It returns how many it dropped.
func (b *bridge) toSelkies(up *websocket.Conn) (dropped int64) {
	for {
		mt, data, err := b.ws.ReadMessage()
		if err != nil {
			b.stop(websocket.CloseNormalClosure, "viewer left")
			return dropped
		}
		b.ws.SetReadDeadline(time.Now().Add(readDeadlinePingPeriods * b.s.o.PingEvery))
		b.in.Add(int64(len(data)))
		out, ok := FilterSelkies(b.viewOnly, mt, data)
		if !ok {
			dropped++
			continue
		}
		up.SetWriteDeadline(time.Now().Add(writeWait * 6))
		if err := up.WriteMessage(mt, out); err != nil {
			b.stop(closeStreamEnded, reasonStreamEnded)
			return dropped
		}
	}
}

// fromSelkies copies Selkies' messages to the viewer as they come, each
// in its own message of the same type; a view-only viewer's go through
// DropSelkiesToWatcher.
func (b *bridge) fromSelkies(up *websocket.Conn) {
	for {
		mt, r, err := up.NextReader()
		if err != nil {
			b.stop(closeStreamEnded, reasonStreamEnded)
			return
		}
		var head []byte
		if b.viewOnly {
			var hb [len(selkiesClipboardPrefix)]byte
			k, herr := io.ReadFull(r, hb[:])
			if herr != nil && herr != io.ErrUnexpectedEOF && herr != io.EOF {
				b.stop(closeStreamEnded, reasonStreamEnded)
				return
			}
			if head = hb[:k]; DropSelkiesToWatcher(mt, head) {
				if _, err := io.Copy(io.Discard, r); err != nil {
					b.stop(closeStreamEnded, reasonStreamEnded)
					return
				}
				continue
			}
		}
		b.ws.SetWriteDeadline(time.Now().Add(writeWait * 6))
		w, err := b.ws.NextWriter(mt)
		if err != nil {
			b.stop(websocket.CloseGoingAway, "viewer write failed")
			return
		}
		if _, err := w.Write(head); err != nil {
			b.stop(websocket.CloseGoingAway, "viewer write failed")
			return
		}
		n, err := io.Copy(w, r)
		n += int64(len(head))
		b.out.Add(n)
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			var ce *websocket.CloseError
			if errors.As(err, &ce) || errors.Is(err, io.ErrUnexpectedEOF) {
				b.stop(closeStreamEnded, reasonStreamEnded)
			} else {
				b.stop(websocket.CloseGoingAway, "viewer write failed")
			}
			return
		}
	}
}
