package edge

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"froog.tech/froog/edge/route"
	"froog.tech/froog/tunnel"
)

// dialError is a failure to reach a sandbox's port: the tunnel's own
// words, which hold no byte of any request.
type dialError struct{ err error }

func (e *dialError) Error() string { return e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

// dial opens a connection to a port inside a sandbox, for either protocol.
func (s *Server) dial(ctx context.Context, sandboxID string, port int) (net.Conn, error) {
	c, err := s.o.Dialer.DialContext(ctx, sandboxID, port)
	if err != nil {
		return nil, &dialError{err}
	}
	return c, nil
}

// proxyProblem maps a failed exchange with the sandbox to the page to
// show. in is the request body as read from the client (nil: none): when
// reading it failed, the client broke the exchange, and gets a 400 that
// does not blame the sandbox. The log says what failed in the edge's own
// words: the errors of HTTP parsers quote the bytes they could not read,
// and those may hold a token.
func (s *Server) proxyProblem(rt *route.Route, requestID string, err error, in *countingReader) problem {
	if in != nil && in.err != nil {
		var ne net.Error
		slow := errors.Is(in.err, errBodyTooSlow) || errors.As(in.err, &ne) && ne.Timeout()
		s.o.Logger.Info("proxy: the client's request body failed", slog.String("request_id", requestID), slog.String("sandbox", rt.SandboxID), slog.Bool("too_slow", slow))
		if slow {
			return errRequestTimeout
		}
		return errBadRequest
	}
	switch {
	case errors.Is(err, errAnswerRefused):
		return errBadAnswer
	case errors.Is(err, tunnel.ErrNotRunning):
		return errStopped
	case errors.Is(err, tunnel.ErrPortClosed): // expected while the app starts: no log line
		return errBadGateway(rt.Port)
	}
	s.o.Logger.Warn("proxy", slog.String("request_id", requestID), slog.String("sandbox", rt.SandboxID), slog.String("error", safeError(err)))
	return errBadGateway(rt.Port)
}

// safeError describes err for a log line without quoting the exchange.
func safeError(err error) string {
	var de *dialError
	var ne net.Error
	switch {
	case errors.As(err, &de):
		return "dial: " + de.Error()
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, fasthttp.ErrConnectionClosed), errors.Is(err, net.ErrClosed):
		return "the app closed the connection"
	}
	return "the app's answer could not be read"
}

// upstreams keeps one fasthttp client per sandbox port: its connections
// (tunnel channels) are reused across requests.
type upstreams struct {
	s      *Server
	mu     sync.RWMutex
	m      map[route.Port]*fasthttp.HostClient
	pruned time.Time
}

// upstreamIdle is how long a pooled connection to a sandbox's port (a
// tunnel channel, and the SSH server's connection to the app behind it)
// may stay idle before it is closed: long enough to be reused between a
// page's bursts, short enough that a burst's connections do not linger.
const upstreamIdle = 30 * time.Second

// pruneEvery spaces out prunes; a client left meanwhile only holds idle
// connections, which close by themselves.
const pruneEvery = 30 * time.Second

func (u *upstreams) get(rt *route.Route) *fasthttp.HostClient {
	k := route.Port{SandboxID: rt.SandboxID, Port: rt.Port}
	u.mu.RLock()
	hc := u.m[k]
	due := time.Since(u.pruned) >= pruneEvery
	u.mu.RUnlock()
	if due {
		u.prune()
	}
	if hc != nil {
		return hc
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if hc = u.m[k]; hc == nil {
		hc = &fasthttp.HostClient{
			Addr: rt.SandboxID + ":" + strconv.Itoa(rt.Port),
			Dial: func(string) (net.Conn, error) {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				return u.s.dial(ctx, k.SandboxID, k.Port)
			},
			MaxConns:                      4096,
			MaxIdleConnDuration:           upstreamIdle,
			ReadBufferSize:                maxHeader,
			StreamResponseBody:            true,
			DisableHeaderNamesNormalizing: true,
			DisablePathNormalizing:        true,
			NoDefaultUserAgentHeader:      true,
			// Retry once, an idempotent request only, when a pooled
			// connection turned out to be closed: a POST the app may
			// have seen is never sent twice.
			RetryIfErr: func(r *fasthttp.Request, attempts int, err error) (bool, bool) {
				idempotent := r.Header.IsGet() || r.Header.IsHead() || r.Header.IsOptions() || r.Header.IsPut() || r.Header.IsDelete()
				return false, attempts < 2 && idempotent && !r.IsBodyStream() && (errors.Is(err, io.EOF) || errors.Is(err, fasthttp.ErrConnectionClosed))
			},
		}
		if u.m == nil {
			u.m = map[route.Port]*fasthttp.HostClient{}
		}
		u.m[k] = hc
	}
	return hc
}

// forgetStale drops the pooled connections to a sandbox whose run or
// endpoint changed since the last request to it (it stopped and started,
// moved): they went through a tunnel connection that is gone, and a POST
// sent on one would fail rather than be retried. Other changes (a label,
// a snapshot's time: the route table has a new record for each) keep
// them, and one sandbox's change never touches another's. The check is a
// lookup and a comparison.
func (s *Server) forgetStale(sandboxID string) {
	cur := s.o.Routes.Sandbox(sandboxID)
	if cur == nil {
		return
	}
	k := runKey{started: cur.StartedAt, endpoint: cur.Endpoint}
	if old, ok := s.seen.Load(sandboxID); ok && old.(runKey).same(k) {
		return
	}
	if old, loaded := s.seen.Swap(sandboxID, k); loaded && !old.(runKey).same(k) {
		s.upstreams.closeIdle(sandboxID)
		s.h2up.closeIdle(sandboxID)
	}
}

// runKey is what a sandbox's pooled connections belong to: one run, at
// one SSH endpoint.
type runKey struct {
	started  time.Time
	endpoint string
}

func (k runKey) same(o runKey) bool { return k.started.Equal(o.started) && k.endpoint == o.endpoint }

// closeIdle closes the idle connections to one sandbox's ports.
func (u *upstreams) closeIdle(sandboxID string) {
	u.mu.RLock()
	defer u.mu.RUnlock()
	for k, hc := range u.m {
		if k.SandboxID == sandboxID {
			hc.CloseIdleConnections()
		}
	}
}

// prune forgets the clients of ports no route points at any more, at
// most every pruneEvery.
func (u *upstreams) prune() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if time.Since(u.pruned) < pruneEvery {
		return
	}
	u.pruned = time.Now()
	for k, hc := range u.m {
		if !u.s.o.Routes.Serves(k) {
			hc.CloseIdleConnections()
			delete(u.m, k)
		}
	}
	u.s.seen.Range(func(id, _ any) bool {
		if u.s.o.Routes.Sandbox(id.(string)) == nil {
			u.s.seen.Delete(id)
		}
		return true
	})
	u.s.h2up.prune(func(id string) bool { return u.s.o.Routes.Sandbox(id) != nil })
}

// pipe joins a client's connection to a sandbox's once the sandbox agreed
// to an upgrade (a websocket): bytes pass both ways, with no websocket
// library in between and no idle timeout, until either side ends.
// fromSandbox reads the sandbox's side (it may hold bytes already read).
// It is tracked, so that shutdown ends it with a close frame (wsPipe).
func (s *Server) pipe(client, sandbox net.Conn, fromSandbox io.Reader) {
	p := &wsPipe{client: client, sandbox: sandbox}
	s.track(p)
	defer s.untrack(p)
	s.m.websockets.Inc()
	defer s.m.websockets.Dec()
	done := make(chan struct{})
	go func() { copyTrickle(sandbox, client); p.end(); close(done) }()
	p.down(fromSandbox)
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

// bodyTail streams a sandbox's response body to the client, counting it;
// fasthttp closes it when the body is through, which frees the upstream
// connection and logs the exchange.
type bodyTail struct {
	countingReader
	up   *fasthttp.Response
	x    *record
	s    *Server
	once sync.Once
}

// WriteTo is how fasthttp copies a body of known size: in large reads,
// rather than its own 4 KiB ones.
func (b *bodyTail) WriteTo(w io.Writer) (int64, error) {
	buf := bulkBuffers.Get().(*[]byte)
	defer bulkBuffers.Put(buf)
	var total int64
	for {
		n, err := b.Read(*buf)
		if n > 0 {
			m, werr := w.Write((*buf)[:n])
			total += int64(m)
			if werr != nil {
				return total, werr
			}
		}
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

var bulkBuffers = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

func (b *bodyTail) Close() error {
	b.once.Do(func() {
		b.up.CloseBodyStream()
		fasthttp.ReleaseResponse(b.up)
		b.s.finish(b.x)
	})
	return nil
}

// countingReader counts what is read through it into n, and keeps the
// first error other than io.EOF: for a request body, the client's. For
// a request body it also keeps the client moving (deadline set): each
// read must bring bytes within BodyIdleTimeout, and past that long from
// the first read the body must average MinBodyRate, or it fails with
// errBodyTooSlow. Upgraded connections (websockets) have no body.
type countingReader struct {
	r   io.Reader
	n   *int64
	err error

	deadline func(time.Time) error // nil: no pace (a response body)
	idle     time.Duration
	rate     float64 // bytes a second
	start    time.Time
}

// errBodyTooSlow: a client sent its request body too slowly.
var errBodyTooSlow = errors.New("request body too slow")

func (c *countingReader) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err // some callers drop an error that comes with bytes
	}
	if c.deadline != nil {
		now := time.Now()
		if c.start.IsZero() {
			c.start = now
		}
		c.deadline(now.Add(c.idle))
	}
	n, err := c.r.Read(p)
	*c.n += int64(n)
	if err != nil && err != io.EOF {
		c.err = err
	}
	if c.deadline != nil && err == nil {
		if el := time.Since(c.start); el > c.idle && float64(*c.n) < c.rate*el.Seconds() {
			c.err = errBodyTooSlow // returned by the next Read
		}
	}
	return n, err
}

// paced makes c a request body's reader, paced by the edge's options;
// deadline sets the read deadline of the client's connection or stream.
func (s *Server) paced(c *countingReader, deadline func(time.Time) error) {
	c.deadline, c.idle, c.rate = deadline, s.o.BodyIdleTimeout, s.o.MinBodyRate
}
