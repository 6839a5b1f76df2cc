package edge

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// A read deadline that hits between requests, with nothing of the next
// one read, ends the connection as EOF and writes nothing (the HTTP/1.1
// server then closes it quietly); one that hits within a head is answered
// 408; one within a body stays the deadline's error, for the body's
// reader to answer.
func TestFramingTimeouts(t *testing.T) {
	t.Parallel()
	t.Run("between requests", func(t *testing.T) {
		client, server := net.Pipe()
		defer client.Close()
		fc := &framingConn{Conn: server, headTimeout: time.Hour}
		fc.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		if n, err := fc.Read(make([]byte, 100)); n != 0 || err != io.EOF {
			t.Fatalf("an idle connection's deadline: %d, %v; want 0, EOF", n, err)
		}
		server.Close()
		client.SetReadDeadline(time.Now().Add(10 * time.Second))
		if b, _ := io.ReadAll(client); len(b) > 0 {
			t.Fatalf("the guard wrote %q to an idle connection", b)
		}
	})
	t.Run("within a head", func(t *testing.T) {
		client, server := net.Pipe()
		defer client.Close()
		// The server would wait an hour (its idle timeout); the head has
		// 20 ms from its first byte.
		fc := &framingConn{Conn: server, headTimeout: 20 * time.Millisecond}
		fc.SetReadDeadline(time.Now().Add(time.Hour))
		go client.Write([]byte("GET / HTTP/1.1\r\nHost: a\r\n"))
		got := make(chan string, 1)
		go func() {
			b, _ := io.ReadAll(client)
			got <- string(b)
		}()
		n, err := fc.Read(make([]byte, 100))
		if n != 0 || err == nil {
			t.Fatalf("the server read %d bytes of a head that never ended", n)
		}
		server.Close()
		if reply := <-got; !strings.HasPrefix(reply, "HTTP/1.1 408 ") {
			t.Fatalf("reply %q, want 408", reply)
		}
	})
	t.Run("within a body", func(t *testing.T) {
		client, server := net.Pipe()
		defer client.Close()
		fc := &framingConn{Conn: server, headTimeout: time.Hour}
		go client.Write([]byte("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nx"))
		head := "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\n"
		b := make([]byte, len(head)+1)
		if _, err := io.ReadFull(fc, b); err != nil {
			t.Fatal(err)
		}
		fc.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		if _, err := fc.Read(b); err == io.EOF || !isTimeout(err) {
			t.Fatalf("a stalled body: %v, want the deadline's error", err)
		}
	})
}
