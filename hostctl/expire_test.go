package hostctl_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"froog.tech/froog/hostctl"
	"froog.tech/froog/internal/testkit"
	"froog.tech/froog/internal/wait"
	"froog.tech/froog/store"
)

// TestDiskExpires: a sandbox stopped for store.DiskKept loses its disk
// and its automatic snapshots, and says when (disk_expired_at, an audit
// event sandbox.expire); its saved snapshot stays. Auto-start refuses it,
// a start that comes anyway fails without booting a fresh disk, and a
// restore from the saved snapshot brings it back to run again.
func TestDiskExpires(t *testing.T) {
	dir := t.TempDir()
	drv := localIn(t, dir)
	clk := &testkit.FakeClock{}
	r := newRig(t, drv, hostctl.Options{Now: clk.Now})
	sb := r.waitState(r.create("box", nil).ID, store.StateRunning)
	home := drv.Home(&sb)
	if err := os.WriteFile(filepath.Join(home, "f.txt"), []byte("kept"), 0o600); err != nil {
		t.Fatal(err)
	}
	saved := r.save(&sb, "keep")
	r.setDesired(sb.ID, store.StateStopped)
	sb = r.waitState(sb.ID, store.StateStopped)
	wait.For(t, 15*time.Second, "the stop's snapshot", func() bool {
		return len(r.snapshots(store.SnapshotFilter{SandboxID: sb.ID, Status: store.SnapshotAvailable})) == 2
	})
	at := store.DiskExpiresAt(&sb)
	if at == nil || !at.Equal(sb.StoppedAt.Add(store.DiskKept)) {
		t.Fatalf("a stopped sandbox's disk expires at %v, want %s after %v", at, store.DiskKept, sb.StoppedAt)
	}

	// A minute short of it: still there, through several looks.
	clk.Advance(store.DiskKept - time.Minute)
	time.Sleep(time.Second) // five rescans
	if got, _ := r.st.SandboxByID(ctx, sb.ID); got.DiskExpiredAt != nil {
		t.Fatalf("expired %v early", got.DiskExpiredAt)
	}
	if _, err := os.Stat(home); err != nil {
		t.Fatalf("the disk went early: %v", err)
	}

	clk.Advance(2 * time.Minute)
	wait.For(t, 15*time.Second, "the disk expired", func() bool {
		got, _ := r.st.SandboxByID(ctx, sb.ID)
		return got.DiskExpiredAt != nil
	})
	if _, err := os.Stat(home); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the expired disk is still there: %v", err)
	}
	wait.For(t, 15*time.Second, "only the saved snapshot left", func() bool {
		list := r.snapshots(store.SnapshotFilter{SandboxID: sb.ID})
		return len(list) == 1 && list[0].ID == saved.ID
	})
	audit, err := r.st.Audit(ctx, r.acct.ID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, ev := range audit {
		found = found || ev.Action == store.ActionExpired && ev.Target == "box" && ev.Detail["reason"] != ""
	}
	if !found {
		t.Fatalf("no %s audit event with a reason: %+v", store.ActionExpired, audit)
	}

	// Auto-start refuses; a start that comes anyway fails, and boots no
	// fresh disk.
	var refused *store.StartRefusedError
	if _, err := store.AutoStart(ctx, r.st, sb.ID, &store.AuditEvent{AccountID: r.acct.ID, At: clk.Now()}, clk.Now()); !errors.As(err, &refused) {
		t.Fatalf("auto-start of an expired sandbox: %v, want a StartRefusedError", err)
	}
	r.setDesired(sb.ID, store.StateRunning)
	if got := r.waitState(sb.ID, store.StateError); !strings.Contains(got.Error, "14 days") {
		t.Fatalf("a start without a disk failed with %q", got.Error)
	}
	if _, err := os.Stat(home); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a start without a disk made one: %v", err)
	}

	// The saved snapshot brings it back.
	if _, err := r.st.UpdateSandbox(ctx, sb.ID, func(s *store.Sandbox, _ *store.AuditEvent) error { s.RestoreFrom = saved.ID; return nil }, nil); err != nil {
		t.Fatal(err)
	}
	got := r.waitState(sb.ID, store.StateRunning)
	if got.DiskExpiredAt != nil {
		t.Fatalf("restored and running, still expired at %v", got.DiskExpiredAt)
	}
	if s := readFile(t, filepath.Join(drv.Home(&got), "f.txt")); s != "kept" {
		t.Fatalf("after the restore the file has %q", s)
	}
}
