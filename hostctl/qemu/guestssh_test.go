package qemu

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"froog.tech/froog/hostctl"
	"froog.tech/froog/internal/loopback"
	"froog.tech/froog/internal/testkit"
)

// A booting guest's sshd may take a login and then drop the connection
// before a session opens (it restarts): authorize asks again, and writes
// the keys once the guest takes the command.
func TestAuthorizeAsksAgainWhenTheSessionIsDropped(t *testing.T) {
	hostKey, control := testkit.NewKey(t), testkit.NewKey(t)
	cfg := &ssh.ServerConfig{NoClientAuth: true}
	cfg.AddHostKey(hostKey)
	var logins atomic.Int32
	got := make(chan string, 1)
	port := loopback.Serve(t, func(nc net.Conn) {
		defer nc.Close()
		_, chans, reqs, err := ssh.NewServerConn(nc, cfg)
		if err != nil {
			return
		}
		go ssh.DiscardRequests(reqs)
		if logins.Add(1) <= 2 {
			return // dropped after the login, before any session
		}
		for nch := range chans {
			ch, creqs, err := nch.Accept()
			if err != nil {
				return
			}
			go func() {
				for r := range creqs {
					r.Reply(r.Type == "exec", nil)
					if r.Type == "exec" {
						b, _ := io.ReadAll(ch)
						got <- string(b)
						ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Code uint32 }{0}))
						ch.Close()
					}
				}
			}()
		}
	})
	d := &Driver{o: Options{ControlKey: control, BootTimeout: 20 * time.Second, Logger: slog.New(slog.DiscardHandler)}}
	ep := hostctl.Endpoint{Host: "127.0.0.1", Port: port, HostKey: string(ssh.MarshalAuthorizedKey(hostKey.PublicKey()))}
	if err := d.authorize(context.Background(), ep, []string{"ssh-ed25519 AAAA key"}); err != nil {
		t.Fatalf("authorize: %v (after %d logins)", err, logins.Load())
	}
	if keys := <-got; strings.TrimSpace(keys) != "ssh-ed25519 AAAA key" {
		t.Errorf("the guest was given %q", keys)
	}
	if n := logins.Load(); n != 3 {
		t.Errorf("%d logins, want 3 (two dropped)", n)
	}
}
