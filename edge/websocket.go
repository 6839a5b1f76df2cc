package edge

import (
	"bufio"
	"context"
	"errors"
	"io"
	"iter"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// Websockets: an HTTP/1.1 upgrade passed through to the sandbox on a
// connection of its own, and the two connections then joined, with no
// websocket library in between and no idle timeout.

// upgrade passes an admitted upgrade through (HTTP/1.1 only: HTTP/2 has
// none); it answers and logs itself.
func (s *Server) upgrade(ex exchange, d *decision, rec *record) {
	switch x := ex.(type) {
	case *h1Exchange:
		s.upgradeH1(x, d, rec)
	case interface{ upgrade(*decision, *record) }: // the tests' exchange
		x.upgrade(d, rec)
	}
}

// errUpgradeTimeout: the sandbox did not answer an upgrade in time.
var errUpgradeTimeout = errors.New("the sandbox did not answer the upgrade in 30 s")

// upgradeH1 passes an upgrade (a websocket) through: the request goes to
// the sandbox on a connection of its own, and once the sandbox agrees
// (101) the two connections are joined.
func (s *Server) upgradeH1(x *h1Exchange, d *decision, rec *record) {
	const html = false // a websocket client reads no page
	ctx, rt := x.ctx, d.rt
	ctx.Conn().SetReadDeadline(time.Time{}) // a websocket has no deadline
	dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	up, err := s.dial(dctx, rt.SandboxID, d.port)
	if err != nil {
		p := s.proxyProblem(rt, d.port, rec.id, err, nil)
		s.answer(x, rec, &p, html)
		return
	}
	// The sandbox has 30 s to answer the upgrade. A timer that closes the
	// channel bounds it rather than a deadline: a tunnel channel given a
	// deadline reads through a goroutine of its own from then on, which a
	// websocket would keep for its whole life.
	timer := time.AfterFunc(30*time.Second, func() { up.Close() })
	br := bufio.NewReaderSize(up, 4096)
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseResponse(resp)
	resp.Header.DisableNormalizing()
	_, err = up.Write(ctx.Request.Header.Header())
	if err == nil {
		err = resp.ReadLimitBody(br, 1<<20)
	}
	if !timer.Stop() && err == nil {
		err = errUpgradeTimeout // it fired as the answer came: the channel is closed
	}
	if err != nil {
		up.Close()
		p := s.proxyProblem(rt, d.port, rec.id, err, nil)
		s.answer(x, rec, &p, html)
		return
	}
	resp.Header.CopyTo(&ctx.Response.Header)
	ctx.Response.Header.SetNoDefaultContentType(true)
	ctx.Response.Header.Set("X-Request-Id", rec.id)
	rec.status = resp.StatusCode()
	if rec.status != fasthttp.StatusSwitchingProtocols {
		up.Close()
		ctx.Response.SetBody(resp.Body())
		rec.bytesOut.Store(int64(len(resp.Body())))
		s.finish(rec)
		return
	}
	if !isWebsocket(headerFold(resp.Header.All(), "Upgrade")) {
		// The edge asked for a websocket; joining the client to anything
		// else (h2c) would take its requests out of the edge's sight.
		up.Close()
		ctx.Response.Reset()
		s.answer(x, rec, &errBadAnswer, html)
		return
	}
	s.finish(rec)
	// From here on the connection carries the websocket, not HTTP: the
	// framing guard lets it through.
	// When fasthttp's reader (64 KiB, for the largest head) holds nothing,
	// the websocket reads the connection itself and the reader goes, as
	// does the upstream's when it holds nothing: an idle websocket then
	// keeps no read buffer at all.
	direct := false
	if fc, ok := ctx.Conn().(*framingConn); ok {
		direct = fc.drained(int(ctx.ConnRequestNum()))
		fc.passThrough()
	}
	var fromSandbox io.Reader = br
	if br.Buffered() == 0 {
		fromSandbox = up
	}
	ctx.Hijack(func(c net.Conn) {
		if u, ok := c.(interface{ UnsafeConn() net.Conn }); ok && direct {
			c = u.UnsafeConn()
		}
		// In a goroutine of its own, so that fasthttp's, which holds its
		// reader, ends.
		go s.pipe(c, up, fromSandbox, rec.bw)
	})
}

// headerFold is the value of the first header named name, in any case.
func headerFold(all iter.Seq2[[]byte, []byte], name string) string {
	for k, v := range all {
		if strings.EqualFold(b2s(k), name) {
			return string(v)
		}
	}
	return ""
}

// pipe joins a client's connection to a sandbox's once the sandbox agreed
// to an upgrade (a websocket): bytes pass both ways, with no websocket
// library in between and no idle timeout, until either side ends.
// fromSandbox reads the sandbox's side (it may hold bytes already read).
// It is tracked, so that shutdown ends it with a close frame (wsPipe).
// Both ways pay into bw, the URL's bandwidth cap (nil: none).
func (s *Server) pipe(client, sandbox net.Conn, fromSandbox io.Reader, bw *byteBucket) {
	p := &wsPipe{client: client, sandbox: sandbox}
	s.track(p)
	defer s.untrack(p)
	s.m.websockets.Inc()
	defer s.m.websockets.Dec()
	done := make(chan struct{})
	go func() { copyTrickle(sandbox, capReader(client, bw)); p.end(); close(done) }()
	p.down(capReader(fromSandbox, bw))
	p.end()
	<-done
}

// A websocket's bytes are read into a small buffer while they trickle
// (an idle one waits holding only that) and into a large pooled one
// while reads fill the small one.
const (
	trickleBuf = 2 << 10
	streamBuf  = 32 << 10
)

var streamBufs = sync.Pool{New: func() any { b := make([]byte, streamBuf); return &b }}

// trickle is the buffer of one direction of a websocket.
type trickle struct {
	small []byte
	large *[]byte
}

// next is the buffer for the next read, given what the last one brought
// (n of a buffer of size).
func (t *trickle) next(n, size int) []byte {
	switch {
	case t.large == nil && n == size && size > 0:
		t.large = streamBufs.Get().(*[]byte)
	case t.large != nil && n < size:
		t.release()
	}
	if t.large != nil {
		return *t.large
	}
	if t.small == nil {
		t.small = make([]byte, trickleBuf)
	}
	return t.small
}

func (t *trickle) release() {
	if t.large != nil {
		streamBufs.Put(t.large)
		t.large = nil
	}
}

// copyTrickle copies src to dst until either ends.
func copyTrickle(dst io.Writer, src io.Reader) {
	var t trickle
	defer t.release()
	buf := t.next(0, 0)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
		buf = t.next(n, len(buf))
	}
}

// wsPipe is a websocket passed through. The edge follows the frames the
// sandbox sends, so that when it shuts down it can end the websocket
// between two of them with a close frame of its own (1001, going away)
// rather than cut it mid-message.
type wsPipe struct {
	client, sandbox net.Conn
	mu              sync.Mutex // the client's side: writes and the state below
	frame           wsFrame
	going           bool // shutting down: end at the next frame boundary
	said            bool // the close frame went out: nothing more does
	ended           sync.Once
}

// closeGoingAway is a server's close frame with status 1001.
var closeGoingAway = []byte{0x88, 0x02, 0x03, 0xe9}

// down copies the sandbox's frames to the client.
func (p *wsPipe) down(r io.Reader) {
	var t trickle
	defer t.release()
	buf := t.next(0, 0)
	for n := 0; ; buf = t.next(n, len(buf)) {
		var err error
		n, err = r.Read(buf)
		if n > 0 {
			p.mu.Lock()
			if p.said {
				p.mu.Unlock()
				return
			}
			b, bye := buf[:n], false
			if cut := p.frame.feed(b); p.going && cut >= 0 {
				b, bye = b[:cut], true
			}
			_, werr := p.client.Write(b)
			p.mu.Unlock()
			if bye {
				p.goodbye()
				return
			}
			if werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Close ends the websocket for a shutdown: with a close frame as soon as
// no frame is under way, or cut after a second if one stays under way.
func (p *wsPipe) Close() error {
	p.mu.Lock()
	p.going = true
	at := p.frame.boundary()
	p.mu.Unlock()
	if at {
		p.goodbye()
	} else {
		time.AfterFunc(time.Second, p.end)
	}
	return nil
}

func (p *wsPipe) goodbye() {
	p.mu.Lock()
	if !p.said {
		p.said = true
		p.client.SetWriteDeadline(time.Now().Add(time.Second))
		p.client.Write(closeGoingAway)
	}
	p.mu.Unlock()
	p.end()
}

func (p *wsPipe) end() {
	p.ended.Do(func() {
		p.client.Close()
		p.sandbox.Close()
	})
}

// wsFrame follows websocket framing (RFC 6455 §5.2) in one direction.
type wsFrame struct {
	hdr  [14]byte
	nhdr int   // header bytes seen of the frame under way
	left int64 // payload bytes still to come
}

// boundary reports whether no frame is under way.
func (f *wsFrame) boundary() bool { return f.nhdr == 0 && f.left == 0 }

// feed follows b and returns the offset just past the first frame end in
// it, or -1 when no frame ends in b.
func (f *wsFrame) feed(b []byte) int {
	first := -1
	for i := 0; i < len(b); {
		if f.left > 0 {
			k := min(f.left, int64(len(b)-i))
			f.left -= k
			i += int(k)
		} else {
			f.hdr[f.nhdr] = b[i]
			f.nhdr++
			i++
			if need := f.headerLen(); f.nhdr < need {
				continue
			}
			f.left, f.nhdr = f.payloadLen(), 0
		}
		if f.boundary() && first < 0 {
			first = i
		}
	}
	return first
}

// headerLen is the length of the header under way, as far as known.
func (f *wsFrame) headerLen() int {
	if f.nhdr < 2 {
		return 2
	}
	n := 2
	switch f.hdr[1] & 0x7f {
	case 126:
		n += 2
	case 127:
		n += 8
	}
	if f.hdr[1]&0x80 != 0 {
		n += 4 // masked (a server should not, but the length counts)
	}
	return n
}

func (f *wsFrame) payloadLen() int64 {
	switch l := f.hdr[1] & 0x7f; l {
	case 126:
		return int64(f.hdr[2])<<8 | int64(f.hdr[3])
	case 127:
		var n int64
		for _, c := range f.hdr[2:10] {
			n = n<<8 | int64(c)
		}
		return n & (1<<63 - 1)
	default:
		return int64(l)
	}
}
