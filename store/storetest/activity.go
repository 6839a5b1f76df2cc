package storetest

import (
	"slices"
	"testing"
	"time"

	"froog.tech/froog/store"
)

// testLastActive: a sandbox's last activity (store.Touch, written with
// UpdateSandbox) is kept to the microsecond, is what every read and the
// feed give back, survives a reopen, and stays through the writes that
// come after it (observed state, a stop and its end), none of which is
// activity. A touch moves nothing else: the auto-stop deadline, the
// desired state and UpdatedAt stay. An untouched sandbox has none, and a
// deleted one takes no touch.
func testLastActive(t *testing.T, o func() Backend) {
	s := open(t, o)
	a := account(t, s, 10)
	sb := sandbox(t, s, a.ID, "box", nil, now)
	if sb.LastActiveAt != nil {
		t.Fatalf("a new sandbox: last active %v, want none", sb.LastActiveAt)
	}
	deadline := now.Add(time.Hour)
	sb, err := s.UpdateSandbox(ctx, sb.ID, func(sb *store.Sandbox, _ *store.AuditEvent) error {
		sb.State, sb.StartedAt, sb.AutoStopAt, sb.TTLSecs = store.StateRunning, &now, &deadline, 3600
		return nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	head, err := s.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := s.Subscribe(ctx, head)
	if err != nil {
		t.Fatal(err)
	}
	touch := func(at time.Time) (store.Sandbox, error) {
		return s.UpdateSandbox(ctx, sb.ID, func(sb *store.Sandbox, _ *store.AuditEvent) error { store.Touch(sb, at); return nil }, nil)
	}
	// Nanoseconds the stores do not keep: a touch keeps the microsecond.
	at := now.Add(90*time.Second + 789*time.Nanosecond)
	want := store.Micro(at)
	up, err := touch(at)
	if err != nil || up.LastActiveAt == nil || !up.LastActiveAt.Equal(want) {
		t.Fatalf("touch: got %v, %v; want last active %v", up.LastActiveAt, err, want)
	}
	if !up.AutoStopAt.Equal(deadline) || up.DesiredState != store.StateRunning || up.State != store.StateRunning || !up.UpdatedAt.Equal(sb.UpdatedAt) {
		t.Fatalf("touch moved more than last active: auto-stop %v (want %v), desired %s, state %s, updated %v (want %v)",
			up.AutoStopAt, deadline, up.DesiredState, up.State, up.UpdatedAt, sb.UpdatedAt)
	}
	if c := collect(t, sub, 1)[0]; c.Kind != store.KindSandbox || c.Sandbox == nil || c.Sandbox.LastActiveAt == nil || !c.Sandbox.LastActiveAt.Equal(want) {
		t.Fatalf("the feed's change: %+v, want the sandbox last active at %v", c, want)
	}
	// A touch from a clock that is behind does not move it back.
	if up, err := touch(at.Add(-time.Minute)); err != nil || !up.LastActiveAt.Equal(want) {
		t.Fatalf("an earlier touch: got %v, %v; want it kept at %v", up.LastActiveAt, err, want)
	}

	// Writes that are not activity keep it: observed state, a stop, its end.
	if _, err := s.UpdateSandbox(ctx, sb.ID, func(sb *store.Sandbox, _ *store.AuditEvent) error {
		sb.SSHHost, sb.SSHPort = "10.0.0.2", 22
		return nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	st, err := s.StopSandbox(ctx, sb.ID, now.Add(2*time.Minute), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.FinishStop(ctx, st.ID, store.StopCompleted, "", now.Add(3*time.Minute)); err != nil {
		t.Fatal(err)
	}
	check := func(when string, s Backend) {
		t.Helper()
		reads := map[string]store.Sandbox{}
		var err error
		if reads["Sandbox"], err = s.Sandbox(ctx, a.ID, "box"); err != nil {
			t.Fatalf("%s: Sandbox: %v", when, err)
		}
		if reads["SandboxByID"], err = s.SandboxByID(ctx, sb.ID); err != nil {
			t.Fatalf("%s: SandboxByID: %v", when, err)
		}
		list, err := s.ListSandboxes(ctx, store.SandboxFilter{AccountID: a.ID})
		if err != nil || len(list) != 1 {
			t.Fatalf("%s: ListSandboxes: %+v, %v", when, list, err)
		}
		reads["ListSandboxes"] = list[0]
		all, err := s.AllSandboxes(ctx)
		if i := slices.IndexFunc(all, func(x store.Sandbox) bool { return x.ID == sb.ID }); err != nil || i < 0 {
			t.Fatalf("%s: AllSandboxes: %+v, %v", when, all, err)
		} else {
			reads["AllSandboxes"] = all[i]
		}
		for read, got := range reads {
			if got.LastActiveAt == nil || !got.LastActiveAt.Equal(want) {
				t.Errorf("%s: %s: last active %v, want %v", when, read, got.LastActiveAt, want)
			}
		}
	}
	check("after a stop", s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, o)
	check("after a reopen", s)

	// Another sandbox stays untouched; a deleted one takes no touch.
	other := sandbox(t, s, a.ID, "other", nil, now)
	if got, _ := s.SandboxByID(ctx, other.ID); got.LastActiveAt != nil {
		t.Fatalf("an untouched sandbox: last active %v, want none", got.LastActiveAt)
	}
	if err := s.DeleteSandbox(ctx, other.ID, now, nil); err != nil {
		t.Fatal(err)
	}
	_, err = s.UpdateSandbox(ctx, other.ID, func(sb *store.Sandbox, _ *store.AuditEvent) error { store.Touch(sb, at); return nil }, nil)
	wantErr(t, "touch a deleted sandbox", err, store.ErrNotFound)
}
