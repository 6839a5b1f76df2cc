package edge

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// framingConn guards an HTTP/1.1 connection against request smuggling: it
// reads ahead of the HTTP/1.1 server, holds each request head back until
// it is whole, and refuses a head that the server and an upstream could
// read two ways. HTTP parsers differ on exactly these (net/http accepts
// obs-fold, fasthttp ends lines at a bare LF), and a proxy that reads a
// message differently from its upstream is how requests get smuggled, so
// the guard admits only one spelling of each thing that frames a message:
//
//   - lines end in CRLF: a bare LF or a bare CR anywhere in the head is
//     refused, and so is a NUL;
//   - the request line is METHOD SP TARGET SP HTTP/1.x, with a token method;
//   - a header is NAME ":" VALUE with a token name (no space before the
//     colon) and no obs-fold;
//   - the body is framed once: Content-Length (digits only, given once) or
//     Transfer-Encoding: chunked (given once, HTTP/1.1 only), never both;
//   - chunk-size lines are hex digits (an extension after ';' allowed),
//     and every chunk line ends in CRLF.
//
// It then follows the body (Content-Length bytes, or chunks) to find the
// next head. It stops looking only when the edge has joined the
// connection to a sandbox's (passThrough, after a 101): what follows is
// not HTTP. A refusal is answered by the guard itself (400, or 431 for a
// head too large), once: Read then fails, and so does every later Write,
// so the HTTP server's own error answer never follows it.
type framingConn struct {
	net.Conn
	out []byte // checked bytes not yet handed to the reader

	head     []byte // the head being read
	state    int
	left     int64 // body bytes left (stBody, stChunk)
	line     []byte
	refuse   *framingError
	answered bool // the refusal went out: nothing more is written
	heads    int  // request heads handed to the reader

	// headTimeout bounds a head from its first byte (ReadHeaderTimeout):
	// the server, handed nothing until the head is whole, cannot. 0: no
	// bound of the guard's own.
	headTimeout time.Duration
	deadline    time.Time // the read deadline the server last set
	headSince   time.Time // when the first byte of the head being read came

	linger atomic.Bool // Close reads the client out first (lingerOnClose)
}

// lingerFor bounds how long a lingering Close reads what a client still
// sends; lingerAtLeast is how long it keeps the connection open, read or
// not.
const (
	lingerFor     = 5 * time.Second
	lingerAtLeast = time.Second
)

// lingerOnClose has Close read away what the client still sends (up to
// maxDrainedBody, for lingerFor) before it closes: closed with bytes
// unread, a connection ends in a reset, and a reset throws away the
// answer the client has not read yet. For a request answered with its
// body on the way that no one read (Expect: 100-continue sent with the
// body anyway, a body past the drain bound, an app that answered early).
// A client that sends more than the bound still has lingerAtLeast from
// the close to take the answer: unread, its sends stall rather than
// reset (a client that writes fast sent 16 MiB in milliseconds).
func (c *framingConn) lingerOnClose() { c.linger.Store(true) }

func (c *framingConn) Close() error {
	if !c.linger.Swap(false) {
		return c.Conn.Close()
	}
	// Owned by the connection, and bounded: the deadline ends it.
	go func() {
		start := time.Now()
		c.Conn.SetReadDeadline(start.Add(lingerFor))
		io.CopyN(io.Discard, c.Conn, maxDrainedBody)
		time.Sleep(lingerAtLeast - time.Since(start))
		c.Conn.Close()
	}()
	return nil
}

const (
	stHead = iota
	stBody
	stChunkSize
	stChunk
	stChunkEnd
	stTrailer
	stOpaque
)

// maxHead bounds a request head; the HTTP server's buffer is the same size.
const maxHead = 64<<10 + 4096

// framingError is the guard's refusal of a request.
type framingError struct {
	status int // 400, or 431 for a head too large
	reason string
}

func (e *framingError) Error() string { return "request refused: " + e.reason }

var (
	errAmbiguous   = &framingError{400, "ambiguous framing"}
	errHeadLarge   = &framingError{431, "request head too large"}
	errHeadTimeout = &framingError{408, "request head not sent in time"}
)

// answer writes the refusal's response, once.
func (c *framingConn) answer() error {
	if !c.answered {
		c.answered = true
		body := c.refuse.Error() + "\r\n"
		c.Conn.Write([]byte("HTTP/1.1 " + itoa(c.refuse.status) + " " + http.StatusText(c.refuse.status) +
			"\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\nContent-Length: " + itoa(len(body)) + "\r\n\r\n" + body))
	}
	return c.refuse
}

func (c *framingConn) Write(p []byte) (int, error) {
	if c.answered {
		return 0, net.ErrClosed
	}
	return c.Conn.Write(p)
}

// SetReadDeadline notes the server's deadline: the guard's own bound on
// a head (headTimeout) never extends it.
func (c *framingConn) SetReadDeadline(t time.Time) error {
	c.deadline = t
	return c.Conn.SetReadDeadline(t)
}

func (c *framingConn) SetDeadline(t time.Time) error {
	c.deadline = t
	return c.Conn.SetDeadline(t)
}

// isTimeout reports whether err is a read deadline's.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func (c *framingConn) Read(p []byte) (int, error) {
	if c.state == stOpaque && len(c.out) == 0 {
		return c.Conn.Read(p) // passed through: nothing to look at
	}
	if len(c.out) == 0 && len(c.head) == 0 && c.left > 0 && (c.state == stBody || c.state == stChunk) {
		// Body bytes need no look: read them straight into p.
		if int64(len(p)) > c.left {
			p = p[:c.left]
		}
		n, err := c.Conn.Read(p)
		c.feedBody(int64(n))
		return n, err
	}
	for len(c.out) == 0 {
		if c.refuse != nil {
			return 0, c.answer()
		}
		if c.headTimeout > 0 && c.state == stHead && len(c.head) > 0 {
			// A head began: it has headTimeout to end, however long the
			// server would wait for it (IdleTimeout), and never longer
			// than the server would.
			d := c.headSince.Add(c.headTimeout)
			if !c.deadline.IsZero() && c.deadline.Before(d) {
				d = c.deadline
			}
			c.Conn.SetReadDeadline(d)
		}
		err := c.readFeed()
		if len(c.out) == 0 && c.refuse != nil {
			return 0, c.answer()
		}
		if len(c.out) == 0 && err != nil {
			if c.state == stHead && isTimeout(err) {
				if len(c.head) == 0 {
					// Between requests, nothing of the next one came:
					// the connection ends without a byte, which a client
					// that reused it takes as the cue to retry on a new
					// one. An answer would be read as the answer to the
					// request it is sending.
					return 0, io.EOF
				}
				c.refuse = errHeadTimeout // part of a head: its answer
				return 0, c.answer()
			}
			return 0, err
		}
	}
	n := copy(p, c.out)
	c.out = c.out[n:]
	return n, nil
}

// readBufs are the guard's read buffers, one per read under way: feed
// copies what it keeps, so a connection holds none between reads, and
// one that reads once (a handshake, then its end) allocates none.
var readBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// readFeed reads once from the connection and feeds what came.
func (c *framingConn) readFeed() error {
	b := readBufs.Get().(*[]byte)
	defer readBufs.Put(b)
	n, err := c.Conn.Read(*b)
	if n > 0 {
		c.feed((*b)[:n])
	}
	return err
}

// alive reads ahead for up to wait and reports whether the client is
// still there: false once it closed its side. What it reads is kept for
// the server's next reads (the guard buffers all it reads). Only while
// nothing else reads the connection: a request held with its body
// already read.
func (c *framingConn) alive(wait time.Duration) bool {
	if c.refuse != nil {
		return false
	}
	c.Conn.SetReadDeadline(time.Now().Add(wait))
	err := c.readFeed()
	c.Conn.SetReadDeadline(time.Time{})
	var ne net.Error
	return err == nil || errors.As(err, &ne) && ne.Timeout()
}

// passThrough stops the guard: the connection is joined to a sandbox's
// and what follows is the sandbox's protocol. Bytes held back as the
// start of a next head are released.
func (c *framingConn) passThrough() {
	c.out = append(c.out, c.head...)
	c.head, c.state = nil, stOpaque
}

// drained reports whether the reader has been handed exactly the heads of
// the requests it has read (n) and no byte after them: nothing of the
// connection waits in its buffer.
func (c *framingConn) drained(n int) bool {
	return c.state == stHead && c.heads == n
}

// feed runs the framing state machine over b, moving checked bytes to out.
func (c *framingConn) feed(b []byte) {
	for len(b) > 0 && c.refuse == nil {
		switch c.state {
		case stOpaque:
			c.out = append(c.out, b...)
			return
		case stHead:
			old := len(c.head)
			if old == 0 {
				c.headSince = time.Now()
			}
			c.head = append(c.head, b...)
			b = nil
			from := max(old-3, 0)
			end := bytes.Index(c.head[from:], []byte("\r\n\r\n"))
			if end < 0 {
				if len(c.head) > maxHead {
					c.refuse = errHeadLarge
				} else if !cleanFrom(c.head, old) {
					c.refuse = errAmbiguous // no need to wait for the rest
				}
				return
			}
			end += from
			head, rest := c.head[:end+4], c.head[end+4:]
			c.head = nil
			if len(head) > maxHead {
				c.refuse = errHeadLarge
				return
			}
			if !c.checkHead(head) {
				c.refuse = errAmbiguous
				return
			}
			c.out = append(c.out, head...)
			c.heads++
			b = rest
		case stBody, stChunk:
			k := min(int64(len(b)), c.left)
			c.out = append(c.out, b[:k]...)
			b = b[k:]
			c.feedBody(k)
		case stChunkSize, stChunkEnd, stTrailer:
			// A line is held back until it is whole and checked.
			i := bytes.IndexByte(b, '\n')
			if i < 0 {
				c.line = append(c.line, b...)
				if len(c.line) > 4096 {
					c.refuse = errAmbiguous
				}
				return
			}
			c.line = append(c.line, b[:i+1]...)
			b = b[i+1:]
			line := c.line
			c.line = c.line[:0]
			if len(line) < 2 || line[len(line)-2] != '\r' || !cleanLines(line) {
				c.refuse = errAmbiguous // a chunk line ending in a bare LF
				return
			}
			if c.nextLine(string(line[:len(line)-2])); c.refuse == nil {
				c.out = append(c.out, line...)
			}
		}
	}
}

// cleanLines reports whether b has no NUL, and no CR or LF outside a
// CRLF pair (a CR at the very end may still be followed by its LF).
func cleanLines(b []byte) bool { return cleanFrom(b, 0) }

// cleanFrom is cleanLines for the bytes of b from index from on, the
// bytes before them already checked.
func cleanFrom(b []byte, from int) bool {
	if from > 0 && b[from-1] == '\r' && from < len(b) && b[from] != '\n' {
		return false
	}
	for i := from; i < len(b); i++ {
		switch ch := b[i]; ch {
		case 0:
			return false
		case '\r':
			if i+1 < len(b) && b[i+1] != '\n' {
				return false
			}
		case '\n':
			if i == 0 || b[i-1] != '\r' {
				return false
			}
		}
	}
	return true
}

// feedBody notes that k body bytes went by.
func (c *framingConn) feedBody(k int64) {
	c.left -= k
	if c.left == 0 {
		if c.state == stBody {
			c.state = stHead
		} else {
			c.state = stChunkEnd
		}
	}
}

// nextLine handles a whole line of the chunked framing, without its CRLF.
func (c *framingConn) nextLine(line string) {
	switch c.state {
	case stChunkSize:
		size, _, _ := strings.Cut(line, ";")
		n, ok := parseHex(strings.TrimRight(size, " \t"))
		if !ok {
			c.refuse = errAmbiguous
			return
		}
		if n == 0 {
			c.state = stTrailer
			return
		}
		c.state, c.left = stChunk, n
	case stChunkEnd:
		if line != "" {
			c.refuse = errAmbiguous
			return
		}
		c.state = stChunkSize
	case stTrailer:
		if line == "" {
			c.state = stHead
		}
	}
}

// parseHex reads a chunk size: 1 to 15 hex digits, nothing else (no sign,
// no 0x, no spaces before).
func parseHex(s string) (int64, bool) {
	if s == "" || len(s) > 15 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		var d byte
		switch ch := s[i]; {
		case ch >= '0' && ch <= '9':
			d = ch - '0'
		case ch >= 'a' && ch <= 'f':
			d = ch - 'a' + 10
		case ch >= 'A' && ch <= 'F':
			d = ch - 'A' + 10
		default:
			return 0, false
		}
		n = n<<4 | int64(d)
	}
	return n, true
}

// parseDigits reads a Content-Length: 1 to 18 decimal digits, nothing else.
func parseDigits(s string) (int64, bool) {
	if s == "" || len(s) > 18 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int64(s[i]-'0')
	}
	return n, true
}

// isToken reports whether s is an HTTP token (RFC 9110 §5.6.2): a header
// name or a method.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !tchar[s[i]] {
			return false
		}
	}
	return true
}

var tchar = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()

// checkHead validates a request head and sets the state for its body.
func (c *framingConn) checkHead(head []byte) bool {
	if !cleanLines(head) {
		return false
	}
	lines := strings.Split(string(head[:len(head)-4]), "\r\n")
	method, rest, ok1 := strings.Cut(lines[0], " ")
	target, version, ok2 := strings.Cut(rest, " ")
	if !ok1 || !ok2 || !isToken(method) || target == "" || strings.ContainsAny(target, " \t") ||
		(version != "HTTP/1.1" && version != "HTTP/1.0") {
		return false
	}
	var cl []string
	te := ""
	for _, l := range lines[1:] {
		name, value, ok := strings.Cut(l, ":")
		if !ok || !isToken(name) {
			return false // obs-fold, a space before the colon, or no colon
		}
		value = strings.Trim(value, " \t")
		switch strings.ToLower(name) {
		case "content-length":
			cl = append(cl, value)
		case "transfer-encoding":
			if te != "" {
				return false
			}
			te = value
		}
	}
	switch {
	case te != "" && len(cl) > 0, len(cl) > 1:
		return false
	case te != "":
		if !strings.EqualFold(te, "chunked") || version != "HTTP/1.1" {
			return false // nothing else is supported, and HTTP/1.0 has no chunks
		}
		c.state = stChunkSize
	case len(cl) == 1:
		n, ok := parseDigits(cl[0])
		if !ok {
			return false
		}
		c.state, c.left = stBody, n
		if n == 0 {
			c.state = stHead
		}
	default:
		c.state = stHead
	}
	return true
}
