// Package loopback serves test apps on 127.0.0.1: each accepted
// connection goes to its own goroutine until the test ends.
package loopback

import (
	"net"
	"testing"
)

// Serve listens on a free loopback port, hands every connection to handle
// (which must close it), and returns the port. The listener closes when
// tb's test ends.
func Serve(tb testing.TB, handle func(net.Conn)) int {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go handle(c)
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// FreePort finds a loopback port that nobody listens on (for a server the
// test starts another way, or an address nothing should answer on).
func FreePort(tb testing.TB) int {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
