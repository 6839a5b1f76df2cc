package storetest

import (
	"strings"
	"testing"
	"time"

	"froog.tech/froog/store"
)

func register(t *testing.T, s Backend, name string, capacity int, seen time.Time) store.Host {
	t.Helper()
	h, err := s.RegisterHost(ctx, store.Host{Name: name, Capacity: capacity, Address: "192.0.2.1", CreatedAt: now, SeenAt: seen})
	if err != nil {
		t.Fatalf("RegisterHost %s: %v", name, err)
	}
	return h
}

func hostsByName(t *testing.T, s Backend) map[string]store.Host {
	t.Helper()
	list, err := s.Hosts(ctx)
	if err != nil {
		t.Fatalf("Hosts: %v", err)
	}
	out := map[string]store.Host{}
	for i, h := range list {
		if i > 0 && list[i-1].Name >= h.Name {
			t.Fatalf("Hosts not by name: %v before %v", list[i-1].Name, h.Name)
		}
		out[h.Name] = h
	}
	return out
}

// testHostPlacement: new sandboxes spread by free room over live hosts
// that are neither draining nor down; a fork stays on its source's host.
func testHostPlacement(t *testing.T, o func() Backend) {
	s := open(t, o)
	a := register(t, s, "h-a", 2, now)
	b := register(t, s, "h-b", 3, now)
	register(t, s, "h-old", 9, now.Add(-time.Hour)) // not seen since liveSince
	register(t, s, "h-drain", 9, now)
	if _, err := s.SetHostDraining(ctx, "h-drain", true); err != nil {
		t.Fatalf("SetHostDraining: %v", err)
	}
	_, err := s.SetHostDraining(ctx, "nope", true)
	wantErr(t, "SetHostDraining(unknown)", err, store.ErrNotFound)
	// A heartbeat keeps the drain.
	if h := register(t, s, "h-drain", 9, now); !h.Draining {
		t.Fatalf("RegisterHost undrained the host: %+v", h)
	}

	acct := account(t, s, 20)
	live := now.Add(-time.Minute)
	want := []string{b.ID, a.ID, b.ID, a.ID, b.ID, ""} // most room first, by name on a tie; then full
	var placed []store.Sandbox
	for i, w := range want {
		sb := sandbox(t, s, acct.ID, "sb"+string(rune('a'+i)), nil, now)
		got, err := s.PlaceSandbox(ctx, sb.ID, live)
		if err != nil || got.HostID != w {
			t.Fatalf("PlaceSandbox #%d: host %q, %v; want %q", i, got.HostID, err, w)
		}
		if again, err := s.SandboxByID(ctx, sb.ID); err != nil || again.HostID != w {
			t.Fatalf("stored host of #%d: %q, %v; want %q", i, again.HostID, err, w)
		}
		placed = append(placed, got)
	}
	// Placed already: as it is.
	if got, err := s.PlaceSandbox(ctx, placed[0].ID, live); err != nil || got.HostID != b.ID {
		t.Fatalf("PlaceSandbox again: %q, %v", got.HostID, err)
	}
	_, err = s.PlaceSandbox(ctx, "sb_nope", live)
	wantErr(t, "PlaceSandbox(unknown)", err, store.ErrNotFound)
	hs := hostsByName(t, s)
	if len(hs) != 4 || hs["h-a"].Sandboxes != 2 || hs["h-b"].Sandboxes != 3 || hs["h-old"].Sandboxes != 0 || !hs["h-drain"].Draining || hs["h-a"].Address != "192.0.2.1" {
		t.Fatalf("Hosts: %+v", hs)
	}

	// Undrained, h-drain takes the one left over.
	if h, err := s.SetHostDraining(ctx, "h-drain", false); err != nil || h.Draining {
		t.Fatalf("undrain: %+v, %v", h, err)
	}
	if got, err := s.PlaceSandbox(ctx, placed[5].ID, live); err != nil || got.HostID != hs["h-drain"].ID {
		t.Fatalf("PlaceSandbox after undrain: %q, %v", got.HostID, err)
	}

	// Deleted sandboxes free their room; a fork goes where its source is,
	// even though another host has more room.
	for _, sb := range []store.Sandbox{placed[0], placed[2], placed[1]} {
		if err := s.DeleteSandbox(ctx, sb.ID, now, nil); err != nil {
			t.Fatal(err)
		}
	}
	fork, err := s.CreateSandbox(ctx, store.Sandbox{AccountID: acct.ID, Name: "fork", Size: "small", OS: "ubuntu-24.04", ForkOf: placed[3].ID,
		DesiredState: store.StateRunning, State: store.StateCreating, CreatedAt: now, UpdatedAt: now}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.PlaceSandbox(ctx, fork.ID, live); err != nil || got.HostID != a.ID {
		t.Fatalf("PlaceSandbox(fork): %q, %v; want its source's host %q", got.HostID, err, a.ID)
	}
	if hs := hostsByName(t, s); hs["h-a"].Sandboxes != 2 || hs["h-b"].Sandboxes != 1 {
		t.Fatalf("Hosts after deletes: a %d, b %d", hs["h-a"].Sandboxes, hs["h-b"].Sandboxes)
	}
	// A fork from a snapshot goes where the snapshot is.
	sn, err := s.CreateSnapshot(ctx, store.Snapshot{AccountID: acct.ID, SandboxID: placed[3].ID, Sandbox: placed[3].Name, HostID: hs["h-drain"].ID,
		Saved: true, Label: "keep", Status: store.SnapshotCreating, CreatedAt: now}, nil)
	if err != nil {
		t.Fatal(err)
	}
	fromSnap, err := s.CreateSandbox(ctx, store.Sandbox{AccountID: acct.ID, Name: "from-snap", Size: "small", OS: "ubuntu-24.04", ForkOf: placed[3].ID, ForkSnapshot: sn.ID,
		DesiredState: store.StateRunning, State: store.StateCreating, CreatedAt: now, UpdatedAt: now}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.PlaceSandbox(ctx, fromSnap.ID, live); err != nil || got.HostID != hs["h-drain"].ID {
		t.Fatalf("PlaceSandbox(fork of a snapshot): %q, %v; want the snapshot's host %q", got.HostID, err, hs["h-drain"].ID)
	}
}

// testHostsDown: a host whose heartbeat stops is marked down once; its
// sandboxes that run go to error saying why, its pending stops fail; the
// next heartbeat brings it back.
func testHostsDown(t *testing.T, o func() Backend) {
	s := open(t, o)
	a := register(t, s, "h-a", 8, now)
	b := register(t, s, "h-b", 8, now)
	acct := account(t, s, 20)
	on := func(name, host, state string) store.Sandbox {
		sb := sandbox(t, s, acct.ID, name, nil, now)
		sb, err := s.UpdateSandbox(ctx, sb.ID, func(x *store.Sandbox, _ *store.AuditEvent) error { x.HostID, x.State = host, state; return nil }, nil)
		if err != nil {
			t.Fatal(err)
		}
		return sb
	}
	run := on("run", a.ID, store.StateRunning)
	cold := on("cold", a.ID, store.StateStopped)
	stopping := on("stopping", a.ID, store.StateRunning)
	other := on("other", b.ID, store.StateRunning)
	st, err := s.StopSandbox(ctx, stopping.ID, now, nil)
	if err != nil || st.Status != store.StopPending {
		t.Fatalf("StopSandbox: %+v, %v", st, err)
	}
	register(t, s, "h-b", 8, now.Add(2*time.Minute)) // h-b beats on, h-a does not
	at := now.Add(2 * time.Minute)
	marked, err := s.MarkHostsDown(ctx, now.Add(time.Minute), at)
	if err != nil || len(marked) != 1 || marked[0].Name != "h-a" || marked[0].DownAt == nil || !marked[0].DownAt.Equal(at) {
		t.Fatalf("MarkHostsDown: %+v, %v", marked, err)
	}
	for _, c := range []struct {
		sb    store.Sandbox
		state string
		down  bool
	}{{run, store.StateError, true}, {stopping, store.StateError, true}, {cold, store.StateStopped, false}, {other, store.StateRunning, false}} {
		got, err := s.SandboxByID(ctx, c.sb.ID)
		if err != nil || got.State != c.state || strings.Contains(got.Error, "h-a stopped heart-beating") != c.down || got.DesiredState != c.sb.DesiredState && c.sb.Name != "stopping" {
			t.Fatalf("%s after its host went down: state %q error %q, %v; want %s", c.sb.Name, got.State, got.Error, err, c.state)
		}
		if got.PendingStopID != "" {
			t.Fatalf("%s still has a pending stop", c.sb.Name)
		}
	}
	st, err = s.Stop(ctx, acct.ID, st.ID)
	if err != nil || st.Status != store.StopFailed || !strings.Contains(st.Error, "h-a stopped heart-beating") || st.EndedAt == nil {
		t.Fatalf("pending stop after host down: %+v, %v", st, err)
	}
	// Once only.
	if again, err := s.MarkHostsDown(ctx, now.Add(time.Minute), at); err != nil || len(again) != 0 {
		t.Fatalf("MarkHostsDown again: %+v, %v", again, err)
	}
	// A down host gets no new sandboxes.
	sb := sandbox(t, s, acct.ID, "new", nil, now)
	if got, err := s.PlaceSandbox(ctx, sb.ID, now.Add(-time.Hour)); err != nil || got.HostID != b.ID {
		t.Fatalf("PlaceSandbox with h-a down: %q, %v; want h-b", got.HostID, err)
	}
	// Its next heartbeat: up again.
	if h := register(t, s, "h-a", 8, at); h.DownAt != nil {
		t.Fatalf("RegisterHost kept the host down: %+v", h)
	}
	if hs := hostsByName(t, s); hs["h-a"].DownAt != nil || hs["h-a"].Sandboxes != 3 || hs["h-b"].Sandboxes != 2 {
		t.Fatalf("Hosts after return: %+v", hs)
	}
}
