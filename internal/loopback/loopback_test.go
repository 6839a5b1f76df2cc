package loopback

import (
	"net"
	"strconv"
	"testing"
)

// FreePort's ports are below the ephemeral range, bindable, and never
// handed out twice by one process.
func TestFreePort(t *testing.T) {
	lo, hi := freeRange()
	if lo < 1024 || hi-lo < 1024 {
		t.Fatalf("range %d-%d", lo, hi)
	}
	seen := map[int]bool{}
	for range 200 {
		port := FreePort(t)
		if port < lo || port >= hi || seen[port] {
			t.Fatalf("port %d: outside %d-%d, or given twice", port, lo, hi-1)
		}
		seen[port] = true
	}
	// What bind(0) gives is never in the range.
	for range 20 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		if port >= lo && port < hi {
			t.Fatalf("bind(0) gave %d, inside FreePort's range %d-%d", port, lo, hi-1)
		}
	}
	// A port it gives can be bound.
	p := FreePort(t)
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
	if err != nil {
		t.Fatalf("port %d from FreePort: %v", p, err)
	}
	ln.Close()
}
