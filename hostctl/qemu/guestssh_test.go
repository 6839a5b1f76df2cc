package qemu

import (
	"context"
	"errors"
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

// fakeGuestSSHD is a guest's sshd on loopback that drops the first drop
// connections after their logins, before any session; after them it
// refuses sessions (refuse), or runs each command by sending its stdin
// to got and exiting 0. It counts the logins.
func fakeGuestSSHD(t *testing.T, drop int32, refuse bool, got chan<- string) (hostctl.Endpoint, *atomic.Int32) {
	hostKey := testkit.NewKey(t)
	cfg := &ssh.ServerConfig{NoClientAuth: true}
	cfg.AddHostKey(hostKey)
	logins := new(atomic.Int32)
	port := loopback.Serve(t, func(nc net.Conn) {
		defer nc.Close()
		_, chans, reqs, err := ssh.NewServerConn(nc, cfg)
		if err != nil {
			return
		}
		go ssh.DiscardRequests(reqs)
		if logins.Add(1) <= drop {
			return
		}
		for nch := range chans {
			if refuse {
				nch.Reject(ssh.Prohibited, "no sessions here")
				continue
			}
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
	return hostctl.Endpoint{Host: "127.0.0.1", Port: port, HostKey: string(ssh.MarshalAuthorizedKey(hostKey.PublicKey()))}, logins
}

// A booting guest's sshd may take a login and then drop the connection
// before a session opens (it restarts): authorize asks again, and writes
// the keys once the guest takes the command. An sshd that refuses the
// session is up and means it: no asking again.
func TestAuthorizeAsksAgainWhenTheSessionIsDropped(t *testing.T) {
	d := &Driver{o: Options{ControlKey: testkit.NewKey(t), BootTimeout: 20 * time.Second, Logger: slog.New(slog.DiscardHandler)}}
	got := make(chan string, 1)
	ep, logins := fakeGuestSSHD(t, 2, false, got)
	if err := d.authorize(context.Background(), ep, []string{"ssh-ed25519 AAAA key"}); err != nil {
		t.Fatalf("authorize: %v (after %d logins)", err, logins.Load())
	}
	if keys := <-got; strings.TrimSpace(keys) != "ssh-ed25519 AAAA key" {
		t.Errorf("the guest was given %q", keys)
	}
	if n := logins.Load(); n != 3 {
		t.Errorf("%d logins, want 3 (two dropped)", n)
	}

	ep, logins = fakeGuestSSHD(t, 0, true, nil)
	var refused *ssh.OpenChannelError
	if err := d.authorize(context.Background(), ep, nil); !errors.As(err, &refused) || logins.Load() != 1 {
		t.Errorf("a refused session: %v after %d logins; want the refusal after one", err, logins.Load())
	}
}
