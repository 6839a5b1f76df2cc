// Package drivertest is the suite every hostctl driver passes, through a
// real controller on the embedded store and SSH with the pinned host key:
// one suite, each driver (hostctl/local, hostctl/qemu) runs it, with the
// cases that apply to it.
package drivertest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"froog.tech/froog/hostctl"
	"froog.tech/froog/internal/testkit"
	"froog.tech/froog/internal/wait"
	"froog.tech/froog/store"
	"froog.tech/froog/store/embedded"
)

// Driver is a driver under test.
type Driver struct {
	// Open makes the driver on dir, logging to log; called again on the
	// same dir it is another process after a restart.
	Open func(t *testing.T, dir string, log *slog.Logger) hostctl.Driver
	// Signer is the control key the driver's sandboxes accept.
	Signer ssh.Signer
	// Kill ends a running sandbox from outside, as a crash would; nil
	// where nothing of a sandbox can die on its own.
	Kill func(t *testing.T, dir string, sb store.Sandbox)
	// Boot bounds one start.
	Boot time.Duration
	// OS is the sandboxes' os; empty means the driver's default.
	OS string
	// AccountKeys: the driver's sandboxes admit the account's SSH keys.
	AccountKeys bool
	// Alive reports whether a sandbox has a process on the host. Required.
	Alive func(dir string, sb store.Sandbox) bool
	// Files is the folder that holds a sandbox's disk (and saved memory)
	// on the host. Required.
	Files func(dir string, sb store.Sandbox) string
}

var ctx = context.Background()

// suiteLog is the controller's and the driver's log: on the test binary's
// stderr, which go test shows when the package fails (what the driver did
// before a check failed is in it).
var suiteLog = slog.New(slog.NewTextHandler(os.Stderr, nil))

// suite is what one Run shares: the store, the driver's folder, the
// controller in use.
type suite struct {
	top  *testing.T // Run's, for what lives as long as the suite (Open's cleanup)
	d    Driver
	dir  string
	st   *embedded.Store
	acct store.Account
	drv  hostctl.Driver // the latest opened
	stop func()
	// lowMemory: the host reports less available memory than hostctl keeps.
	lowMemory atomic.Bool
	// conns: sh's connections, one per sandbox address (shConn).
	mu    sync.Mutex
	conns map[string]*ssh.Client
}

// rig is the suite seen from one test: its checks fail t, the test that
// runs them. A subtest takes its own (on): a failure in a subtest must not
// call FailNow on its parent, and subtests that run in parallel each fail
// themselves.
type rig struct {
	t *testing.T
	*suite
}

// on is the rig whose checks fail t.
func (r rig) on(t *testing.T) rig { return rig{t: t, suite: r.suite} }

func (r rig) controller(warm time.Duration) {
	r.t.Helper()
	if r.stop != nil {
		r.stop()
	}
	r.drv = r.d.Open(r.top, r.dir, suiteLog)
	ctl, err := hostctl.New(hostctl.Options{Store: r.st, Driver: r.drv, Logger: suiteLog, HostName: "test", Rescan: 200 * time.Millisecond, WarmWindow: warm,
		MinFreeMemory: 1 << 30, MemoryCheck: 100 * time.Millisecond, MemAvailable: func() (uint64, error) {
			if r.lowMemory.Load() {
				return 1 << 20, nil
			}
			return 1 << 40, nil
		}})
	if err != nil {
		r.t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); ctl.Run(cctx) }()
	r.stop = func() { cancel(); <-done }
}

// create makes a sandbox of the account that should run, changed by fn.
func (r rig) create(name string, fn func(*store.Sandbox)) store.Sandbox {
	r.t.Helper()
	now := store.Micro(time.Now())
	sb := store.Sandbox{AccountID: r.acct.ID, Name: name, Size: "default", OS: r.d.OS, DesiredState: store.StateRunning,
		State: store.StateCreating, CreatedAt: now, UpdatedAt: now}
	if fn != nil {
		fn(&sb)
	}
	sb, err := r.st.CreateSandbox(ctx, sb, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	return sb
}

func (r rig) wait(id string, within time.Duration, what string, cond func(store.Sandbox) bool) store.Sandbox {
	r.t.Helper()
	var sb store.Sandbox
	var err error
	if !wait.Until(within, func() bool { sb, err = r.st.SandboxByID(ctx, id); return err == nil && cond(sb) }) {
		r.t.Fatalf("never %s: %+v, %v", what, sb, err)
	}
	return sb
}

func (r rig) running(id string) store.Sandbox {
	r.t.Helper()
	return r.wait(id, r.d.Boot, "running", func(sb store.Sandbox) bool {
		if sb.State == store.StateError {
			r.t.Fatalf("the sandbox failed: %s", sb.Error)
		}
		return sb.State == store.StateRunning
	})
}

func (r rig) setDesired(id, desired string) {
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

// sh runs cmd in the sandbox as user, over SSH with its pinned host key
// and the control key, on the sandbox's connection (shConn).
func (r rig) sh(sb store.Sandbox, cmd string) string {
	r.t.Helper()
	out, err := run(r.shConn(sb), cmd)
	if err != nil {
		r.t.Fatal(err)
	}
	return out
}

// shConn is the control key's connection to sb, logged in once for its
// address and host key and kept for the suite: a new login cost a Debian
// guest under TCG over a CPU-second (sshd, PAM), a session on an open
// connection a tenth. A connection that the sandbox's stop or its
// process's end closed is replaced by a new login; what logs in is
// checked with loggedIn, which logs in each time.
func (r rig) shConn(sb store.Sandbox) *ssh.Client {
	r.t.Helper()
	key := sb.ID + " " + sb.SSHHost + ":" + strconv.Itoa(sb.SSHPort) + " " + sb.SSHHostKey
	r.mu.Lock()
	c := r.conns[key]
	r.mu.Unlock()
	if c != nil {
		// A round trip on the connection: one that is gone answers an
		// error at once (its guest's end closed the socket).
		if _, _, err := c.SendRequest("keepalive@froog.test", true, nil); err == nil {
			return c
		}
		c.Close()
	}
	c, err := dial(r.d.Signer, sb)
	if err != nil {
		r.t.Fatal(err)
	}
	r.mu.Lock()
	if r.conns == nil {
		r.conns = map[string]*ssh.Client{}
	}
	r.conns[key] = c
	r.mu.Unlock()
	return c
}

// shAs runs cmd as user, logged in with signer, against the pinned key.
func (r rig) shAs(signer ssh.Signer, sb store.Sandbox, cmd string) (string, error) {
	c, err := dial(signer, sb)
	if err != nil {
		return "", err
	}
	defer c.Close()
	return run(c, cmd)
}

// keepsTime checks that the sandbox's clock runs at the host's rate:
// its uptime across a second of the host's, read over one connection,
// within the host's time between the reads (from the first's end to the
// second's start, and from the first's start to the second's end), give
// or take a fifth. A guest kernel that mismeasured its TSC runs its clock
// many times fast, and every timeout in it (its SSH server's) with it.
func (r rig) keepsTime(sb store.Sandbox) {
	r.t.Helper()
	c := r.shConn(sb)
	uptime := func() (float64, time.Time, time.Time) {
		start := time.Now()
		out, err := run(c, "cat /proc/uptime")
		end := time.Now()
		var up float64
		if _, serr := fmt.Sscanf(out, "%f", &up); err != nil || serr != nil {
			r.t.Fatalf("the sandbox's uptime: %q, %v", out, err)
		}
		return up, start, end
	}
	u0, s0, e0 := uptime()
	time.Sleep(time.Second) // the span measured; nothing to poll for
	u1, s1, e1 := uptime()
	lo, hi := s1.Sub(e0).Seconds(), e1.Sub(s0).Seconds()
	if d := u1 - u0; d < 0.8*lo-0.05 || d > 1.2*hi+0.05 {
		r.t.Fatalf("the sandbox's clock went %.2f s while the host's went %.2f–%.2f s", d, lo, hi)
	}
}

// dial logs in as user with signer, against the pinned key. A connection
// dropped before its handshake ends (EOF: a TCG guest on a loaded machine
// can be too slow to take it up before user-mode networking gives up) is
// tried again, for up to a minute; a refused key or another host key is
// an answer.
func dial(signer ssh.Signer, sb store.Sandbox) (*ssh.Client, error) {
	key, _, _, _, err := ssh.ParseAuthorizedKey([]byte(sb.SSHHostKey))
	if err != nil {
		return nil, fmt.Errorf("pinned host key: %v", err)
	}
	cfg := &ssh.ClientConfig{User: "user", Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: ssh.FixedHostKey(key), HostKeyAlgorithms: []string{key.Type()}, Timeout: 10 * time.Second}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(500 * time.Millisecond) {
		c, err := ssh.Dial("tcp", sb.SSHHost+":"+strconv.Itoa(sb.SSHPort), cfg)
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, io.EOF) || time.Now().After(deadline) {
			return nil, fmt.Errorf("ssh with the pinned key: %w", err)
		}
	}
}

// run runs cmd in a session of its own on c.
func run(c *ssh.Client, cmd string) (string, error) {
	s, err := c.NewSession()
	if err != nil {
		return "", err
	}
	defer s.Close()
	out, err := s.CombinedOutput(cmd)
	if err != nil {
		return "", fmt.Errorf("%q: %v: %s", cmd, err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// accountKey adds a new SSH key to the account and returns its signer.
func (r rig) accountKey(comment string) (ssh.Signer, store.SSHKey) {
	r.t.Helper()
	signer := testkit.NewKey(r.t)
	line := testkit.AuthorizedKey(signer) + " " + comment
	k, err := r.st.CreateSSHKey(ctx, store.SSHKey{AccountID: r.acct.ID, Name: comment, PublicKey: line,
		Fingerprint: ssh.FingerprintSHA256(signer.PublicKey()), CreatedAt: store.Micro(time.Now())}, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	return signer, k
}

// loggedIn reports whether signer logs in to sb: the account's keys
// where the driver admits them.
func (r rig) loggedIn(signer ssh.Signer, sb store.Sandbox) bool {
	r.t.Helper()
	out, err := r.shAs(signer, sb, "echo in")
	if err != nil && !strings.Contains(err.Error(), "unable to authenticate") {
		r.t.Fatal(err)
	}
	return err == nil && out == "in"
}

// jobAlive says whether process job in sb is alive and not a zombie (a
// killed job's parent may be slow to reap): "alive" or "gone".
func (r rig) jobAlive(sb store.Sandbox, job string) string {
	r.t.Helper()
	return r.sh(sb, "grep -qs '^State:[[:space:]]*[^Z[:space:]]' /proc/"+job+"/status && echo alive || echo gone")
}

// Run takes one sandbox through its life: running with SSH against the
// pinned key, for the control key and the account's keys; a background
// job that a stop and a start within the warm window keep running; keys
// removed and added counting from the next (warm) start; a controller
// restart that adopts the sandbox without starting it twice; a host short
// of memory that takes a warm sandbox's process (and a start that resumes
// it with its job where the driver saves memory); a stop past the warm
// window and a cold start that keep its files; delete. And a fork of the
// running sandbox, with snapshots off, through its own life: its own host
// key and the source's files; a crash that ends in error with the reason,
// and a start that recovers it from its disk; a stop that erases it (no
// process, no files).
//
// Boots are what takes time (minutes each, for an OS image under TCG):
// the suite has four, two at a time where it can. The fork boots while
// the source goes through the memory check, and the source's cold start
// runs beside the fork's recovery from its crash.
func Run(t *testing.T, d Driver) {
	if d.Alive == nil || d.Files == nil {
		t.Fatal("drivertest: Alive and Files are required")
	}
	st, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	acct, err := st.CreateAccount(ctx, store.Account{MaxSandboxes: 5, URLNamesPerDay: 20})
	if err != nil {
		t.Fatal(err)
	}
	r := rig{t: t, suite: &suite{top: t, d: d, dir: t.TempDir(), st: st, acct: acct}}
	t.Cleanup(func() {
		for _, c := range r.conns {
			c.Close()
		}
		if r.stop != nil {
			r.stop()
		}
	})
	r.controller(time.Hour)
	laptop, laptopKey := r.accountKey("me@laptop: the one # with YAML in it")
	sb := r.create("box", nil)

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
	r.keepsTime(first)
	// Who gets in: the account's keys where the driver admits them.
	if r.loggedIn(laptop, first) != d.AccountKeys {
		t.Fatalf("the account's key logs in: %v, want %v", !d.AccountKeys, d.AccountKeys)
	}
	// One connection carries the control plane's commands and file
	// sessions, up to 16 at once (api: 8 command and 8 file slots), their
	// processes ending all the while: every session gets its command
	// run. (Debian 12's dropbear closed a new session when an earlier
	// one's process ended before its exec request arrived.)
	t.Run("sessions", func(t *testing.T) {
		c := r.on(t).shConn(first)
		errs := make(chan error, 16)
		for w := range 16 {
			go func() {
				for i := range 10 {
					if out, err := run(c, fmt.Sprintf("echo %d.%d", w, i)); err != nil || out != fmt.Sprintf("%d.%d", w, i) {
						errs <- fmt.Errorf("session %d.%d: %q, %v", w, i, out, err)
						return
					}
				}
				errs <- nil
			}()
		}
		for range 16 {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
	})
	r.sh(first, `echo kept > "$HOME/froog-file"`)
	job := r.sh(first, `setsid sh -c 'while :; do sleep 1; done' </dev/null >/dev/null 2>&1 & echo $!`)

	t.Run("warm", func(t *testing.T) {
		r := r.on(t)
		r.setDesired(sb.ID, store.StateStopped)
		r.wait(sb.ID, r.d.Boot, "stopped and warm", func(s store.Sandbox) bool { return s.State == store.StateStopped && s.WarmUntil != nil })
		r.setDesired(sb.ID, store.StateRunning)
		again := r.running(sb.ID)
		if again.SSHHostKey != first.SSHHostKey || r.jobAlive(again, job) != "alive" {
			t.Fatal("after a warm start: another host key, or the job is gone")
		}
	})

	var desk ssh.Signer // the account's key from "keys" on
	t.Run("keys", func(t *testing.T) {
		r := r.on(t)
		if !d.AccountKeys {
			t.Skip("this driver's sandboxes admit only the control key")
		}
		// A key removed and one added count from the next start on: here a
		// warm one, whose guest never read a new seed.
		if err := st.DeleteSSHKey(ctx, acct.ID, laptopKey.ID, nil); err != nil {
			t.Fatal(err)
		}
		desk, _ = r.accountKey("me@desk")
		r.setDesired(sb.ID, store.StateStopped)
		r.wait(sb.ID, r.d.Boot, "stopped and warm", func(s store.Sandbox) bool { return s.State == store.StateStopped && s.WarmUntil != nil })
		r.setDesired(sb.ID, store.StateRunning)
		again := r.running(sb.ID)
		if r.loggedIn(laptop, again) || !r.loggedIn(desk, again) || r.jobAlive(again, job) != "alive" {
			t.Fatal("after a warm start: the removed key still logs in, or the added one does not, or the job is gone")
		}
	})

	t.Run("adopt", func(t *testing.T) {
		r := r.on(t)
		before := r.running(sb.ID)
		r.controller(time.Hour) // a restarted hostctl
		// Nothing to poll for: a wrong restart would show within this time.
		time.Sleep(time.Second)
		after := r.running(sb.ID)
		if after.SSHPort != before.SSHPort || !after.StartedAt.Equal(*before.StartedAt) || r.jobAlive(after, job) != "alive" {
			t.Fatalf("after a restart: %+v, before %+v", after, before)
		}
	})

	// The fork, of the running sandbox (copied live) and with snapshots
	// off. Made now, it boots while the source goes on; copied before the
	// source's next stop, so that what is forked is a running sandbox.
	fork := r.create("box-fork", func(s *store.Sandbox) { s.ForkOf, s.NoSnapshots = sb.ID, true })
	r.wait(fork.ID, r.d.Boot, "copied from its source (starting)", func(s store.Sandbox) bool {
		if s.State == store.StateError {
			r.t.Fatalf("the fork failed: %s", s.Error)
		}
		return s.State == store.StateStarting || s.State == store.StateRunning
	})

	t.Run("memory", func(t *testing.T) {
		r := r.on(t)
		// Warm, then the host needs the memory: the sandbox gives up its
		// process. A driver that saves the memory resumes it with the job;
		// the others boot it from its disk.
		r.setDesired(sb.ID, store.StateStopped)
		r.wait(sb.ID, r.d.Boot, "stopped and warm", func(s store.Sandbox) bool { return s.State == store.StateStopped && s.WarmUntil != nil })
		if !d.Alive(r.dir, sb) {
			t.Fatal("a warm sandbox has no process")
		}
		r.lowMemory.Store(true)
		released := wait.Until(r.d.Boot, func() bool { return !d.Alive(r.dir, sb) })
		r.lowMemory.Store(false)
		if !released {
			t.Fatal("the host is short of memory, and the warm sandbox keeps its process")
		}
		// A driver that saves the memory keeps the sandbox warm.
		_, saver := r.drv.(hostctl.Saver)
		r.wait(sb.ID, r.d.Boot, fmt.Sprintf("warm (%v) after giving up its process", saver), func(s store.Sandbox) bool { return (s.WarmUntil != nil) == saver })
		r.setDesired(sb.ID, store.StateRunning)
		again := r.running(sb.ID)
		want := map[bool]string{true: "alive", false: "gone"}[saver]
		if again.SSHHostKey != first.SSHHostKey || r.jobAlive(again, job) != want || r.sh(again, `cat "$HOME/froog-file"`) != "kept" {
			t.Fatalf("after the start: another host key, or the job is not %s, or the file is gone", want)
		}
		if d.AccountKeys && !r.loggedIn(desk, again) {
			t.Fatal("after the start: the account's key does not log in")
		}
	})

	t.Run("fork", func(t *testing.T) {
		r := r.on(t)
		src := r.running(sb.ID)
		got := r.running(fork.ID)
		if got.SSHHostKey == src.SSHHostKey || r.sh(got, `cat "$HOME/froog-file"`) != "kept" {
			t.Fatal("the fork has its source's host key, or not its files")
		}
		r.sh(got, `echo forked > "$HOME/froog-file"`)
		if r.sh(r.running(sb.ID), `cat "$HOME/froog-file"`) != "kept" {
			t.Fatal("writing in the fork changed the source")
		}
	})

	// The source crashes; its recovery below is its cold boot (one boot
	// for both: under TCG a boot of the OS image is a minute of a core).
	// Its VM was started by the controller in use since adopt, the one
	// that sees the crash (one that restarts while a VM is down starts it
	// again, rather than reporting the crash).
	t.Run("crash", func(t *testing.T) {
		r := r.on(t)
		if d.Kill == nil {
			t.Skip("nothing of this driver's sandboxes can die on its own")
		}
		running := r.running(sb.ID)
		r.sh(running, "sync") // what its recovery finds is what was on its disk
		d.Kill(t, r.dir, running)
		failed := r.wait(sb.ID, r.d.Boot, "in error after the crash", func(s store.Sandbox) bool { return s.State == store.StateError })
		if failed.Error == "" {
			t.Fatal("error without a reason")
		}
		t.Logf("reason: %.200s", failed.Error)
	})

	r.controller(time.Second) // a restarted hostctl, with a short warm window from now on
	stopCold := func(r rig) {
		r.setDesired(sb.ID, store.StateStopped)
		r.wait(sb.ID, r.d.Boot, "stopped past the warm window", func(s store.Sandbox) bool { return s.State == store.StateStopped && s.WarmUntil == nil })
		if d.Alive(r.dir, sb) {
			r.t.Fatal("a sandbox stopped past its warm window still has a process")
		}
	}
	t.Run("boots", func(t *testing.T) {
		t.Run("cold", func(t *testing.T) {
			r := r.on(t)
			if d.Kill == nil {
				stopCold(r) // nothing crashed: a stop past the warm window instead
			}
			// It starts again from its disk.
			r.setDesired(sb.ID, store.StateRunning)
			r.wait(sb.ID, r.d.Boot, "starting again", func(s store.Sandbox) bool { return s.State != store.StateError })
			again := r.running(sb.ID)
			if again.SSHHostKey != first.SSHHostKey || r.sh(again, `cat "$HOME/froog-file"`) != "kept" {
				t.Fatal("after a cold start: another host key, or the file is gone")
			}
			if r.jobAlive(again, job) != "gone" {
				t.Fatal("the job outlived a cold stop")
			}
			if d.AccountKeys && (!r.loggedIn(desk, again) || r.loggedIn(laptop, again)) {
				t.Fatal("after a cold start: the account's key does not log in, or the removed one does")
			}
		})
		t.Run("stopped", func(t *testing.T) {
			stopCold(r.on(t))
		})
	})

	t.Run("erase", func(t *testing.T) {
		r := r.on(t)
		// Snapshots off (the fork's): the stop erases the sandbox, with no
		// warm window.
		r.controller(time.Hour)
		got := r.running(fork.ID)
		r.sh(got, `echo secret > "$HOME/froog-file"; setsid sh -c 'while :; do sleep 1; done' </dev/null >/dev/null 2>&1 &`)
		files := d.Files(r.dir, got)
		if _, err := os.Stat(files); err != nil || !d.Alive(r.dir, got) {
			t.Fatalf("a running sandbox has no folder (%v) or no process", err)
		}
		stop, err := st.StopSandbox(ctx, fork.ID, store.Micro(time.Now()), nil)
		if err != nil {
			t.Fatal(err)
		}
		wait.For(t, d.Boot, "erased", func() bool {
			_, err := st.SandboxByID(ctx, fork.ID)
			return errors.Is(err, store.ErrNotFound)
		})
		// Gone at once: neither paused for a warm window nor on the disk.
		if d.Alive(r.dir, got) {
			t.Fatal("an erased sandbox still has a process")
		}
		if _, err := os.Stat(files); !os.IsNotExist(err) {
			t.Fatalf("an erased sandbox's folder is still there: %v", err)
		}
		if done, err := st.Stop(ctx, acct.ID, stop.ID); err != nil || done.Status != store.StopCompleted {
			t.Fatalf("the erasing stop: %+v, %v", done, err)
		}
	})

	if err := st.DeleteSandbox(ctx, sb.ID, store.Micro(time.Now()), nil); err != nil {
		t.Fatal(err)
	}
	wait.For(t, d.Boot, "gone after delete", func() bool {
		_, err := st.SandboxByID(ctx, sb.ID)
		return errors.Is(err, store.ErrNotFound)
	})
}
