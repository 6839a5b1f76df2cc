package qemu

import (
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"froog.tech/froog/internal/testkit"
)

// slowConn is a server's side of a connection whose first write after
// the greeting (its key exchange's start) waits delay: a booting guest's
// sshd under TCG.
type slowConn struct {
	net.Conn
	delay  time.Duration
	writes int
}

func (c *slowConn) Write(p []byte) (int, error) {
	if c.writes++; c.writes == 2 {
		time.Sleep(c.delay)
	}
	return c.Conn.Write(p)
}

// The probe waits past its patience for a server that has greeted, and
// not for one that has not; and it checks the host key either way.
func TestProbeWaitsForAGreetedKeyExchange(t *testing.T) {
	t.Parallel()
	host := testkit.NewKey(t)
	pinned := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(host.PublicKey())))
	other := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(testkit.NewKey(t).PublicKey())))
	cfg := &ssh.ServerConfig{PublicKeyCallback: func(ssh.ConnMetadata, ssh.PublicKey) (*ssh.Permissions, error) {
		return nil, errors.New("no one gets in")
	}}
	cfg.AddHostKey(host)
	serve := func(t *testing.T, greet bool) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		t.Cleanup(func() { ln.Close(); wg.Wait() })
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer c.Close()
					if !greet { // accepted, and nothing said: user-mode networking before sshd listens
						c.SetReadDeadline(time.Now().Add(2 * kexWait))
						c.Read(make([]byte, 1))
						return
					}
					c.SetDeadline(time.Now().Add(10 * time.Second))
					ssh.NewServerConn(&slowConn{Conn: c, delay: 900 * time.Millisecond}, cfg)
				}()
			}
		}()
		return ln.Addr().String()
	}
	// A patience of 400 ms stands for the driver's 1 s: the slow server's
	// key exchange takes 900 ms past its greeting.
	const patience = 400 * time.Millisecond
	slow := serve(t, true)
	if !sshAnswers(slow, pinned, patience) {
		t.Error("a server that greeted and took 900 ms more for its key exchange: the probe gave up at its 400 ms patience")
	}
	if sshAnswers(slow, other, patience) {
		t.Error("a server with another host key answered")
	}
	silent := serve(t, false)
	began := time.Now()
	if sshAnswers(silent, pinned, patience) || time.Since(began) >= kexWait {
		t.Errorf("a server that never greeted: answered, or the probe waited %v, a greeted one's time", time.Since(began))
	}
}
