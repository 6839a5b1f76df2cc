package tunnel_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// The tunnel against the peer a user would reach for, `ssh -L` from
// OpenSSH, to the same OpenSSH server and the same target, in the same
// run. Compare the tunnel/ and ssh-L/ lines of one run (make bench).

// source is the target: every connection gets an endless stream of bytes,
// or, when it first sends "e", an echo.
func source(b *testing.B) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	chunk := make([]byte, 256<<10)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
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
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// sshL starts `ssh -L` to the OpenSSH server and returns a dial function
// for its local end.
func sshL(b *testing.B, srv *openSSH, pemKey []byte, target int) func() (net.Conn, error) {
	if _, err := exec.LookPath("ssh"); err != nil {
		b.Skip("OpenSSH's ssh is not installed (deploy/testdeps.sh installs openssh-client)")
	}
	keyFile := filepath.Join(srv.dir, "client_key")
	os.WriteFile(keyFile, pemKey, 0o600)
	known := filepath.Join(srv.dir, "known_hosts")
	host, port, _ := net.SplitHostPort(srv.addr)
	os.WriteFile(known, []byte(fmt.Sprintf("[%s]:%s %s\n", host, port, srv.hostKey)), 0o600)
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	local := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command("ssh", "-N", "-p", port, "-i", keyFile, "-o", "UserKnownHostsFile="+known, "-o", "StrictHostKeyChecking=yes",
		"-o", "BatchMode=yes", "-o", "ExitOnForwardFailure=yes",
		"-L", fmt.Sprintf("127.0.0.1:%d:127.0.0.1:%d", local, target), "root@"+host)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := "127.0.0.1:" + strconv.Itoa(local)
	for deadline := time.Now().Add(10 * time.Second); ; {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("ssh -L never listened")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return func() (net.Conn, error) { return net.Dial("tcp", addr) }
}

type dialer func() (net.Conn, error)

// paths returns the two ways to the same target.
func paths(b *testing.B, target int) map[string]dialer {
	signer, pemKey := newPEMKey(b)
	srv := startOpenSSH(b, signer.PublicKey())
	tun, id := tunnelTo(b, srv, signer)
	return map[string]dialer{
		"tunnel": func() (net.Conn, error) { return tun.DialContext(context.Background(), id, target) },
		"ssh-L":  sshL(b, srv, pemKey, target),
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
