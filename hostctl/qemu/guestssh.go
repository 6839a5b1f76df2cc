package qemu

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"froog.tech/froog/hostctl"
	"froog.tech/froog/tunnel"
)

// authorizedKeys are the keys that may log in to the sandbox as user: the
// control key and the account's keys, without their comments (the seed
// is YAML, and a comment is free text). A key that does not parse is left
// out, and the log says which.
func (d *Driver) authorizedKeys(id string, account []string) []string {
	keys := []string{strings.TrimSpace(string(ssh.MarshalAuthorizedKey(d.o.ControlKey.PublicKey())))}
	for _, line := range account {
		k, _, _, _, err := ssh.ParseAuthorizedKey([]byte(line))
		if err != nil {
			d.o.Logger.Warn("qemu: an account key does not parse; left out", slog.String("sandbox", id), slog.String("error", err.Error()))
			continue
		}
		keys = append(keys, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k))))
	}
	return keys
}

// authorize waits for cloud-init to finish where the image has it (an
// image of another's; froog's have froog-init, done before sshd starts):
// a guest is ready only then, user, keys and hostname in place. It writes
// keys to the guest user's ~/.ssh/authorized_keys: at every start, so
// that a key added or removed since the last start counts from this one
// on, whatever cloud-init does on later boots (it applies the seed's keys
// on an instance's first boot only).
func (d *Driver) authorize(ctx context.Context, ep hostctl.Endpoint, keys []string) error {
	ctx, cancel := context.WithTimeout(ctx, d.o.BootTimeout)
	defer cancel()
	for {
		// cloud-init writes result.json under /run when a boot's stages are
		// done (its "status --wait" can wait on past that, on Debian 13).
		err := d.guestRun(ctx, ep, d.o.BootTimeout, strings.Join(keys, "\n")+"\n",
			`if command -v cloud-init >/dev/null; then while [ ! -e /run/cloud-init/result.json ]; do sleep 0.2; done; fi
umask 077 && mkdir -p ~/.ssh && cat > ~/.ssh/authorized_keys.new && mv -f ~/.ssh/authorized_keys.new ~/.ssh/authorized_keys`)
		var de *guestDialError
		var ke *ssh.ServerAuthError
		if !errors.As(err, &de) || ctx.Err() != nil || errors.As(err, &ke) || errors.Is(err, tunnel.ErrHostKeyMismatch) {
			return err // done, or a failure that asking again would not mend
		}
		// A booting guest's SSH server may drop a connection before it
		// is whole (a restart, a unit still starting): ask again.
		d.o.Logger.Info("qemu: the guest's SSH server is not ready yet", slog.String("error", err.Error()))
		select {
		case <-ctx.Done():
			return err
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// syncGuest has a running guest write what it holds to its disk, before
// the VM is paused: QEMU ending a paused VM is a power cut for the guest,
// and what the guest had not written (a file, the host keys cloud-init
// made on the first boot) would be lost. A guest that does not answer is
// paused all the same; the log says so.
func (d *Driver) syncGuest(ctx context.Context, id string) {
	ep, err := d.address(id)
	if err == nil {
		err = d.guestRun(ctx, ep, 10*time.Second, "", "sync")
	}
	if err != nil {
		d.o.Logger.Warn("qemu: the guest did not sync its disk before the pause", slog.String("sandbox", id), slog.String("error", err.Error()))
	}
}

// guestRun runs cmd in the guest as user, logged in with the control key
// against the pinned host key, with stdin, within timeout.
func (d *Driver) guestRun(ctx context.Context, ep hostctl.Endpoint, timeout time.Duration, stdin, cmd string) error {
	hostKey, _, _, _, err := ssh.ParseAuthorizedKey([]byte(ep.HostKey))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client, err := tunnel.DialSSH(ctx, net.JoinHostPort(ep.Host, fmt.Sprint(ep.Port)), "user", d.o.ControlKey, hostKey)
	if err != nil {
		return &guestDialError{err}
	}
	defer client.Close()
	stop := context.AfterFunc(ctx, func() { client.Close() }) // the timeout covers the command too
	defer stop()
	s, err := client.NewSession()
	var refused *ssh.OpenChannelError
	if errors.As(err, &refused) {
		return err // the guest's sshd is up, and says no
	}
	if err != nil {
		// Logged in, but the connection went before the command did: a
		// booting guest's sshd restarting drops it so (EOF).
		return &guestDialError{err}
	}
	defer s.Close()
	s.Stdin = strings.NewReader(stdin)
	if out, err := s.CombinedOutput(cmd); err != nil {
		return fmt.Errorf("%v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// guestDialError is a failure to reach the guest with a command at all:
// to log in, or to open the session it runs in (as opposed to a command
// that failed there). Nothing ran: asking again is safe.
type guestDialError struct{ err error }

func (e *guestDialError) Error() string { return e.err.Error() }
func (e *guestDialError) Unwrap() error { return e.err }
