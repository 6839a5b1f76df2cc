package tunnel_test

import (
	"context"
	"net"
	"runtime"
	"testing"
	"time"

	"froog.tech/froog/internal/wait"
)

// An open channel costs the tunnel one goroutine, answering its requests,
// not x/crypto/ssh's two (that one and one copying its extended data into
// io.Discard, with an 8 KiB buffer): an idle websocket holds its channel
// for hours.
func TestChannelGoroutines(t *testing.T) {
	tun, id, _, _ := openSSHTunnel(t)
	// An app that takes connections and says nothing.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	ctx := context.Background()
	first, err := tun.DialContext(ctx, id, port) // the SSH connection's own goroutines start
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	const n = 50
	before := runtime.NumGoroutine()
	for range n {
		c, err := tun.DialContext(ctx, id, port)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	var now int
	if !wait.Until(5*time.Second, func() bool { now = runtime.NumGoroutine(); return now-before <= n }) {
		t.Fatalf("%d channels added %d goroutines, want one each", n, now-before)
	}
}
