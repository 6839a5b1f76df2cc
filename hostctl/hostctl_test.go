package hostctl_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"froog.tech/froog/hostctl"
	"froog.tech/froog/hostctl/local"
	"froog.tech/froog/internal/testkit"
	"froog.tech/froog/internal/testkit/live"
	"froog.tech/froog/internal/wait"
	"froog.tech/froog/store"
	"froog.tech/froog/store/embedded"
)

var ctx = context.Background()

type rig struct {
	t       *testing.T
	st      *embedded.Store
	drv     hostctl.Driver
	acct    store.Account
	stopCtl func()
}

func newRig(t *testing.T, drv hostctl.Driver, o hostctl.Options) *rig {
	t.Helper()
	st := live.EmbeddedStore(t)
	if drv == nil {
		drv = localIn(t, "")
	}
	a, err := st.CreateAccount(ctx, store.Account{MaxSandboxes: 10, URLNamesPerDay: 20})
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, st: st, drv: drv, acct: a}
	r.runController(o)
	return r
}

func (r *rig) runController(o hostctl.Options) {
	r.t.Helper()
	o.Store, o.Driver = r.st, r.drv
	if o.HostName == "" {
		o.HostName = "test"
	}
	if o.Rescan == 0 {
		o.Rescan = 200 * time.Millisecond
	}
	ctl, err := hostctl.New(o)
	if err != nil {
		r.t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); ctl.Run(cctx) }()
	r.stopCtl = func() { cancel(); <-done }
	r.t.Cleanup(r.stopCtl)
}

func (r *rig) create(name string, edit func(*store.Sandbox)) store.Sandbox {
	r.t.Helper()
	now := store.Micro(time.Now())
	sb := store.Sandbox{AccountID: r.acct.ID, Name: name, DesiredState: store.StateRunning, State: store.StateCreating, TTLSecs: 3600, CreatedAt: now, UpdatedAt: now}
	if edit != nil {
		edit(&sb)
	}
	sb, err := r.st.CreateSandbox(ctx, sb, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	return sb
}

// waitState polls until the sandbox is in state (or gone, for "gone").
func (r *rig) waitState(id, state string) store.Sandbox {
	r.t.Helper()
	var sb store.Sandbox
	var err error
	if !wait.Until(15*time.Second, func() bool {
		sb, err = r.st.SandboxByID(ctx, id)
		return (state == "gone" && errors.Is(err, store.ErrNotFound)) || (err == nil && sb.State == state)
	}) {
		r.t.Fatalf("sandbox never reached %s: %+v, %v", state, sb, err)
	}
	return sb
}

func (r *rig) setDesired(id, desired string) {
	r.t.Helper()
	now := store.Micro(time.Now())
	if desired == store.StateStopped {
		if _, err := r.st.StopSandbox(ctx, id, now, nil); err != nil {
			r.t.Fatal(err)
		}
		return
	}
	if _, err := r.st.UpdateSandbox(ctx, id, func(s *store.Sandbox, _ *store.AuditEvent) error {
		s.DesiredState, s.UpdatedAt = desired, now
		return nil
	}, nil); err != nil {
		r.t.Fatal(err)
	}
}

func TestLifecycle(t *testing.T) {
	r := newRig(t, nil, hostctl.Options{})
	sub, err := r.st.Subscribe(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	sb := r.create("box", nil)
	running := r.waitState(sb.ID, store.StateRunning)
	if running.SSHPort == 0 || running.SSHHostKey == "" || running.HostID == "" || running.StartedAt == nil || running.AutoStopAt == nil {
		t.Fatalf("running sandbox lacks observed fields: %+v", running)
	}
	if want := running.StartedAt.Add(time.Hour); !running.AutoStopAt.Equal(want) {
		t.Fatalf("auto_stop_at %v, want %v", running.AutoStopAt, want)
	}
	// The states it went through, as the feed saw them.
	var states []string
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		c, err := sub.Next(cctx)
		cancel()
		if err != nil {
			break
		}
		if s := c.Sandbox.State; len(states) == 0 || states[len(states)-1] != s {
			states = append(states, s)
		}
		if c.Sandbox.State == store.StateRunning {
			break
		}
	}
	if fmt.Sprint(states) != "[creating starting running]" {
		t.Fatalf("states %v, want creating → starting → running", states)
	}

	r.setDesired(sb.ID, store.StateStopped)
	// The stop record finishes in a write of its own, just after the
	// state's: wait for both.
	var stopped store.Sandbox
	wait.For(t, 15*time.Second, "stopped, with its stop finished", func() bool {
		stopped, _ = r.st.SandboxByID(ctx, sb.ID)
		return stopped.State == store.StateStopped && stopped.PendingStopID == ""
	})
	if stopped.WarmUntil == nil || stopped.StoppedAt == nil {
		t.Fatalf("stopped sandbox: %+v", stopped)
	}
	r.setDesired(sb.ID, store.StateRunning)
	again := r.waitState(sb.ID, store.StateRunning)
	if again.WarmUntil != nil || again.SSHHostKey != running.SSHHostKey {
		t.Fatalf("restarted sandbox: %+v", again)
	}

	if err := r.st.DeleteSandbox(ctx, sb.ID, store.Micro(time.Now()), nil); err != nil {
		t.Fatal(err)
	}
	r.waitState(sb.ID, "gone")
}

func TestStopRecordCompletes(t *testing.T) {
	r := newRig(t, nil, hostctl.Options{})
	sb := r.create("box", nil)
	r.waitState(sb.ID, store.StateRunning)
	st, err := r.st.StopSandbox(ctx, sb.ID, store.Micro(time.Now()), nil)
	if err != nil {
		t.Fatal(err)
	}
	r.waitState(sb.ID, store.StateStopped)
	var got store.Stop
	if !wait.Until(5*time.Second, func() bool {
		got, err = r.st.Stop(ctx, r.acct.ID, st.ID)
		return err == nil && got.Status == store.StopCompleted && got.EndedAt != nil
	}) {
		t.Fatalf("stop never completed: %+v, %v", got, err)
	}
}

// TestTimers: auto-stop, the hard lifetime, auto-delete and the warm
// window end on the controller's clock, which the test moves: each when
// it is due, not before, and a sandbox without one runs on.
func TestTimers(t *testing.T) {
	clk := testkit.NewFakeClock(time.Now())
	r := newRig(t, nil, hostctl.Options{WarmWindow: 300 * time.Millisecond, Now: clk.Now})
	auto := r.create("auto", func(s *store.Sandbox) { s.TTLSecs = 1 })
	life := r.create("life", func(s *store.Sandbox) { s.TTLSecs, s.MaxLifetimeSecs = 0, 1 })
	gone := r.create("gone", func(s *store.Sandbox) { s.TTLSecs, s.DeleteAfterSecs = 1, 1 })
	forever := r.create("forever", func(s *store.Sandbox) { s.TTLSecs = 0 })
	for _, sb := range []store.Sandbox{auto, life, gone, forever} {
		r.waitState(sb.ID, store.StateRunning)
	}
	// A millisecond before they are due, two rescans stop nothing.
	clk.Advance(time.Second - time.Millisecond)
	time.Sleep(2 * 200 * time.Millisecond)
	for _, sb := range []store.Sandbox{auto, life, gone} {
		if got, _ := r.st.SandboxByID(ctx, sb.ID); got.State != store.StateRunning {
			t.Fatalf("%s is %s before its timer ran out", got.Name, got.State)
		}
	}
	clk.Advance(time.Millisecond)
	a := r.waitState(auto.ID, store.StateStopped)
	if d := a.StoppedAt.Sub(*a.StartedAt); d != time.Second {
		t.Fatalf("auto-stop %v after the start on the controller's clock, want 1 s", d)
	}
	r.waitState(life.ID, store.StateStopped)
	r.waitState(gone.ID, store.StateStopped)
	clk.Advance(time.Second) // gone's delete is due, and auto's warm window is over
	r.waitState(gone.ID, "gone")
	wait.For(t, 5*time.Second, "the warm window ends (warm_until cleared)", func() bool {
		sb, _ := r.st.SandboxByID(ctx, auto.ID)
		return sb.WarmUntil == nil
	})
	if sb, _ := r.st.SandboxByID(ctx, forever.ID); sb.State != store.StateRunning {
		t.Fatalf("a sandbox without auto-stop stopped: %s", sb.State)
	}
	events, err := r.st.Audit(ctx, r.acct.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	actors := map[string]string{}
	for _, e := range events {
		actors[e.Target] += e.Action + " by " + e.Actor + ";"
	}
	if actors["auto"] != "sandbox.stop by auto-stop;" || actors["life"] != "sandbox.stop by max-lifetime;" || actors["gone"] != "sandbox.delete by auto-delete;sandbox.stop by auto-stop;" {
		t.Fatalf("audit: %v", actors)
	}
}

// fakeFailingDriver refuses to start; a fake because the point is a driver
// error, which a real driver gives only by accident.
type fakeFailingDriver struct {
	mu     sync.Mutex
	starts int
	fail   bool
}

func (d *fakeFailingDriver) Start(context.Context, *store.Sandbox, []string) (hostctl.Endpoint, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.starts++
	if d.fail {
		return hostctl.Endpoint{}, errors.New("no disk image for ubuntu-24.04")
	}
	return hostctl.Endpoint{Host: "127.0.0.1", Port: 2222, HostKey: "ssh-ed25519 AAAA"}, nil
}
func (d *fakeFailingDriver) Stop(context.Context, *store.Sandbox) error   { return nil }
func (d *fakeFailingDriver) Delete(context.Context, *store.Sandbox) error { return nil }

func TestDriverErrorLeavesError(t *testing.T) {
	drv := &fakeFailingDriver{fail: true}
	r := newRig(t, drv, hostctl.Options{})
	sb := r.create("box", nil)
	bad := r.waitState(sb.ID, store.StateError)
	if bad.Error != "no disk image for ubuntu-24.04" {
		t.Fatalf("error reason %q", bad.Error)
	}
	// Nothing to poll for: a retry would show within this time (three
	// rescans), and must not.
	time.Sleep(600 * time.Millisecond)
	drv.mu.Lock()
	n := drv.starts
	drv.fail = false
	drv.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d start attempts without a new start, want 1", n)
	}
	if sb, _ := r.st.SandboxByID(ctx, sb.ID); sb.State != store.StateError {
		t.Fatalf("state %s, want error", sb.State)
	}
	r.setDesired(sb.ID, store.StateRunning) // a start retries
	ok := r.waitState(sb.ID, store.StateRunning)
	if ok.Error != "" {
		t.Fatalf("error kept after a good start: %q", ok.Error)
	}
}

// A restarted controller adopts what runs: same endpoint, no new start.
func TestRestartAdopts(t *testing.T) {
	r := newRig(t, nil, hostctl.Options{})
	sb := r.create("box", nil)
	before := r.waitState(sb.ID, store.StateRunning)
	r.stopCtl()
	r.runController(hostctl.Options{})
	// Nothing to poll for: a wrong restart would show within two rescans.
	time.Sleep(500 * time.Millisecond)
	after, _ := r.st.SandboxByID(ctx, sb.ID)
	if after.State != store.StateRunning || after.SSHPort != before.SSHPort || !after.StartedAt.Equal(*before.StartedAt) {
		t.Fatalf("after restart: %+v, before %+v", after, before)
	}
}

func TestCapacity(t *testing.T) {
	r := newRig(t, &fakeFailingDriver{}, hostctl.Options{Capacity: 1})
	first := r.create("one", nil)
	r.waitState(first.ID, store.StateRunning)
	second := r.create("two", nil)
	// Nothing to poll for: a wrong claim would show within two rescans.
	time.Sleep(500 * time.Millisecond)
	if sb, _ := r.st.SandboxByID(ctx, second.ID); sb.HostID != "" || sb.State != store.StateCreating {
		t.Fatalf("a full host took a sandbox: %+v", sb)
	}
	if err := r.st.DeleteSandbox(ctx, first.ID, store.Micro(time.Now()), nil); err != nil {
		t.Fatal(err)
	}
	r.waitState(second.ID, store.StateRunning)
}

// When the host runs short of memory, warm sandboxes give up their
// processes, the longest stopped first, and only as many as it takes. The
// local driver cannot save a paused sandbox's memory, so it stops them:
// their next start is cold.
func TestLowMemoryEndsWarmSandboxes(t *testing.T) {
	var mu sync.Mutex
	short := 0 // how many sandboxes the host needs to have released
	checks := 0
	var r *rig // set before short is: read only once short is set
	r = newRig(t, nil, hostctl.Options{WarmWindow: time.Hour, MinFreeMemory: 1 << 30, MemoryCheck: 20 * time.Millisecond,
		MemAvailable: func() (uint64, error) {
			mu.Lock()
			defer mu.Unlock()
			checks++
			if short == 0 {
				return 2 << 30, nil
			}
			n := 0
			for _, name := range []string{"a", "b", "c"} {
				if sb, err := r.st.Sandbox(ctx, r.acct.ID, name); err == nil && sb.State == store.StateStopped && sb.WarmUntil == nil {
					n++
				}
			}
			if n < short {
				return 1 << 20, nil
			}
			return 2 << 30, nil
		}})
	var ids []string
	for _, name := range []string{"a", "b", "c"} {
		sb := r.create(name, nil)
		r.waitState(sb.ID, store.StateRunning)
		ids = append(ids, sb.ID)
	}
	for _, id := range ids { // stopped in this order: a is the longest stopped
		r.setDesired(id, store.StateStopped)
		if sb := r.waitState(id, store.StateStopped); sb.WarmUntil == nil {
			t.Fatal("not warm after a stop")
		}
		time.Sleep(5 * time.Millisecond) // stop times apart: their order is what is tested
	}
	warm := func() string {
		var s []string
		for _, id := range ids {
			sb, _ := r.st.SandboxByID(ctx, id)
			if sb.WarmUntil != nil {
				s = append(s, sb.Name)
			}
		}
		return fmt.Sprint(s)
	}
	for _, step := range []struct {
		short int
		want  string
	}{{1, "[b c]"}, {2, "[c]"}} {
		mu.Lock()
		short = step.short
		mu.Unlock()
		wait.Until(10*time.Second, func() bool { return warm() == step.want })
		// Ten more checks of the memory: no more releases than needed.
		mu.Lock()
		then := checks
		mu.Unlock()
		wait.For(t, 10*time.Second, "ten more memory checks", func() bool { mu.Lock(); defer mu.Unlock(); return checks >= then+10 })
		if got := warm(); got != step.want {
			t.Fatalf("short by %d: warm %s, want %s", step.short, got, step.want)
		}
	}
}

// fakeCheckBlocksDriver is the local driver with a Check that waits until
// its context ends: a fake, because the point is a driver call cut short
// by hostctl's own shutdown.
type fakeCheckBlocksDriver struct {
	*local.Driver
	checking chan struct{}
}

func (d *fakeCheckBlocksDriver) Check(ctx context.Context, _ *store.Sandbox) error {
	select {
	case d.checking <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return ctx.Err()
}

// A controller that shuts down in the middle of a driver call leaves the
// sandbox as it is: running, not in error, not stopped.
func TestShutdownIsNotAFailure(t *testing.T) {
	drv := &fakeCheckBlocksDriver{Driver: localIn(t, ""), checking: make(chan struct{}, 1)}
	r := newRig(t, drv, hostctl.Options{})
	sb := r.create("box", nil)
	r.waitState(sb.ID, store.StateRunning)
	<-drv.checking
	r.stopCtl()
	after, _ := r.st.SandboxByID(ctx, sb.ID)
	if after.State != store.StateRunning || after.Error != "" {
		t.Fatalf("after a shutdown during a check: %s %q", after.State, after.Error)
	}
	c, err := net.Dial("tcp", net.JoinHostPort(after.SSHHost, strconv.Itoa(after.SSHPort)))
	if err != nil {
		t.Fatalf("the shutdown stopped the sandbox: %v", err)
	}
	c.Close()
}
