// Package drivertest is the suite every hostctl driver passes, through a
// real controller on the embedded store and SSH with the pinned host key:
// one suite, each driver (hostctl/local, hostctl/qemu) runs it, with the
// cases that apply to it.
package drivertest

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"froog.tech/froog/hostctl"
	"froog.tech/froog/store"
	"froog.tech/froog/store/embedded"
)

// Driver is a driver under test.
type Driver struct {
	// Open makes the driver on dir; called again on the same dir it is
	// another process after a restart.
	Open func(t *testing.T, dir string) hostctl.Driver
	// Signer is the control key the driver's sandboxes accept.
	Signer ssh.Signer
	// Kill ends a running sandbox from outside, as a crash would; nil
	// where nothing of a sandbox can die on its own.
	Kill func(t *testing.T, dir string, sb store.Sandbox)
	// Boot bounds one start.
	Boot time.Duration
}

var ctx = context.Background()

type rig struct {
	t    *testing.T
	d    Driver
	dir  string
	st   *embedded.Store
	acct store.Account
	drv  hostctl.Driver // the latest opened
	stop func()
}

func (r *rig) controller(warm time.Duration) {
	r.t.Helper()
	if r.stop != nil {
		r.stop()
	}
	r.drv = r.d.Open(r.t, r.dir)
	ctl, err := hostctl.New(hostctl.Options{Store: r.st, Driver: r.drv, HostName: "test", Rescan: 200 * time.Millisecond, WarmWindow: warm})
	if err != nil {
		r.t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); ctl.Run(cctx) }()
	r.stop = func() { cancel(); <-done }
}

func (r *rig) wait(id string, within time.Duration, what string, cond func(store.Sandbox) bool) store.Sandbox {
	r.t.Helper()
	deadline := time.Now().Add(within)
	for {
		sb, err := r.st.SandboxByID(ctx, id)
		if err == nil && cond(sb) {
			return sb
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("never %s: %+v, %v", what, sb, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (r *rig) running(id string) store.Sandbox {
	r.t.Helper()
	return r.wait(id, r.d.Boot, "running", func(sb store.Sandbox) bool {
		if sb.State == store.StateError {
			r.t.Fatalf("the sandbox failed: %s", sb.Error)
		}
		return sb.State == store.StateRunning
	})
}

func (r *rig) setDesired(id, desired string) {
	r.t.Helper()
	now := store.Micro(time.Now())
	var err error
	if desired == store.StateStopped {
		_, err = r.st.StopSandbox(ctx, id, now, nil)
	} else {
		_, err = r.st.UpdateSandbox(ctx, id, func(s *store.Sandbox, _ *store.AuditEvent) error {
			s.DesiredState, s.UpdatedAt = desired, now
			return nil
		}, nil)
	}
	if err != nil {
		r.t.Fatal(err)
	}
}

// sh runs cmd in the sandbox as user, over SSH with its pinned host key.
func (r *rig) sh(sb store.Sandbox, cmd string) string {
	r.t.Helper()
	key, _, _, _, err := ssh.ParseAuthorizedKey([]byte(sb.SSHHostKey))
	if err != nil {
		r.t.Fatalf("pinned host key: %v", err)
	}
	c, err := ssh.Dial("tcp", sb.SSHHost+":"+strconv.Itoa(sb.SSHPort), &ssh.ClientConfig{User: "user", Auth: []ssh.AuthMethod{ssh.PublicKeys(r.d.Signer)},
		HostKeyCallback: ssh.FixedHostKey(key), HostKeyAlgorithms: []string{key.Type()}, Timeout: 10 * time.Second})
	if err != nil {
		r.t.Fatalf("ssh with the pinned key: %v", err)
	}
	defer c.Close()
	s, err := c.NewSession()
	if err != nil {
		r.t.Fatal(err)
	}
	defer s.Close()
	out, err := s.CombinedOutput(cmd)
	if err != nil {
		r.t.Fatalf("%q: %v: %s", cmd, err, out)
	}
	return strings.TrimSpace(string(out))
}

// Run takes one sandbox through its life: running with SSH against the
// pinned key; a background job that a stop and a start within the warm
// window keep running; a controller restart that adopts the sandbox
// without starting it twice; a stop past the warm window and a cold start
// that keep its files; a fork of the running sandbox with its own host key
// and the source's files; a crash that ends in error with the reason, and
// a start that recovers it from its disk; delete.
func Run(t *testing.T, d Driver) {
	st, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	acct, err := st.CreateAccount(ctx, store.Account{MaxSandboxes: 5, URLNamesPerDay: 20})
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, d: d, dir: t.TempDir(), st: st, acct: acct}
	t.Cleanup(func() {
		if r.stop != nil {
			r.stop()
		}
	})
	r.controller(time.Hour)
	now := store.Micro(time.Now())
	sb, err := st.CreateSandbox(ctx, store.Sandbox{AccountID: acct.ID, Name: "box", Size: "default", DesiredState: store.StateRunning,
		State: store.StateCreating, CreatedAt: now, UpdatedAt: now}, nil)
	if err != nil {
		t.Fatal(err)
	}

	pinned := ""
	if _, ok := r.drv.(hostctl.KeyMaker); ok {
		// The host key is pinned while the sandbox is still booting.
		booting := r.wait(sb.ID, r.d.Boot, "starting or running", func(s store.Sandbox) bool {
			return s.State == store.StateStarting || s.State == store.StateRunning
		})
		if booting.State != store.StateStarting || booting.SSHHostKey == "" {
			t.Fatalf("while booting: state %s, host key %q; want it pinned before the boot ends", booting.State, booting.SSHHostKey)
		}
		pinned = booting.SSHHostKey
	}
	first := r.running(sb.ID)
	if pinned != "" && first.SSHHostKey != pinned {
		t.Fatalf("the key in use %q is not the one pinned before the boot %q", first.SSHHostKey, pinned)
	}
	r.sh(first, `echo kept > "$HOME/froog-file"`)
	job := r.sh(first, `setsid sh -c 'while :; do sleep 1; done' </dev/null >/dev/null 2>&1 & echo $!`)
	// Alive and not a zombie (a killed job's parent may be slow to reap).
	alive := func(sb store.Sandbox) string {
		return r.sh(sb, "grep -qs '^State:[[:space:]]*[^Z[:space:]]' /proc/"+job+"/status && echo alive || echo gone")
	}

	t.Run("warm", func(t *testing.T) {
		r.setDesired(sb.ID, store.StateStopped)
		r.wait(sb.ID, r.d.Boot, "stopped and warm", func(s store.Sandbox) bool { return s.State == store.StateStopped && s.WarmUntil != nil })
		r.setDesired(sb.ID, store.StateRunning)
		again := r.running(sb.ID)
		if again.SSHHostKey != first.SSHHostKey || alive(again) != "alive" {
			t.Fatal("after a warm start: another host key, or the job is gone")
		}
	})

	t.Run("adopt", func(t *testing.T) {
		before := r.running(sb.ID)
		r.controller(time.Second) // a restarted hostctl, with a short warm window from now on
		time.Sleep(time.Second)
		after := r.running(sb.ID)
		if after.SSHPort != before.SSHPort || !after.StartedAt.Equal(*before.StartedAt) || alive(after) != "alive" {
			t.Fatalf("after a restart: %+v, before %+v", after, before)
		}
	})

	t.Run("cold", func(t *testing.T) {
		r.setDesired(sb.ID, store.StateStopped)
		r.wait(sb.ID, r.d.Boot, "stopped past the warm window", func(s store.Sandbox) bool { return s.State == store.StateStopped && s.WarmUntil == nil })
		r.setDesired(sb.ID, store.StateRunning)
		again := r.running(sb.ID)
		if again.SSHHostKey != first.SSHHostKey || r.sh(again, `cat "$HOME/froog-file"`) != "kept" {
			t.Fatal("after a cold start: another host key, or the file is gone")
		}
		if alive(again) != "gone" {
			t.Fatal("the job outlived a cold stop")
		}
	})

	t.Run("fork", func(t *testing.T) {
		src := r.running(sb.ID)
		now := store.Micro(time.Now())
		fork, err := st.CreateSandbox(ctx, store.Sandbox{AccountID: acct.ID, Name: "box-fork", Size: "default", ForkOf: sb.ID,
			DesiredState: store.StateRunning, State: store.StateCreating, CreatedAt: now, UpdatedAt: now}, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := r.running(fork.ID)
		if got.SSHHostKey == src.SSHHostKey || r.sh(got, `cat "$HOME/froog-file"`) != "kept" {
			t.Fatal("the fork has its source's host key, or not its files")
		}
		r.sh(got, `echo forked > "$HOME/froog-file"`)
		if r.sh(r.running(sb.ID), `cat "$HOME/froog-file"`) != "kept" {
			t.Fatal("writing in the fork changed the source")
		}
		if err := st.DeleteSandbox(ctx, fork.ID, store.Micro(time.Now()), nil); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("crash", func(t *testing.T) {
		if d.Kill == nil {
			t.Skip("nothing of this driver's sandboxes can die on its own")
		}
		d.Kill(t, r.dir, r.running(sb.ID))
		failed := r.wait(sb.ID, r.d.Boot, "in error after the crash", func(s store.Sandbox) bool { return s.State == store.StateError })
		if failed.Error == "" {
			t.Fatal("error without a reason")
		}
		t.Logf("reason: %.200s", failed.Error)
		r.setDesired(sb.ID, store.StateRunning)
		r.wait(sb.ID, r.d.Boot, "starting again", func(s store.Sandbox) bool { return s.State != store.StateError })
		back := r.running(sb.ID)
		if r.sh(back, `cat "$HOME/froog-file"`) != "kept" {
			t.Fatal("after the recovery: the file is gone")
		}
	})

	if err := st.DeleteSandbox(ctx, sb.ID, store.Micro(time.Now()), nil); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(d.Boot); ; time.Sleep(20 * time.Millisecond) {
		if _, err := st.SandboxByID(ctx, sb.ID); errors.Is(err, store.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("never gone after delete")
		}
	}
}
