// Package loopback serves test apps on 127.0.0.1: each accepted
// connection goes to its own goroutine until the test ends.
package loopback

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
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
//
// The port is below the kernel's ephemeral range, so nothing takes it
// between this call and the test's server binding it: a port bind(0)
// gives, once closed, can go to any process's next bind(0) or outgoing
// connection, and a test's server then failed to bind while something
// else answered on its port. Ports this process handed out are not
// handed out again; another test binary picking the same port at the
// same moment is a chance of one in 16384 per pair.
func FreePort(tb testing.TB) int {
	tb.Helper()
	lo, hi := freeRange()
	for range 1000 {
		port := lo + rand.IntN(hi-lo)
		if _, dup := given.LoadOrStore(port, true); dup {
			continue
		}
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		ln.Close()
		return port
	}
	tb.Fatalf("no free loopback port in %d-%d", lo, hi-1)
	return 0
}

// given holds the ports FreePort handed out.
var given sync.Map

// freeRange is the ports FreePort picks from: the 16384 below the start of
// the ephemeral range (net.ipv4.ip_local_port_range, 32768 by default),
// above the well-known services' ports. Read once.
var freeRange = sync.OnceValues(func() (lo, hi int) {
	hi = 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > 2048 {
				hi = n
			}
		}
	}
	return max(hi-16384, 1024), hi
})
