//go:build bench

package tunnel_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"

	"froog.tech/froog/internal/loopback"
	"froog.tech/froog/internal/testkit"
	"froog.tech/froog/tunnel/sshdtest"
)

// The tunnel against the peer a user would reach for, `ssh -L` from
// OpenSSH, to the same OpenSSH server and the same target, in the same
// run. Compare the tunnel/ and ssh-L/ lines of one run (make bench).

// source is the target: every connection gets an endless stream of bytes,
// or, when it first sends "e", an echo.
func source(b *testing.B) int {
	chunk := make([]byte, 256<<10)
	return loopback.Serve(b, func(c net.Conn) {
		defer c.Close()
		mode := make([]byte, 1)
		if _, err := io.ReadFull(c, mode); err != nil {
			return
		}
		if mode[0] == 'e' {
			io.Copy(c, c)
			return
		}
		for {
			if _, err := c.Write(chunk); err != nil {
				return
			}
		}
	})
}

type dialer func() (net.Conn, error)

// paths returns the two ways to the same target.
func paths(b *testing.B, target int) map[string]dialer {
	signer, pemKey := testkit.NewKeyPEM(b)
	srv := sshdtest.Start(b, signer.PublicKey())
	tun, id := tunnelTo(b, srv, signer)
	local := srv.Forward(b, pemKey, "127.0.0.1:"+strconv.Itoa(target))
	return map[string]dialer{
		"tunnel": func() (net.Conn, error) { return tun.DialContext(context.Background(), id, target) },
		"ssh-L":  func() (net.Conn, error) { return net.Dial("tcp", local) },
	}
}

// BenchmarkBulk: MB/s of downloads through one channel, and through 8 at
// once (b.N MiB in all).
func BenchmarkBulk(b *testing.B) {
	target := source(b)
	ways := paths(b, target)
	for _, name := range []string{"tunnel", "ssh-L"} {
		for _, channels := range []int{1, 8} {
			b.Run(fmt.Sprintf("%s/channels=%d", name, channels), func(b *testing.B) {
				conns := make([]net.Conn, channels)
				for i := range conns {
					c, err := ways[name]()
					if err != nil {
						b.Fatal(err)
					}
					c.Write([]byte("s"))
					conns[i] = c
					defer c.Close()
				}
				b.SetBytes(1 << 20)
				b.ResetTimer()
				var wg sync.WaitGroup
				for i, c := range conns {
					n := b.N / channels
					if i < b.N%channels {
						n++
					}
					wg.Add(1)
					go func() {
						defer wg.Done()
						if _, err := io.CopyN(io.Discard, c, int64(n)<<20); err != nil {
							b.Error(err)
						}
					}()
				}
				wg.Wait()
			})
		}
	}
}

// BenchmarkRoundTrip: small-message round trips through one channel.
func BenchmarkRoundTrip(b *testing.B) {
	target := source(b)
	ways := paths(b, target)
	for _, name := range []string{"tunnel", "ssh-L"} {
		b.Run(name, func(b *testing.B) {
			c, err := ways[name]()
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			c.Write([]byte("e"))
			msg, buf := make([]byte, 64), make([]byte, 64)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := c.Write(msg); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(c, buf); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "round-trips/s")
		})
	}
}
