package hostctl_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"froog.tech/froog/hostctl"
	"froog.tech/froog/internal/testkit"
	"froog.tech/froog/internal/wait"
	"froog.tech/froog/store"
)

// TestSnapshotsOffStopErases: a sandbox made with snapshots off is erased
// by its stop, asked for or by its auto-stop timer: no warm window, no
// snapshot, its folder (its disk) removed, its record gone, its name
// free, the stop completed and an audit event saying why. A sandbox with
// snapshots on stopped alongside stays, warm, with its stop snapshot.
func TestSnapshotsOffStopErases(t *testing.T) {
	dir := t.TempDir()
	drv := localIn(t, dir)
	clk := &testkit.FakeClock{}
	r := newRig(t, drv, hostctl.Options{Now: clk.Now, WarmWindow: 3 * time.Hour})
	off := r.create("off", func(s *store.Sandbox) { s.NoSnapshots = true })
	timed := r.create("timed", func(s *store.Sandbox) { s.NoSnapshots = true })
	on := r.create("on", nil)
	off = r.waitState(off.ID, store.StateRunning)
	timed = r.waitState(timed.ID, store.StateRunning)
	r.waitState(on.ID, store.StateRunning)
	for _, sb := range []store.Sandbox{off, timed} {
		if err := os.WriteFile(filepath.Join(drv.Home(&sb), "f.txt"), []byte("data"), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	st, err := r.st.StopSandbox(ctx, off.ID, store.Micro(clk.Now()), &store.AuditEvent{AccountID: r.acct.ID, At: store.Micro(clk.Now()),
		Action: "sandbox.stop", Target: "off", Actor: "key_test"})
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != store.StopPending {
		t.Fatalf("the stop: %+v", st)
	}
	r.setDesired(on.ID, store.StateStopped)
	r.waitState(off.ID, "gone")
	// The stop completes once the sandbox is erased, no sooner.
	var got store.Stop
	wait.For(t, 15*time.Second, "the stop completed", func() bool {
		got, err = r.st.Stop(ctx, r.acct.ID, st.ID)
		return err == nil && got.Status != store.StopPending
	})
	if got.Status != store.StopCompleted || got.Error != "" || got.EndedAt == nil {
		t.Fatalf("the stop: %+v", got)
	}
	if _, err := os.Stat(filepath.Join(dir, off.ID)); !os.IsNotExist(err) {
		t.Fatalf("the erased sandbox's folder is still there: %v", err)
	}
	if list := r.snapshots(store.SnapshotFilter{SandboxID: off.ID}); len(list) != 0 {
		t.Fatalf("snapshots of an erased sandbox: %+v", list)
	}
	// Its name is free again.
	again := r.create("off", func(s *store.Sandbox) { s.TTLSecs = 0 })
	r.waitState(again.ID, store.StateRunning)

	// The auto-stop timer erases too.
	clk.Advance(time.Hour + time.Second)
	r.waitState(timed.ID, "gone")
	if _, err := os.Stat(filepath.Join(dir, timed.ID)); !os.IsNotExist(err) {
		t.Fatalf("the auto-stopped sandbox's folder is still there: %v", err)
	}

	// The sandbox with snapshots on is stopped and warm, with its stop's
	// snapshot and its files.
	kept := r.waitState(on.ID, store.StateStopped)
	if kept.WarmUntil == nil {
		t.Fatal("a stop of a sandbox with snapshots on did not keep it warm")
	}
	if list := r.snapshots(store.SnapshotFilter{SandboxID: on.ID}); len(list) != 1 || list[0].Reason != store.SnapshotStop {
		t.Fatalf("the sandbox with snapshots on: %+v", list)
	}

	events, err := r.st.Audit(ctx, r.acct.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	actors := map[string]string{}
	for _, e := range events {
		if e.Action == "sandbox.delete" && e.Detail["reason"] == "" {
			t.Errorf("an erase without its reason: %+v", e)
		}
		actors[e.Target] += e.Action + " by " + e.Actor + ";"
	}
	if actors["off"] != "sandbox.delete by snapshots-off;sandbox.stop by key_test;" || actors["timed"] != "sandbox.delete by snapshots-off;sandbox.stop by auto-stop;" {
		t.Fatalf("audit: %v", actors)
	}
}

// TestErasingRefusesAutoStart: once a sandbox with snapshots off is asked
// to stop, nothing starts it again (its disk is on its way out).
func TestErasingRefusesAutoStart(t *testing.T) {
	r := newRig(t, nil, hostctl.Options{})
	r.stopCtl() // no hostctl: the sandbox stays asked to stop
	now := store.Micro(time.Now())
	sb := r.create("off", func(s *store.Sandbox) { s.NoSnapshots, s.AutoStart = true, true })
	if _, err := r.st.StopSandbox(ctx, sb.ID, now, nil); err != nil {
		t.Fatal(err)
	}
	started, err := store.AutoStart(ctx, r.st, sb.ID, &store.AuditEvent{AccountID: r.acct.ID, At: now, Actor: "public-url"}, now)
	var refused *store.StartRefusedError
	if started || !errors.As(err, &refused) {
		t.Fatalf("auto-start of a sandbox being erased: started %v, %v", started, err)
	}
}

// TestEraseFinishedAfterRestart: a hostctl that stopped between deleting
// an erased sandbox and removing it (here: the store writes of the first
// half, with no hostctl running) finishes the job when it comes back:
// folder removed, record gone, stop completed.
func TestEraseFinishedAfterRestart(t *testing.T) {
	dir := t.TempDir()
	drv := localIn(t, dir)
	r := newRig(t, drv, hostctl.Options{})
	sb := r.waitState(r.create("off", func(s *store.Sandbox) { s.NoSnapshots = true }).ID, store.StateRunning)
	r.stopCtl()
	now := store.Micro(time.Now())
	st, err := r.st.StopSandbox(ctx, sb.ID, now, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.st.DeleteSandbox(ctx, sb.ID, now, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, sb.ID)); err != nil {
		t.Fatalf("the folder before the restart: %v", err)
	}
	r.runController(hostctl.Options{})
	r.waitState(sb.ID, "gone")
	if _, err := os.Stat(filepath.Join(dir, sb.ID)); !os.IsNotExist(err) {
		t.Fatalf("the folder after the restart: %v", err)
	}
	if got, err := r.st.Stop(ctx, r.acct.ID, st.ID); err != nil || got.Status != store.StopCompleted {
		t.Fatalf("the stop: %+v, %v", got, err)
	}
}
