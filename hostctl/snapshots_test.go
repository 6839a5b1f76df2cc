package hostctl_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"froog.tech/froog/hostctl"
	"froog.tech/froog/hostctl/local"
	"froog.tech/froog/internal/testkit"
	"froog.tech/froog/internal/testkit/live"
	"froog.tech/froog/internal/wait"
	"froog.tech/froog/store"
)

// localIn is a local driver on dir (a temporary folder when ""), closed
// when the test ends.
func localIn(t *testing.T, dir string) *local.Driver {
	d, _ := live.Driver(t, local.Options{Dir: dir})
	return d
}

func (r *rig) snapshots(f store.SnapshotFilter) []store.Snapshot {
	r.t.Helper()
	f.AccountID = r.acct.ID
	list, err := r.st.ListSnapshots(ctx, f)
	if err != nil {
		r.t.Fatal(err)
	}
	return list
}

// save asks for a saved snapshot of sb, labelled label, and waits until
// hostctl has taken it.
func (r *rig) save(sb *store.Sandbox, label string) store.Snapshot {
	r.t.Helper()
	sn, err := r.st.CreateSnapshot(ctx, store.Snapshot{AccountID: r.acct.ID, SandboxID: sb.ID, Sandbox: sb.Name, HostID: sb.HostID,
		Saved: true, Label: label, Status: store.SnapshotCreating, CreatedAt: store.Micro(time.Now())}, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	wait.For(r.t, 15*time.Second, "the saved snapshot "+label, func() bool {
		sn, _ = r.st.Snapshot(ctx, r.acct.ID, sn.ID)
		return sn.Status == store.SnapshotAvailable
	})
	return sn
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestHourlySnapshots: with an injected clock, a running sandbox gets an
// automatic snapshot each hour and one at its stop, each with the files
// of its moment, and only the newest 3 are kept (the others' files go
// too); a sandbox with snapshots off gets none.
func TestHourlySnapshots(t *testing.T) {
	dir := t.TempDir()
	drv := localIn(t, dir)
	clk := &testkit.FakeClock{}
	r := newRig(t, drv, hostctl.Options{Now: clk.Now})
	sb := r.create("box", func(s *store.Sandbox) { s.TTLSecs = 0 })
	off := r.create("off", func(s *store.Sandbox) { s.TTLSecs, s.NoSnapshots = 0, true })
	sb = r.waitState(sb.ID, store.StateRunning)
	r.waitState(off.ID, store.StateRunning)
	if got := r.snapshots(store.SnapshotFilter{}); len(got) != 0 {
		t.Fatalf("snapshots at the start: %+v", got)
	}

	for i := 1; i <= 5; i++ {
		want := string(rune('0' + i))
		if err := os.WriteFile(filepath.Join(drv.Home(&sb), "f.txt"), []byte(want), 0o600); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Hour + time.Second)
		var list []store.Snapshot
		wait.For(t, 15*time.Second, "hourly snapshot "+want, func() bool {
			list = r.snapshots(store.SnapshotFilter{SandboxID: sb.ID, Status: store.SnapshotAvailable})
			return len(list) == min(i, store.AutoSnapshotsKept) && readFile(t, filepath.Join(dir, ".snapshots", list[0].ID, "f.txt")) == want
		})
		for _, sn := range list {
			if sn.Saved || sn.Reason != store.SnapshotHourly || sn.HostID != sb.HostID || sn.Bytes == 0 || sn.ReadyAt == nil {
				t.Fatalf("snapshot %d: %+v", i, sn)
			}
		}
		// Only the kept ones have files (the reaper removed the others').
		wait.For(t, 15*time.Second, "the dropped snapshots' files removed", func() bool {
			entries, _ := os.ReadDir(filepath.Join(dir, ".snapshots"))
			return len(entries) == len(list)
		})
	}

	// The stop takes one more, and the oldest hourly one goes.
	if err := os.WriteFile(filepath.Join(drv.Home(&sb), "f.txt"), []byte("at stop"), 0o600); err != nil {
		t.Fatal(err)
	}
	r.setDesired(sb.ID, store.StateStopped)
	r.waitState(sb.ID, store.StateStopped)
	var list []store.Snapshot
	wait.For(t, 15*time.Second, "the stop's snapshot", func() bool {
		list = r.snapshots(store.SnapshotFilter{SandboxID: sb.ID, Status: store.SnapshotAvailable})
		return len(list) == 3 && list[0].Reason == store.SnapshotStop
	})
	if got := readFile(t, filepath.Join(dir, ".snapshots", list[0].ID, "f.txt")); got != "at stop" {
		t.Fatalf("the stop's snapshot has %q", got)
	}
	if got := r.snapshots(store.SnapshotFilter{SandboxID: off.ID}); len(got) != 0 {
		t.Fatalf("a sandbox with snapshots off got %d", len(got))
	}
}

// TestSnapshotRestoreFork: a saved snapshot asked through the store is
// taken; a restore rolls the files back (keeping the state it replaced
// as an automatic snapshot) and boots the sandbox again; forks from the
// snapshot have its files; deleting the sandbox takes its automatic
// snapshots and leaves the saved one, until that is deleted too.
func TestSnapshotRestoreFork(t *testing.T) {
	dir := t.TempDir()
	drv := localIn(t, dir)
	r := newRig(t, drv, hostctl.Options{})
	sb := r.create("box", nil)
	sb = r.waitState(sb.ID, store.StateRunning)
	file := filepath.Join(drv.Home(&sb), "f.txt")
	if err := os.WriteFile(file, []byte("before"), 0o600); err != nil {
		t.Fatal(err)
	}
	saved := r.save(&sb, "base")

	if err := os.WriteFile(file, []byte("after"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := r.st.UpdateSandbox(ctx, sb.ID, func(s *store.Sandbox, _ *store.AuditEvent) error { s.RestoreFrom = saved.ID; return nil }, nil); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 15*time.Second, "restored and running again", func() bool {
		got, _ := r.st.SandboxByID(ctx, sb.ID)
		return got.RestoreFrom == "" && got.State == store.StateRunning
	})
	if got := readFile(t, file); got != "before" {
		t.Fatalf("after the restore the file has %q, want before", got)
	}
	undo := r.snapshots(store.SnapshotFilter{SandboxID: sb.ID, Status: store.SnapshotAvailable})
	if len(undo) != 2 || undo[0].Reason != store.SnapshotRestore || readFile(t, filepath.Join(dir, ".snapshots", undo[0].ID, "f.txt")) != "after" {
		t.Fatalf("the state before the restore is not kept: %+v", undo)
	}

	var forks []store.Sandbox
	for _, name := range []string{"copy-1", "copy-2"} {
		forks = append(forks, r.create(name, func(s *store.Sandbox) { s.ForkOf, s.ForkSnapshot = sb.ID, saved.ID }))
	}
	for _, f := range forks {
		f = r.waitState(f.ID, store.StateRunning)
		if got := readFile(t, filepath.Join(drv.Home(&f), "f.txt")); got != "before" {
			t.Fatalf("fork %s has %q", f.Name, got)
		}
	}

	if err := r.st.DeleteSandbox(ctx, sb.ID, store.Micro(time.Now()), nil); err != nil {
		t.Fatal(err)
	}
	r.waitState(sb.ID, "gone")
	wait.For(t, 15*time.Second, "only the saved snapshot left", func() bool {
		entries, _ := os.ReadDir(filepath.Join(dir, ".snapshots"))
		list := r.snapshots(store.SnapshotFilter{})
		return len(entries) == 1 && entries[0].Name() == saved.ID && len(list) == 1 && list[0].ID == saved.ID
	})
	now := store.Micro(time.Now())
	if _, err := r.st.UpdateSnapshot(ctx, saved.ID, func(s *store.Snapshot) error { s.DeletedAt = &now; return nil }, nil); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 15*time.Second, "the saved snapshot's files and record gone", func() bool {
		entries, _ := os.ReadDir(filepath.Join(dir, ".snapshots"))
		_, err := r.st.Snapshot(ctx, r.acct.ID, saved.ID)
		return len(entries) == 0 && err != nil
	})
}

// TestSavedLabelReplaced: saving a label again replaces the older
// snapshot of that label once the new copy is available, files and all.
func TestSavedLabelReplaced(t *testing.T) {
	dir := t.TempDir()
	drv := localIn(t, dir)
	r := newRig(t, drv, hostctl.Options{})
	sb := r.waitState(r.create("box", nil).ID, store.StateRunning)
	save := func(content string) store.Snapshot {
		t.Helper()
		if err := os.WriteFile(filepath.Join(drv.Home(&sb), "f.txt"), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		sn, err := r.st.CreateSnapshot(ctx, store.Snapshot{AccountID: r.acct.ID, SandboxID: sb.ID, Sandbox: sb.Name, HostID: sb.HostID,
			Saved: true, Label: "web-stack", Status: store.SnapshotCreating, CreatedAt: store.Micro(time.Now())}, nil)
		if err != nil {
			t.Fatal(err)
		}
		wait.For(t, 15*time.Second, "saved "+content, func() bool {
			sn, _ = r.st.Snapshot(ctx, r.acct.ID, sn.ID)
			return sn.Status == store.SnapshotAvailable
		})
		return sn
	}
	first := save("v1")
	second := save("v2")
	wait.For(t, 15*time.Second, "the older web-stack gone", func() bool {
		list := r.snapshots(store.SnapshotFilter{SavedOnly: true, Label: "web-stack"})
		entries, _ := os.ReadDir(filepath.Join(dir, ".snapshots"))
		return len(list) == 1 && list[0].ID == second.ID && len(entries) == 1
	})
	if _, err := os.Stat(filepath.Join(dir, ".snapshots", first.ID)); !os.IsNotExist(err) {
		t.Fatalf("the replaced snapshot's files: %v", err)
	}
	if got := readFile(t, filepath.Join(dir, ".snapshots", second.ID, "f.txt")); got != "v2" {
		t.Fatalf("web-stack has %q", got)
	}
}

// TestSavedLabelOrder: a saved copy replaces only the copies of its name
// asked before it. One asked later that was ready first (another
// sandbox's, saved while this one was being copied) stays, and the older
// copy gives way to it when it is ready: the API decides who may replace
// whom (a key limited to some sandboxes never replaces another's), and
// this order keeps a late copy from undoing that.
func TestSavedLabelOrder(t *testing.T) {
	dir := t.TempDir()
	drv := localIn(t, dir)
	r := newRig(t, drv, hostctl.Options{})
	box := r.waitState(r.create("box", nil).ID, store.StateRunning)
	other := r.waitState(r.create("other", nil).ID, store.StateRunning)
	asked := store.Micro(time.Now())
	later := asked.Add(time.Second)
	newer, err := r.st.CreateSnapshot(ctx, store.Snapshot{AccountID: r.acct.ID, SandboxID: other.ID, Sandbox: other.Name, HostID: other.HostID,
		Saved: true, Label: "tpl", Status: store.SnapshotAvailable, CreatedAt: later, ReadyAt: &later}, nil)
	if err != nil {
		t.Fatal(err)
	}
	older, err := r.st.CreateSnapshot(ctx, store.Snapshot{AccountID: r.acct.ID, SandboxID: box.ID, Sandbox: box.Name, HostID: box.HostID,
		Saved: true, Label: "tpl", Status: store.SnapshotCreating, CreatedAt: asked}, nil)
	if err != nil {
		t.Fatal(err)
	}
	wait.For(t, 15*time.Second, "the older copy taken and given way", func() bool {
		got, err := r.st.Snapshot(ctx, r.acct.ID, older.ID)
		return err != nil || got.DeletedAt != nil
	})
	if list := r.snapshots(store.SnapshotFilter{SavedOnly: true, Label: "tpl"}); len(list) != 1 || list[0].ID != newer.ID {
		t.Fatalf("tpl after the older copy was ready: %+v, want only %s (other's, asked later)", list, newer.ID)
	}
}
