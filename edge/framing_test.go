package edge

import (
	"bytes"
	"net"
	"strings"
	"testing"
)

// run feeds raw into a framingConn and returns what it passes on, and
// whether it refused.
func runFraming(raw string, pieces int) (string, bool) {
	c := &framingConn{}
	b := []byte(raw)
	step := max(len(b)/max(pieces, 1), 1)
	for len(b) > 0 && c.refuse == nil {
		n := min(step, len(b))
		c.feed(b[:n])
		b = b[n:]
	}
	return string(c.out), c.refuse != nil
}

func TestFraming(t *testing.T) {
	t.Parallel()
	ok := []string{
		"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhelloGET /2 HTTP/1.1\r\nHost: a\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nX-Trailer: 1\r\n\r\nGET /2 HTTP/1.1\r\nHost: a\r\n\r\n",
		// A body that looks like a smuggled request is only a body.
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 42\r\n\r\nGET /x HTTP/1.1\r\nContent-Length: 1\r\n 2\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nX-Empty:\r\nX-Pad:  b \t\r\n\r\n",
		"GET / HTTP/1.0\r\nHost: a\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\nA;name=\"v\"\r\n0123456789\r\n0\r\n\r\n",
		"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n",
	}
	bad := []string{
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello",
		"GET / HTTP/1.1\r\nHost: a\r\nX-A: b\r\n c\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nX-A: b\r\n\tc\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n\r\nxGET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
		// A bare LF ends a line for fasthttp, not for the guard: refused
		// wherever it is, so that both read the same headers.
		"POST / HTTP/1.1\r\nHost: a\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n",
		"GET / HTTP/1.1\nHost: a\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\n\n",
		"GET / HTTP/1.1\r\nHost: a\rX: b\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\x00b\r\n\r\n",
		// Spellings that some parsers read as Transfer-Encoding or
		// Content-Length and others do not.
		"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding : chunked\r\nContent-Length: 3\r\n\r\nabc",
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length : 3\r\n\r\nabc",
		"POST / HTTP/1.1\r\nHost: a\r\n Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +3\r\n\r\nabc",
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3, 3\r\n\r\nabc",
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0x3\r\n\r\nabc",
		"POST / HTTP/1.0\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n+3\r\nabc\r\n0\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n 3\r\nabc\r\n0\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\nabc\r\n0\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\n0\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n1000000000000000\r\n",
		// The request line.
		"GET  / HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET / HTTP/1.1 \r\nHost: a\r\n\r\n",
		"GET / HTTP/2.0\r\nHost: a\r\n\r\n",
		"G(T / HTTP/1.1\r\nHost: a\r\n\r\n",
		"\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",
	}
	for _, pieces := range []int{1, 7, 1000} {
		for _, raw := range ok {
			out, rejected := runFraming(raw, pieces)
			if rejected || out != raw {
				t.Errorf("refused or changed (%d pieces): %q → %q", pieces, raw, out)
			}
		}
		for _, raw := range bad {
			if out, rejected := runFraming(raw, pieces); !rejected {
				t.Errorf("accepted (%d pieces): %q (passed %q)", pieces, raw, out)
			}
		}
	}
}

// A refused request gets a 400 and the connection ends; nothing of it
// reaches the server behind.
func TestFramingConnAnswers400(t *testing.T) {
	t.Parallel()
	client, server := net.Pipe()
	fc := &framingConn{Conn: server}
	go client.Write([]byte("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"))
	got := make(chan string, 1)
	go func() {
		b := make([]byte, 512)
		n, _ := client.Read(b)
		got <- string(b[:n])
	}()
	n, err := fc.Read(make([]byte, 100))
	if n != 0 || err == nil {
		t.Fatalf("the server read %d bytes of a refused request", n)
	}
	if reply := <-got; !strings.HasPrefix(reply, "HTTP/1.1 400 ") {
		t.Fatalf("reply %q", reply)
	}
	// The server's own error answer that follows is dropped: one answer.
	if _, err := fc.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\n")); err == nil {
		t.Fatal("a second answer was written after the refusal")
	}
}

// The guard follows a connection as HTTP until the edge joins it to a
// sandbox: an Upgrade header alone does not switch it off (it did, and
// a request after one was never checked again).
func TestFramingUpgrade(t *testing.T) {
	t.Parallel()
	c := &framingConn{}
	c.feed([]byte("GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"))
	c.feed([]byte("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n"))
	if c.refuse == nil {
		t.Fatal("a smuggling request after an Upgrade header passed")
	}
	c = &framingConn{}
	ws := "GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
	c.feed([]byte(ws + "\x81\x05hel"))
	if string(c.out) != ws {
		t.Fatalf("passed %q before the upgrade", c.out)
	}
	c.passThrough()
	c.feed([]byte("lo\r\n garbage\n"))
	if c.refuse != nil || string(c.out) != ws+"\x81\x05hello\r\n garbage\n" {
		t.Fatalf("after passThrough: refused %v, passed %q", c.refuse, c.out)
	}
}

// A head larger than the server's buffer is refused with 431 by the
// guard, not passed on unchecked.
func TestFramingHeadTooLarge(t *testing.T) {
	t.Parallel()
	c := &framingConn{}
	c.feed([]byte("GET / HTTP/1.1\r\nHost: a\r\nX: " + strings.Repeat("a", maxHead) + "\r\n\r\n"))
	if c.refuse == nil || c.refuse.status != 431 || len(c.out) != 0 {
		t.Fatalf("refuse %v, passed %d bytes", c.refuse, len(c.out))
	}
}

func FuzzFraming(f *testing.F) {
	f.Add("POST / HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcGET / HTTP/1.1\r\n\r\n", 3)
	f.Add("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n0\r\n\r\n", 5)
	f.Add("GET / HTTP/1.1\r\nA: b\r\n c\r\n\r\n", 1)
	f.Fuzz(func(t *testing.T, raw string, pieces int) {
		out, _ := runFraming(raw, pieces%64)
		// It only ever passes on a prefix of what it got, unchanged.
		if !bytes.HasPrefix([]byte(raw), []byte(out)) {
			t.Fatalf("passed %q, not a prefix of %q", out, raw)
		}
	})
}
