package desktop

import (
	"bytes"
	"context"
	"image"
	"image/jpeg"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"froog.tech/froog/desktop/rfb"
	"froog.tech/froog/names"
)

// Tile states, as the wall's events say them.
const (
	tileStarting  = "starting"  // no picture yet, and not for long
	tileOK        = "ok"        // the picture is current
	tileNoPicture = "nopicture" // nothing from the desktop for NoPictureAfter: the page says so, the edge keeps trying
)

// jpegQuality keeps a 480-pixel-wide desktop picture well under 30 KB.
const jpegQuality = 70

// tileSet is the tiles shown on any open wall: one RFB connection per
// desktop, shared by every wall that shows it, closed TileGrace after the
// last one stops showing it.
type tileSet struct {
	s     *Server
	mu    sync.Mutex
	m     map[string]*tile
	dials atomic.Int64 // RFB connections made, for tests and logs
}

// tile is one desktop's picture and the goroutine that keeps it.
type tile struct {
	id      string
	refs    int         // walls showing it; under tileSet.mu
	grace   *time.Timer // running while refs is 0; under tileSet.mu
	cancel  context.CancelFunc
	done    chan struct{}
	created time.Time

	mu      sync.Mutex
	jpeg    []byte
	version uint64    // of jpeg; 0: none yet
	fresh   time.Time // when the desktop last answered
}

// acquire holds the tile of sandbox id for a wall, starting its
// connection if no wall held it.
func (ts *tileSet) acquire(id string) *tile {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if t := ts.m[id]; t != nil {
		t.refs++
		if t.grace != nil {
			t.grace.Stop()
			t.grace = nil
		}
		return t
	}
	ctx, cancel := context.WithCancel(context.Background())
	t := &tile{id: id, refs: 1, cancel: cancel, done: make(chan struct{}), created: time.Now()}
	ts.m[id] = t
	go func() {
		defer close(t.done)
		ts.run(ctx, t)
	}()
	return t
}

// release lets go of a tile; the last release closes it after TileGrace
// (a reload of the wall keeps the connection).
func (ts *tileSet) release(t *tile) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if t.refs--; t.refs > 0 {
		return
	}
	t.grace = time.AfterFunc(ts.s.o.TileGrace, func() {
		ts.mu.Lock()
		defer ts.mu.Unlock()
		if t.refs == 0 && ts.m[t.id] == t {
			delete(ts.m, t.id)
			t.cancel()
		}
	})
}

// get returns the tile of sandbox id if some wall holds it.
func (ts *tileSet) get(id string) *tile {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.m[id]
}

// close ends every tile and waits for their goroutines.
func (ts *tileSet) close() {
	ts.mu.Lock()
	all := make([]*tile, 0, len(ts.m))
	for id, t := range ts.m {
		if t.grace != nil {
			t.grace.Stop()
		}
		t.cancel()
		delete(ts.m, id)
		all = append(all, t)
	}
	ts.mu.Unlock()
	for _, t := range all {
		<-t.done
	}
}

// open is the number of tiles held or in their grace period.
func (ts *tileSet) open() int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return len(ts.m)
}

// picture returns the tile's current JPEG and its version.
func (t *tile) picture() ([]byte, uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.jpeg, t.version
}

// state says what the wall shows for the tile at now.
func (t *tile) state(now time.Time, noPictureAfter time.Duration) (uint64, string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.version > 0 && now.Sub(t.fresh) < noPictureAfter:
		return t.version, tileOK
	case t.version == 0 && now.Sub(t.created) < noPictureAfter:
		return 0, tileStarting
	}
	return t.version, tileNoPicture
}

func (t *tile) answered() {
	t.mu.Lock()
	t.fresh = time.Now()
	t.mu.Unlock()
}

func (t *tile) publish(b []byte) {
	t.mu.Lock()
	t.jpeg = b
	t.version++
	t.fresh = time.Now()
	t.mu.Unlock()
}

// run keeps the tile's connection until ctx ends: it starts the desktop,
// connects, and connects again after a failure (after 1 s, then up to
// 5 s between tries).
func (ts *tileSet) run(ctx context.Context, t *tile) {
	for fails := 0; ctx.Err() == nil; {
		got, err := ts.connect(ctx, t)
		if ctx.Err() != nil {
			return
		}
		if got {
			fails = 0
		}
		fails++
		ts.s.log.Info("desktop tile lost", "sandbox", t.id, "err", err.Error())
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(min(fails, 5)) * time.Second):
		}
	}
}

// connect runs one RFB connection for the tile until it fails or ctx
// ends; got says a picture came through it.
func (ts *tileSet) connect(ctx context.Context, t *tile) (got bool, err error) {
	o := &ts.s.o
	sctx, cancel := context.WithTimeout(ctx, o.StartTimeout)
	port, err := o.Starter.StartDesktop(sctx, t.id, names.ViewDesktop, "")
	var conn net.Conn
	if err == nil {
		conn, err = o.Dialer.DialContext(sctx, t.id, port)
	}
	cancel()
	if err != nil {
		return false, err
	}
	ts.dials.Add(1)
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	conn.SetDeadline(time.Now().Add(handshakeTimeout))
	pc := &progressConn{Conn: conn}
	c, err := rfb.NewClient(pc, o.TileWidth)
	if err != nil {
		return false, err
	}
	conn.SetDeadline(time.Time{})

	// The reader applies what the desktop sends, and encodes the picture
	// when an update changed it. The loop below asks for updates.
	var (
		pending   atomic.Bool  // an incremental request is unanswered
		heard     atomic.Int64 // when the desktop last sent a message, Unix ns
		refreshMu sync.Mutex
		refresh   image.Rectangle // what CopyRects left approximate
		gotAny    atomic.Bool
	)
	pending.Store(true) // the handshake asked for the whole screen
	heard.Store(time.Now().UnixNano())
	// The desktop must keep sending while a message comes, not send a
	// whole message within the timeout: a 1920x1080 screen in Raw is
	// 8.3 MB, which a busy edge with many tiles takes seconds to read,
	// and a tile dropped for it only asks for the whole screen again.
	pc.timeout = 4*o.TileEvery + 4*time.Second
	errc := make(chan error, 1)
	go func() {
		var buf bytes.Buffer
		for {
			update, err := c.Next()
			if err != nil {
				errc <- err
				return
			}
			heard.Store(time.Now().UnixNano())
			if !update {
				continue
			}
			pending.Store(false)
			if !c.Refresh.Empty() {
				refreshMu.Lock()
				refresh = refresh.Union(c.Refresh)
				refreshMu.Unlock()
				c.Refresh = image.Rectangle{}
			}
			if !c.Dirty {
				t.answered()
				continue
			}
			c.Dirty = false
			buf.Reset()
			if err := jpeg.Encode(&buf, c.Pic, &jpeg.Options{Quality: jpegQuality}); err != nil {
				errc <- err
				return
			}
			t.publish(bytes.Clone(buf.Bytes()))
			gotAny.Store(true)
		}
	}()

	tick := time.NewTicker(o.TileEvery)
	defer tick.Stop()
	var msg []byte
	for {
		select {
		case <-ctx.Done():
			return gotAny.Load(), ctx.Err()
		case err := <-errc:
			return gotAny.Load(), err
		case <-tick.C:
		}
		msg = msg[:0]
		if !pending.Load() {
			msg = rfb.AppendRequest(msg, true, image.Rect(0, 0, c.Width, c.Height))
			refreshMu.Lock()
			if !refresh.Empty() {
				msg = rfb.AppendRequest(msg, false, refresh)
				refresh = image.Rectangle{}
			}
			refreshMu.Unlock()
			pending.Store(true)
		} else if time.Since(time.Unix(0, heard.Load())) >= 2*o.TileEvery {
			// A still screen answers no incremental request: a 1x1
			// non-incremental one tells a live desktop from a dead one.
			msg = rfb.AppendRequest(msg, false, image.Rect(0, 0, 1, 1))
			heard.Store(time.Now().UnixNano())
		}
		if len(msg) == 0 {
			continue
		}
		conn.SetWriteDeadline(time.Now().Add(handshakeTimeout))
		if _, err := conn.Write(msg); err != nil {
			return gotAny.Load(), err
		}
	}
}

// progressConn is a connection whose reads, once timeout is set, fail
// when no byte comes for that long.
type progressConn struct {
	net.Conn
	timeout time.Duration
}

func (c *progressConn) Read(p []byte) (int, error) {
	if c.timeout > 0 {
		c.Conn.SetReadDeadline(time.Now().Add(c.timeout))
	}
	return c.Conn.Read(p)
}

// handshakeTimeout bounds the RFB handshake and every write.
const handshakeTimeout = 10 * time.Second
