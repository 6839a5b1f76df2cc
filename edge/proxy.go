package edge

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"iter"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"froog.tech/froog/edge/route"
)

// The proxy: one pool of connections to sandboxes' ports for both
// protocols, the request written on one and the answer read back (with
// fasthttp's codec for HTTP/1.1, net/http's for HTTP/2), failures mapped
// to pages, and the request body's pace.

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

// upstreams is the one pool of connections to sandboxes' ports, for
// both protocols: per sandbox and port, a list of idle tunnel
// connections (each a channel of the sandbox's SSH connection, and the
// SSH server's connection to the app behind it). A request takes one (or
// dials), writes itself on it and reads its answer; once the answer is
// read to its end the connection goes back, unless either side said
// Connection: close or the request ended early (the client went: its
// connection is closed, which is how one request is cancelled).
type upstreams struct {
	s      *Server
	mu     sync.Mutex
	idle   map[route.Port][]*upConn // the most recently used last
	pruned time.Time
	// sweeper prunes while connections are idle, when no request comes
	// to do it: nil when the pool holds none.
	sweeper *time.Timer
	closed  bool
}

// maxIdlePerPort bounds the idle connections kept to one sandbox port;
// past it a connection whose answer is through is closed.
const maxIdlePerPort = 64

// upConn is one connection to a sandbox's port, with the buffers of the
// request on it (none while it is idle).
type upConn struct {
	net.Conn
	key    route.Port
	run    runKey // the sandbox's run it was dialled in
	since  time.Time
	reused bool // taken from the pool, not dialled: it may have been closed meanwhile
	cut    bool // the app answered before it had the request's whole body (answeredEarly)
	head   headLimit
	br     *bufio.Reader // the answer's reader while a request is on it
}

// headLimit bounds what the answer's head may take (HTTP/2's codec;
// fasthttp's is bounded by its reader's size); n < 0: no bound.
type headLimit struct {
	c net.Conn
	n int
}

var errHeadTooLarge = errors.New("the app's answer has too large a head")

func (h *headLimit) Read(p []byte) (int, error) {
	if h.n >= 0 {
		if h.n == 0 {
			return 0, errHeadTooLarge
		}
		p = p[:min(len(p), h.n)]
	}
	n, err := h.c.Read(p)
	if h.n >= 0 {
		h.n -= n
	}
	return n, err
}

var (
	upReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, maxHeader) }}
	upWriters = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 4096) }}
	upCopies  = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}
)

// bodyWriter is what a request is written to: the upstream connection,
// with a ReadFrom through which bufio's Writer moves a request body in
// reads of up to 32 KiB, each written at once (one SSH packet through the
// tunnel), as http.Transport does. Through bufio's 4 KiB buffer alone an
// upload went to the tunnel in 4 KiB writes: 1.7× the edge's CPU per MB.
type bodyWriter struct{ net.Conn }

func (w bodyWriter) ReadFrom(r io.Reader) (int64, error) {
	b := upCopies.Get().(*[]byte)
	defer upCopies.Put(b)
	return io.CopyBuffer(struct{ io.Writer }{w.Conn}, r, *b)
}

func runOf(sb *route.Sandbox) runKey {
	if sb == nil {
		return runKey{}
	}
	return runKey{started: sb.StartedAt, endpoint: sb.Endpoint}
}

// get takes an idle connection to k, or dials one (ctx and 30 s bound
// the dial).
func (u *upstreams) get(ctx context.Context, k route.Port) (*upConn, error) {
	now := time.Now()
	u.mu.Lock()
	due := now.Sub(u.pruned) >= u.s.o.UpstreamIdle
	var c *upConn
	if list := u.idle[k]; len(list) > 0 {
		c, list = list[len(list)-1], list[:len(list)-1]
		if now.Sub(c.since) >= u.s.o.UpstreamIdle {
			// The most recent is stale, so is every older one.
			for _, o := range list {
				o.Close()
			}
			c.Close()
			c, list = nil, nil
		}
		u.idle[k] = list
	}
	u.mu.Unlock()
	if due {
		u.prune()
	}
	if c != nil {
		c.reused = true
	} else {
		dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		nc, err := u.s.dial(dctx, k.SandboxID, k.Port)
		cancel()
		if err != nil {
			return nil, err
		}
		c = &upConn{Conn: nc, key: k, run: runOf(u.s.o.Routes.Sandbox(k.SandboxID))}
		c.head = headLimit{c: nc, n: -1}
	}
	c.br = upReaders.Get().(*bufio.Reader)
	c.br.Reset(&c.head)
	return c, nil
}

// write writes a request on c through a pooled buffer, held only while
// it writes.
func (c *upConn) write(w func(*bufio.Writer) error) error {
	bw := upWriters.Get().(*bufio.Writer)
	bw.Reset(bodyWriter{c.Conn})
	err := w(bw)
	if err == nil {
		err = bw.Flush()
	}
	bw.Reset(nil)
	upWriters.Put(bw)
	return err
}

// release gives c's reader back; a connection that still holds bytes of
// an answer is not reusable.
func (c *upConn) release() (clean bool) {
	clean = c.br.Buffered() == 0
	c.br.Reset(nil)
	upReaders.Put(c.br)
	c.br = nil
	return clean
}

// done ends one request on c: back to the pool when keep, else closed.
// A connection of a run that is over (the sandbox restarted or moved
// meanwhile) is closed too.
func (u *upstreams) done(c *upConn, keep bool) {
	if !c.release() || !keep || !runOf(u.s.o.Routes.Sandbox(c.key.SandboxID)).same(c.run) {
		c.Close()
		return
	}
	c.since, c.reused = time.Now(), false
	u.mu.Lock()
	if u.closed || len(u.idle[c.key]) >= maxIdlePerPort {
		u.mu.Unlock()
		c.Close()
		return
	}
	if u.idle == nil {
		u.idle = map[route.Port][]*upConn{}
	}
	u.idle[c.key] = append(u.idle[c.key], c)
	if u.sweeper == nil {
		u.sweeper = time.AfterFunc(u.s.o.UpstreamIdle, u.sweep)
	}
	u.mu.Unlock()
}

// sweep prunes the pool on its own timer, so that a burst's connections
// are closed once idle even when no request follows; it runs again while
// any connection is idle.
func (u *upstreams) sweep() {
	u.mu.Lock()
	u.pruned = time.Time{} // due now
	u.mu.Unlock()
	u.prune()
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.idle) > 0 && !u.closed {
		u.sweeper.Reset(u.s.o.UpstreamIdle)
	} else {
		u.sweeper = nil
	}
}

// close closes every idle connection, and those given back later.
func (u *upstreams) close() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.closed = true
	for k, list := range u.idle {
		for _, c := range list {
			c.Close()
		}
		delete(u.idle, k)
	}
	if u.sweeper != nil {
		u.sweeper.Stop()
		u.sweeper = nil
	}
}

// closeSandbox closes the idle connections to one sandbox's ports, and
// no other sandbox's.
func (u *upstreams) closeSandbox(sandboxID string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for k, list := range u.idle {
		if k.SandboxID == sandboxID {
			for _, c := range list {
				c.Close()
			}
			delete(u.idle, k)
		}
	}
}

// idleCount is how many idle connections the pool keeps to a sandbox.
func (u *upstreams) idleCount(sandboxID string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := 0
	for k, list := range u.idle {
		if k.SandboxID == sandboxID {
			n += len(list)
		}
	}
	return n
}

// prune closes the connections idle past Options.UpstreamIdle and those
// to ports no route points at any more, at most once in that time.
func (u *upstreams) prune() {
	u.mu.Lock()
	now := time.Now()
	if now.Sub(u.pruned) < u.s.o.UpstreamIdle {
		u.mu.Unlock()
		return
	}
	u.pruned = now
	for k, list := range u.idle {
		serves := u.s.o.Routes.Serves(k)
		kept := list[:0]
		for _, c := range list {
			if serves && now.Sub(c.since) < u.s.o.UpstreamIdle {
				kept = append(kept, c)
			} else {
				c.Close()
			}
		}
		if len(kept) == 0 {
			delete(u.idle, k)
		} else {
			u.idle[k] = kept
		}
	}
	u.mu.Unlock()
	u.s.seen.Range(func(id, _ any) bool {
		if u.s.o.Routes.Sandbox(id.(string)) == nil {
			u.s.seen.Delete(id)
		}
		return true
	})
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
	k := runOf(cur)
	if old, ok := s.seen.Load(sandboxID); ok && old.(runKey).same(k) {
		return
	}
	if old, loaded := s.seen.Swap(sandboxID, k); loaded && !old.(runKey).same(k) {
		s.upstreams.closeSandbox(sandboxID)
	}
}

// runKey is what a sandbox's pooled connections belong to: one run, at
// one SSH endpoint.
type runKey struct {
	started  time.Time
	endpoint string
}

func (k runKey) same(o runKey) bool { return k.started.Equal(o.started) && k.endpoint == o.endpoint }

// retryable: a request sent on a pooled connection found it closed by
// the app (an idle connection's close crossed the request), and may be
// sent once more on a new one: only an idempotent request without a
// streamed body, so a POST the app may have seen is never sent twice.
func retryable(c *upConn, idempotent, streamed bool, err error) bool {
	return c.reused && idempotent && !streamed &&
		(errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, fasthttp.ErrConnectionClosed))
}

// forward sends an admitted request to its sandbox's port and the answer
// back, counting its bytes into rec; later: rec is logged once the
// answer's body is through. An error is the pipeline's to answer.
func (s *Server) forward(ex exchange, d *decision, in *countingReader, rec *record) (later bool, err error) {
	defer func() { err = s.refused(d, err) }() // a refused dial: may it say what listens (listening.go)
	switch x := ex.(type) {
	case *h1Exchange:
		return s.forwardH1(x.ctx, d, in, rec)
	case *h2Exchange:
		return s.forwardH2(x.w, x.r, d, in, rec)
	case interface {
		forward(*decision, *countingReader, *record) (bool, error)
	}: // the tests' exchange
		return x.forward(d, in, rec)
	}
	panic("edge: an exchange of no known protocol")
}

// forwardH1 sends a fasthttp request on a pooled connection and streams
// the answer's body to the client; the exchange is logged once the body
// is through (bodyTail). Header names and the target pass as sent.
func (s *Server) forwardH1(ctx *fasthttp.RequestCtx, d *decision, in *countingReader, rec *record) (bool, error) {
	req := &ctx.Request
	h := &req.Header
	h.ResetConnectionClose()
	h.SetNoDefaultContentType(true) // a body without a Content-Type stays without one
	// The head is in; the body is paced by its reader (countingReader).
	ctx.Conn().SetReadDeadline(time.Time{})
	if in.r != nil {
		req.SetBodyStream(in, h.ContentLength())
	} else {
		rec.bytesIn.Store(int64(len(req.Body())))
	}
	// The target and Host go as sent: written from the URI, as fasthttp
	// does once it is parsed, the path is not cleaned.
	req.UseHostHeader = true
	req.URI().DisablePathNormalizing = true
	up := fasthttp.AcquireResponse()
	c, err := s.roundTripH1(d.rt, d.port, req, in, up, rec)
	if err != nil {
		fasthttp.ReleaseResponse(up)
		return false, err
	}
	if c.cut {
		closeLingering(ctx) // the client may still be sending the body
	}
	keep := !up.ConnectionClose() && up.Header.ContentLength() >= -1 // -2: the body ends with the connection
	rh := &ctx.Response.Header
	up.Header.CopyTo(rh)
	rh.SetProtocol(nil) // the edge's own version, HTTP/1.1, whatever the app's (RFC 9110 6.2)
	rh.SetNoDefaultContentType(true)
	rh.ResetConnectionClose()
	var hp hops
	ok := true
	for k, v := range up.Header.All() {
		if strings.EqualFold(b2s(k), "Connection") {
			ok = ok && hp.addConnection(b2s(v))
		}
	}
	if !ok || !dropHeaders(up.Header.All(), rh.DelBytes, hp.dropResponse) {
		fasthttp.ReleaseResponse(up)
		s.upstreams.done(c, false)
		ctx.Response.Reset()
		return false, errAnswerRefused
	}
	rh.Set("X-Request-Id", rec.id)
	rec.status = up.StatusCode()
	rec.answerH1(rh)
	body := up.BodyStream()
	if body == nil { // no body (HEAD, 204, 304)
		fasthttp.ReleaseResponse(up)
		s.upstreams.done(c, keep)
		return false, nil
	}
	tail := &bodyTail{countingReader: countingReader{r: body, n: &rec.bytesOut, bw: rec.bw, tap: rec.responseTap()}, up: up, c: c, keep: keep, x: rec, s: s}
	n := up.Header.ContentLength()
	if n < 0 {
		if !ctx.Request.Header.IsHTTP11() {
			s.closeDelimited(ctx, tail)
			return true, nil
		}
		n = -1 // chunked to the client, whatever the sandbox framed it as
	}
	ctx.Response.SetBodyStream(tail, n)
	return true, nil
}

// closeDelimited answers an HTTP/1.0 client whose answer has no length.
// Such a client cannot read a chunked body (RFC 9112 6.1), and fasthttp
// chunks every body of unknown length; so the head goes out without a
// length or Transfer-Encoding, on the hijacked connection, and the body
// after it ends with the connection. It is tracked, so that a drain ends
// it as it ends a websocket.
func (s *Server) closeDelimited(ctx *fasthttp.RequestCtx, body *bodyTail) {
	rh := &ctx.Response.Header
	rh.SetContentLength(-2) // no length, no Transfer-Encoding, Connection: close
	head := append([]byte(nil), rh.Header()...)
	ctx.HijackSetNoResponse(true)
	ctx.Hijack(func(c net.Conn) {
		s.track(c)
		defer s.untrack(c)
		defer c.Close()
		if _, err := c.Write(head); err == nil {
			body.WriteTo(c)
		}
		body.Close()
	})
}

// roundTripH1 writes req on a connection to port of rt's sandbox and reads the head
// of the answer into up (its body streams from the connection). in is the
// client's body when it streams.
func (s *Server) roundTripH1(rt *route.Route, port int, req *fasthttp.Request, in *countingReader, up *fasthttp.Response, rec *record) (*upConn, error) {
	h := &req.Header
	idempotent := h.IsGet() || h.IsHead() || h.IsOptions() || h.IsPut() || h.IsDelete()
	streamed := in.r != nil // asked here: req.Write spends the stream and forgets it
	for {
		c, err := s.connect(context.Background(), route.Port{SandboxID: rt.SandboxID, Port: port}, rec)
		if err != nil {
			return nil, err
		}
		up.Reset()
		up.Header.DisableNormalizing()
		up.StreamBody, up.SkipBody = true, h.IsHead()
		err = c.write(req.Write)
		if err == nil {
			if err = up.Read(c.br); err == nil {
				rec.firstByte = time.Since(rec.start)
				return c, nil
			}
		} else if streamed && in.err == nil && c.answeredEarly(up) {
			rec.firstByte = time.Since(rec.start)
			return c, nil
		}
		s.upstreams.done(c, false)
		if !retryable(c, idempotent, streamed, err) {
			return nil, err
		}
	}
}

// answeredEarly reads the head of an answer into up after the request's
// body could not all be written, the client's side of it sound: an app
// may answer before it has read the body (a 413 for one too large) and
// close, which ends the write. What it sent before closing is already
// here, so the read is bounded by earlyAnswerWait. The connection is not
// kept.
func (c *upConn) answeredEarly(up *fasthttp.Response) bool {
	c.SetReadDeadline(time.Now().Add(earlyAnswerWait))
	if up.Read(c.br) != nil {
		return false
	}
	c.SetReadDeadline(time.Time{})
	up.SetConnectionClose()
	c.cut = true
	return true
}

// earlyAnswerWait bounds answeredEarly's read.
const earlyAnswerWait = time.Second

// dropHeaders deletes the headers drop reports, each distinct spelling
// once (a deletion walks every header). It reports false, deleting
// nothing, when there are more than maxDropped spellings to delete.
func dropHeaders(all iter.Seq2[[]byte, []byte], del func([]byte), drop func(string) bool) bool {
	var scratch [512]byte
	names, n := scratch[:0], 0
	for k := range all {
		if !drop(b2s(k)) || hasName(names, b2s(k)) {
			continue
		}
		if n++; n > maxDropped {
			return false
		}
		names = append(append(names, k...), 0)
	}
	for len(names) > 0 {
		i := bytes.IndexByte(names, 0)
		del(names[:i])
		names = names[i+1:]
	}
	return true
}

// bodyTail streams a sandbox's response body to the client, counting it;
// fasthttp closes it when the body is through, which frees the upstream
// connection (back to the pool when read to its end) and logs the
// exchange.
type bodyTail struct {
	countingReader
	up   *fasthttp.Response
	c    *upConn
	keep bool
	eof  bool
	x    *record
	s    *Server
	once sync.Once
}

func (b *bodyTail) Read(p []byte) (int, error) {
	n, err := b.countingReader.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
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
		if !b.eof {
			b.c.Close() // the rest of the answer is not read: the connection goes
		}
		b.up.CloseBodyStream()
		fasthttp.ReleaseResponse(b.up)
		b.s.upstreams.done(b.c, b.keep && b.eof)
		b.s.finish(b.x)
	})
	return nil
}

// poolTransport is the reverse proxy's transport: an HTTP/1.1 round trip
// on a pooled connection, with net/http's codec. The "host" of an
// upstream request is SANDBOX:PORT; the tunnel reaches 127.0.0.1:PORT
// inside that sandbox. The request's context ending (the client reset its
// stream, or went) closes the connection, which ends the round trip and
// the answer's body, whatever they wait for.
type poolTransport Server

func (t *poolTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	s := (*Server)(t)
	id, p, _ := strings.Cut(r.URL.Host, ":")
	port, err := strconv.Atoi(p)
	if err != nil {
		return nil, err
	}
	k := route.Port{SandboxID: id, Port: port}
	rec := r.Context().Value(ctxKey{}).(*h2Request).rec
	streamed := r.Body != nil && r.Body != http.NoBody
	idempotent := r.Method == http.MethodGet || r.Method == http.MethodHead || r.Method == http.MethodOptions || r.Method == http.MethodPut || r.Method == http.MethodDelete
	for {
		c, err := s.connect(r.Context(), k, rec)
		if err != nil {
			return nil, err
		}
		stop := context.AfterFunc(r.Context(), func() { c.Close() })
		// The body is written while the answer is read: an app may answer
		// before it has read it all (an early 413), and a stream's two
		// directions go at once.
		// The transport closes the request body whatever happens (what a
		// RoundTripper must do): that also ends a read of it under way.
		var written chan error
		if streamed {
			written = make(chan error, 1)
			go func() {
				err := writeRequest(r, c)
				r.Body.Close()
				written <- err
			}()
		} else {
			err = writeRequest(r, c)
		}
		var resp *http.Response
		if err == nil {
			resp, err = readResponse(c, r)
		}
		if err == nil {
			rec.firstByte = time.Since(rec.start)
			keep := !resp.Close && !r.Close && (resp.ContentLength >= 0 || len(resp.TransferEncoding) > 0)
			resp.Body = &upBody{ReadCloser: resp.Body, c: c, s: s, stop: stop, written: written, reqBody: r.Body, keep: keep}
			return resp, nil
		}
		stop()
		c.Close()
		if written != nil {
			r.Body.Close()
			<-written // the body's reader is the pipeline's again (proxyProblem reads its error)
		}
		s.upstreams.done(c, false)
		if r.Context().Err() != nil || !retryable(c, idempotent, streamed, err) {
			return nil, err
		}
	}
}

// writeRequest writes r on c; a failure closes c, so that the answer's
// read ends too.
func writeRequest(r *http.Request, c *upConn) error {
	err := c.write(func(bw *bufio.Writer) error { return r.Write(bw) })
	if err != nil {
		c.Close()
	}
	return err
}

// readResponse reads the answer's head (at most maxHeader bytes), past
// any interim (1xx) answer: the edge passes none on.
func readResponse(c *upConn, r *http.Request) (*http.Response, error) {
	c.head.n = maxHeader
	defer func() { c.head.n = -1 }()
	for range 16 {
		resp, err := http.ReadResponse(c.br, r)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			return resp, nil
		}
	}
	return nil, errors.New("the app sent too many interim answers")
}

// upBody is an answer's body read from a pooled connection: read to its
// end it gives the connection back; closed before, it closes it.
type upBody struct {
	io.ReadCloser
	c       *upConn
	s       *Server
	stop    func() bool
	written chan error // nil: the request was written before the answer was read
	reqBody io.Closer
	keep    bool
	eof     bool
	once    sync.Once
}

func (b *upBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.eof = true
		b.done()
	}
	return n, err
}

func (b *upBody) Close() error {
	if !b.eof {
		b.c.Close() // the rest of the answer is not read: the connection goes
	}
	err := b.ReadCloser.Close() // before done: it may read the connection's reader
	b.done()
	return err
}

func (b *upBody) done() {
	b.once.Do(func() {
		keep := b.stop() && b.keep && b.eof // stop: the context's close did not run
		if b.written != nil {
			select {
			case err := <-b.written:
				keep = keep && err == nil
			default:
				keep = false // still writing: the app answered before it read the body
				b.reqBody.Close()
			}
		}
		if !keep {
			b.c.Close()
		}
		b.s.upstreams.done(b.c, keep)
	})
}
