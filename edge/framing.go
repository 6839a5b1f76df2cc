package edge

import (
	"bytes"
	"errors"
	"net"
	"strconv"
	"strings"
)

// framingConn guards an HTTP/1.1 connection against request smuggling: it
// reads ahead of the HTTP/1.1 server, holds each request head back until
// it is whole, and refuses (400, then close) a head that frames its body
// two ways (Content-Length and Transfer-Encoding), gives Content-Length
// more than once, or folds a header onto the next line (obs-fold). HTTP
// servers differ on these (net/http accepts all three), and a proxy that
// reads a message differently from its upstream is how requests get
// smuggled; the guard makes the edge's rule its own, whatever the server. It then follows the
// body (Content-Length bytes, or chunks) to find the next head. After a
// request asking for an upgrade it stops looking: what follows is not
// HTTP.
type framingConn struct {
	net.Conn
	out []byte // checked bytes not yet handed to the reader
	buf []byte // read buffer, reused

	head     []byte // the head being read
	state    int
	left     int64 // body bytes left (stBody, stChunk)
	line     []byte
	rejected bool
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

const maxHead = 64<<10 + 4096

var errRejected = errors.New("request refused: ambiguous framing")

func (c *framingConn) Read(p []byte) (int, error) {
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
		if c.rejected {
			return 0, errRejected
		}
		if c.buf == nil {
			c.buf = make([]byte, 32<<10)
		}
		n, err := c.Conn.Read(c.buf)
		if n > 0 {
			c.feed(c.buf[:n])
		}
		if c.rejected {
			c.Conn.Write([]byte("HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\nContent-Length: 36\r\n\r\nrequest refused: ambiguous framing\r\n"))
			return 0, errRejected
		}
		if len(c.out) == 0 && err != nil {
			return 0, err
		}
	}
	n := copy(p, c.out)
	c.out = c.out[n:]
	return n, nil
}

// feed runs the framing state machine over b, moving checked bytes to out.
func (c *framingConn) feed(b []byte) {
	for len(b) > 0 && !c.rejected {
		switch c.state {
		case stOpaque:
			c.out = append(c.out, b...)
			return
		case stHead:
			c.head = append(c.head, b...)
			b = nil
			end := bytes.Index(c.head, []byte("\r\n\r\n"))
			if end < 0 {
				if len(c.head) > maxHead {
					// Too big to be ours to judge: the HTTP server refuses it.
					c.out, c.head, c.state = append(c.out, c.head...), nil, stOpaque
				}
				return
			}
			head, rest := c.head[:end+4], c.head[end+4:]
			c.head = nil
			if !c.checkHead(head) {
				c.rejected = true
				return
			}
			c.out = append(c.out, head...)
			b = rest
		case stBody, stChunk:
			k := min(int64(len(b)), c.left)
			c.out = append(c.out, b[:k]...)
			b = b[k:]
			c.feedBody(k)
		case stChunkSize, stChunkEnd, stTrailer:
			i := bytes.IndexByte(b, '\n')
			if i < 0 {
				c.line = append(c.line, b...)
				c.out = append(c.out, b...)
				if len(c.line) > 4096 {
					c.rejected = true
				}
				return
			}
			c.line = append(c.line, b[:i+1]...)
			c.out = append(c.out, b[:i+1]...)
			b = b[i+1:]
			line := strings.TrimRight(string(c.line), "\r\n")
			c.line = c.line[:0]
			c.nextLine(line)
		}
	}
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

// nextLine handles a whole line of the chunked framing.
func (c *framingConn) nextLine(line string) {
	switch c.state {
	case stChunkSize:
		size, _, _ := strings.Cut(line, ";")
		n, err := strconv.ParseInt(strings.TrimSpace(size), 16, 64)
		if err != nil || n < 0 {
			c.rejected = true
			return
		}
		if n == 0 {
			c.state = stTrailer
			return
		}
		c.state, c.left = stChunk, n
	case stChunkEnd:
		if line != "" {
			c.rejected = true
			return
		}
		c.state = stChunkSize
	case stTrailer:
		if line == "" {
			c.state = stHead
		}
	}
}

// checkHead validates a request head and sets the state for its body.
func (c *framingConn) checkHead(head []byte) bool {
	lines := strings.Split(strings.TrimSuffix(string(head), "\r\n\r\n"), "\r\n")
	var cl []string
	te, upgrade := "", false
	for _, l := range lines[1:] {
		if l == "" || l[0] == ' ' || l[0] == '\t' {
			return false // obs-fold
		}
		name, value, ok := strings.Cut(l, ":")
		if !ok {
			return false
		}
		value = strings.TrimSpace(value)
		switch strings.ToLower(name) {
		case "content-length":
			cl = append(cl, value)
		case "transfer-encoding":
			if te != "" {
				return false
			}
			te = strings.ToLower(value)
		case "upgrade":
			upgrade = true
		}
	}
	switch {
	case te != "" && len(cl) > 0, len(cl) > 1:
		return false
	case te != "":
		if te != "chunked" {
			return false // net/http supports nothing else either
		}
		c.state = stChunkSize
	case len(cl) == 1:
		n, err := strconv.ParseInt(cl[0], 10, 64)
		if err != nil || n < 0 {
			return false
		}
		c.state, c.left = stBody, n
		if n == 0 {
			c.state = stHead
		}
	default:
		c.state = stHead
	}
	if upgrade {
		c.state = stOpaque
	}
	return true
}
