package testkit

import (
	"net"
	"strconv"
	"testing"

	"golang.org/x/crypto/ssh"

	"froog.tech/froog/internal/loopback"
)

// FakeSSHServer is an SSH server on loopback that takes any client and
// hands each channel it accepts, with the channel's requests, to serve
// (in a goroutine of its own); it returns a client logged in to it,
// closed when the test ends.
func FakeSSHServer(tb testing.TB, serve func(ch ssh.Channel, reqs <-chan *ssh.Request)) *ssh.Client {
	tb.Helper()
	hostKey := NewKey(tb)
	cfg := &ssh.ServerConfig{NoClientAuth: true}
	cfg.AddHostKey(hostKey)
	port := loopback.Serve(tb, func(nc net.Conn) {
		_, chans, reqs, err := ssh.NewServerConn(nc, cfg)
		if err != nil {
			nc.Close()
			return
		}
		go ssh.DiscardRequests(reqs)
		for nch := range chans {
			ch, chReqs, err := nch.Accept()
			if err != nil {
				continue
			}
			go serve(ch, chReqs)
		}
	})
	c, err := ssh.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), &ssh.ClientConfig{User: "user", HostKeyCallback: ssh.FixedHostKey(hostKey.PublicKey())})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}
