package storetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"froog.tech/froog/store"
)

// testSnapshots: snapshot records are created for a live sandbox of the
// account, listed newest first by filter, changed, deleted (hidden at
// once, still on their host for hostctl) and purged; every write is on
// the feed; a saved one outlives its sandbox; records survive a reopen.
func testSnapshots(t *testing.T, o func() Backend) {
	s := open(t, o)
	a := account(t, s, 10)
	other := account(t, s, 10)
	sb := sandbox(t, s, a.ID, "box", nil, now)
	sb2 := sandbox(t, s, a.ID, "box2", nil, now)
	head, err := s.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := s.Subscribe(ctx, head)
	if err != nil {
		t.Fatal(err)
	}
	mk := func(sbx store.Sandbox, saved bool, label string, at time.Time) store.Snapshot {
		t.Helper()
		sn, err := s.CreateSnapshot(ctx, store.Snapshot{AccountID: sbx.AccountID, SandboxID: sbx.ID, Sandbox: sbx.Name, HostID: "host_a",
			Saved: saved, Label: label, Status: store.SnapshotCreating, CreatedAt: at}, nil)
		if err != nil {
			t.Fatalf("CreateSnapshot: %v", err)
		}
		if sn.ID == "" {
			t.Fatal("CreateSnapshot gave no id")
		}
		return sn
	}
	auto1 := mk(sb, false, "", now)
	saved := mk(sb, true, "web-stack", now.Add(time.Second))
	auto2 := mk(sb, false, "", now.Add(2*time.Second))
	onOther := mk(sb2, false, "", now.Add(3*time.Second))

	if _, err := s.CreateSnapshot(ctx, store.Snapshot{ID: auto1.ID, AccountID: a.ID, SandboxID: sb.ID, CreatedAt: now}, nil); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("same id again: got %v, want ErrConflict", err)
	}
	if _, err := s.CreateSnapshot(ctx, store.Snapshot{AccountID: other.ID, SandboxID: sb.ID, CreatedAt: now}, nil); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another account's sandbox: got %v, want ErrNotFound", err)
	}
	if _, err := s.Snapshot(ctx, other.ID, saved.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another account reads it: got %v, want ErrNotFound", err)
	}

	ids := func(list []store.Snapshot) []string {
		out := []string{}
		for _, sn := range list {
			out = append(out, sn.ID)
		}
		return out
	}
	list := func(f store.SnapshotFilter) []string {
		t.Helper()
		l, err := s.ListSnapshots(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		return ids(l)
	}
	for _, tc := range []struct {
		name string
		f    store.SnapshotFilter
		want []string
	}{
		{"account", store.SnapshotFilter{AccountID: a.ID}, []string{onOther.ID, auto2.ID, saved.ID, auto1.ID}},
		{"sandbox", store.SnapshotFilter{AccountID: a.ID, SandboxID: sb.ID}, []string{auto2.ID, saved.ID, auto1.ID}},
		{"saved", store.SnapshotFilter{AccountID: a.ID, SavedOnly: true}, []string{saved.ID}},
		{"label", store.SnapshotFilter{AccountID: a.ID, Label: "web-stack"}, []string{saved.ID}},
		{"other account", store.SnapshotFilter{AccountID: other.ID}, []string{}},
	} {
		if got := list(tc.f); !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}

	ready := now.Add(time.Minute)
	up, err := s.UpdateSnapshot(ctx, saved.ID, func(sn *store.Snapshot) error {
		sn.Status, sn.ReadyAt, sn.Bytes = store.SnapshotAvailable, &ready, 1234
		sn.AccountID = other.ID // ignored: a snapshot stays its account's
		return nil
	}, &store.AuditEvent{AccountID: a.ID, At: ready, Action: "snapshot.save", Target: "box"})
	if err != nil {
		t.Fatal(err)
	}
	if up.Status != store.SnapshotAvailable || up.Bytes != 1234 || up.AccountID != a.ID || !up.ReadyAt.Equal(ready) {
		t.Fatalf("after update: %+v", up)
	}
	if got := list(store.SnapshotFilter{AccountID: a.ID, Status: store.SnapshotAvailable}); !slices.Equal(got, []string{saved.ID}) {
		t.Fatalf("available: got %v", got)
	}
	boom := errors.New("boom")
	if _, err := s.UpdateSnapshot(ctx, saved.ID, func(sn *store.Snapshot) error { sn.Status = "x"; return boom }, nil); !errors.Is(err, boom) {
		t.Fatalf("fn's error: got %v", err)
	}
	if _, err := s.UpdateSnapshot(ctx, "snap_none", func(*store.Snapshot) error { return nil }, nil); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("update a missing one: got %v", err)
	}
	ev, err := s.Audit(ctx, a.ID, 0, 1)
	if err != nil || len(ev) != 1 || ev[0].Action != "snapshot.save" {
		t.Fatalf("audit of the update: %+v %v", ev, err)
	}

	// Purging a live one is refused; a deleted one is hidden, still on
	// its host, then purged.
	if err := s.PurgeSnapshot(ctx, auto1.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("purge a live one: got %v, want ErrNotFound", err)
	}
	if _, err := s.UpdateSnapshot(ctx, auto1.ID, func(sn *store.Snapshot) error { sn.DeletedAt = &ready; return nil }, nil); err != nil {
		t.Fatal(err)
	}
	if got := list(store.SnapshotFilter{AccountID: a.ID, SandboxID: sb.ID}); !slices.Equal(got, []string{auto2.ID, saved.ID}) {
		t.Fatalf("after a delete: got %v", got)
	}
	host, err := s.HostSnapshots(ctx, "host_a")
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(host); !slices.Equal(got, []string{auto1.ID, saved.ID, auto2.ID, onOther.ID}) {
		t.Fatalf("host's: got %v, want every one, oldest first", got)
	}
	if err := s.PurgeSnapshot(ctx, auto1.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Snapshot(ctx, a.ID, auto1.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("purged: got %v", err)
	}

	// A saved one outlives its sandbox; a deleted sandbox takes no new ones.
	if err := s.DeleteSandbox(ctx, sb.ID, now, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Snapshot(ctx, a.ID, saved.ID); err != nil {
		t.Fatalf("saved one after its sandbox's delete: %v", err)
	}
	if _, err := s.CreateSnapshot(ctx, store.Snapshot{AccountID: a.ID, SandboxID: sb.ID, CreatedAt: now}, nil); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a deleted sandbox: got %v, want ErrNotFound", err)
	}

	// The feed carries every snapshot write, the record with it.
	want := []string{auto1.ID + " put", saved.ID + " put", auto2.ID + " put", onOther.ID + " put", saved.ID + " put", auto1.ID + " deleted", auto1.ID + " purged"}
	var got []string
	for len(got) < len(want) {
		c, err := sub.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if c.Kind != store.KindSnapshot {
			continue
		}
		d := "put"
		if c.Deleted {
			d = "purged"
		} else if c.Snapshot == nil || c.Snapshot.ID != c.ID {
			t.Fatalf("change without its record: %+v", c)
		} else if c.Snapshot.DeletedAt != nil {
			d = "deleted"
		}
		got = append(got, c.ID+" "+d)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("feed: got %v, want %v", got, want)
	}

	// Reopened, the records are there as written.
	s.Close()
	s2 := open(t, o)
	back, err := s2.Snapshot(ctx, a.ID, saved.ID)
	if err != nil || back.Status != store.SnapshotAvailable || back.Label != "web-stack" || !back.Saved || back.Bytes != 1234 {
		t.Fatalf("after reopen: %+v %v", back, err)
	}
}
