package edge_test

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"froog.tech/froog/edge"
)

// A connection that waits for its next request past the edge's timeouts
// is closed without a byte: a client that reuses a keep-alive connection
// the edge is closing retries on a fresh one, while a stray answer (a
// bare 400) would be read as the answer to the request it just sent.
// Over HTTP/1.1 that holds for a connection that never sent a request
// (ReadHeaderTimeout) and one that did (IdleTimeout); over HTTP/2 the edge
// may say GOAWAY.
func TestIdleConnClosedQuietly(t *testing.T) {
	t.Parallel()
	r := newRig(t, embeddedStore(t))
	r.host("idle-1-kkkkkk", echo(t), true, "")
	host := "idle-1-kkkkkk." + domain
	views := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "view") })
	// Two seconds each: a loaded machine's TLS handshake and two requests
	// fit in them.
	addr, plain, _ := r.startEdge(r.st, func(o *edge.Options) {
		o.ReadHeaderTimeout, o.IdleTimeout, o.Views = 2*time.Second, 2*time.Second, views
	})
	view := "desktop--0123456789abcdef." + domain
	// dial connects to the HTTPS listener for sni, or to the plain-HTTP
	// one when sni is "".
	dial := func(t *testing.T, sni, proto string) net.Conn {
		var c net.Conn
		var err error
		if sni == "" {
			c, err = net.Dial("tcp", plain)
		} else {
			c, err = tls.Dial("tcp", addr, &tls.Config{RootCAs: r.ca.Pool(), ServerName: sni, NextProtos: []string{proto}})
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		// A bounded wait: the edge closes it after two seconds.
		c.SetReadDeadline(time.Now().Add(15 * time.Second))
		return c
	}
	// rest reads what the edge sends before it closes the connection.
	rest := func(t *testing.T, what string, r io.Reader) {
		t.Helper()
		b, err := io.ReadAll(r)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("%s: the edge never closed the idle connection", what)
		}
		if len(b) > 0 {
			t.Fatalf("%s: the edge sent %q on an idle connection as it closed it, want nothing", what, b)
		}
	}

	// Over HTTP/1.1: a URL (fasthttp behind the guard), a view (net/http),
	// and the plain-HTTP listener's redirects (net/http).
	for _, tt := range []struct{ name, sni, host string }{
		{"url", host, host},
		{"view", view, view},
		{"redirect", "", host},
	} {
		t.Run("h1 "+tt.name+" never used", func(t *testing.T) {
			t.Parallel() // each on a connection of its own, as all below
			rest(t, "a connection that sent no request", dial(t, tt.sni, "http/1.1"))
		})
		t.Run("h1 "+tt.name+" keep-alive", func(t *testing.T) {
			t.Parallel()
			c := dial(t, tt.sni, "http/1.1")
			br := bufio.NewReader(c)
			for i := range 2 {
				fmt.Fprintf(c, "GET /%d HTTP/1.1\r\nHost: %s\r\n\r\n", i, tt.host)
				res, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode >= 400 || res.Close {
					t.Fatalf("request %d: %d, close=%v", i, res.StatusCode, res.Close)
				}
			}
			rest(t, "a keep-alive connection after two requests", br)
		})
	}
	t.Run("h2", func(t *testing.T) {
		t.Parallel()
		c := dial(t, host, "h2")
		io.WriteString(c, http2.ClientPreface)
		fr := http2.NewFramer(c, c)
		if err := fr.WriteSettings(); err != nil {
			t.Fatal(err)
		}
		for {
			f, err := fr.ReadFrame()
			if err == io.EOF {
				return
			}
			if err != nil {
				t.Fatalf("an idle HTTP/2 connection: %v, want frames, then the connection closed", err)
			}
			switch f.(type) {
			case *http2.SettingsFrame, *http2.WindowUpdateFrame, *http2.GoAwayFrame:
			default:
				t.Fatalf("an idle HTTP/2 connection got %v", f)
			}
			if sf, ok := f.(*http2.SettingsFrame); ok && !sf.IsAck() {
				fr.WriteSettingsAck()
			}
		}
	})
}

// A client that dribbles the head of its next request on a keep-alive
// connection is cut off after ReadHeaderTimeout, as on a new connection,
// not after the idle timeout: the guard holds a partial head back from
// the HTTP/1.1 server, which sees nothing of it. What it is told, if
// anything, is 408, not 400.
func TestSlowHeadersOnKeepAlive(t *testing.T) {
	t.Parallel()
	r := newRig(t, embeddedStore(t))
	r.host("slowka-1-llllll", echo(t), true, "")
	host := "slowka-1-llllll." + domain
	short := r.shortHeaders() // IdleTimeout the default 2 min
	for _, used := range []bool{false, true} {
		c, err := tls.Dial("tcp", short, &tls.Config{RootCAs: r.ca.Pool(), ServerName: host, NextProtos: []string{"http/1.1"}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(15 * time.Second)) // a bounded wait, well under 2 min
		br := bufio.NewReader(c)
		if used {
			fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", host)
			res, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\n", host) // and never the blank line
		b, err := io.ReadAll(br)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("used=%v: the edge kept a client that never finished its headers", used)
		}
		if len(b) > 0 && !strings.HasPrefix(string(b), "HTTP/1.1 408 ") {
			t.Fatalf("used=%v: a head that never ended got %q, want 408 or nothing", used, b)
		}
	}
}

// A body that stops before its Content-Length, while the HTTP/1.1 server
// still reads its start ahead of the handler, is answered 408, as a body
// cut by the pace is (TestSlowBodyCut), not 400.
func TestStalledBodyStart(t *testing.T) {
	t.Parallel()
	r := newRig(t, embeddedStore(t))
	r.host("stall-1-mmmmmm", echo(t), true, "")
	host := "stall-1-mmmmmm." + domain
	c, err := tls.Dial("tcp", r.shortHeaders(), &tls.Config{RootCAs: r.ca.Pool(), ServerName: host, NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(15 * time.Second))                                 // a bounded wait
	fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: %s\r\nContent-Length: 100\r\n\r\nx", host) // and 99 bytes never
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	if !strings.HasPrefix(line, "HTTP/1.1 408 ") {
		t.Fatalf("a body that stalled got %q, want 408", line)
	}
}
