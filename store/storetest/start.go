package storetest

import (
	"errors"
	"sync"
	"testing"

	"froog.tech/froog/store"
)

// testAutoStart: many requests (on one process or several) asking for a
// stopped sandbox at once make one start and one audit event; the
// account's limit refuses it like a start; a sandbox in error is refused.
func testAutoStart(t *testing.T, o func() Backend) {
	s := open(t, o)
	a := account(t, s, 1)
	sb := sandbox(t, s, a.ID, "auto", nil, now)
	stopped, err := s.UpdateSandbox(ctx, sb.ID, func(sb *store.Sandbox, _ *store.AuditEvent) error {
		sb.DesiredState, sb.State, sb.AutoStart = store.StateStopped, store.StateStopped, true
		return nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	starts := 0
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ev := &store.AuditEvent{AccountID: a.ID, At: now, Actor: "public-url", ActorLabel: "auto-3000-abc123"}
			started, err := store.AutoStart(ctx, s, stopped.ID, ev, now)
			if err != nil {
				t.Errorf("AutoStart: %v", err)
			}
			if started {
				mu.Lock()
				starts++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if starts != 1 {
		t.Fatalf("%d starts, want 1", starts)
	}
	evs, err := s.Audit(ctx, a.ID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs {
		if e.Action == "sandbox.auto_start" {
			n++
			if e.Actor != "public-url" || e.Target != "auto" {
				t.Errorf("event %+v", e)
			}
		}
	}
	if n != 1 {
		t.Fatalf("%d sandbox.auto_start events, want 1", n)
	}
	if got, _ := s.SandboxByID(ctx, sb.ID); got.DesiredState != store.StateRunning {
		t.Fatalf("desired state %s", got.DesiredState)
	}

	// The account runs one sandbox at most: a second one's auto-start is
	// refused as a start would be.
	two, err := s.CreateSandbox(ctx, store.Sandbox{AccountID: a.ID, Name: "two", Size: "small", DesiredState: store.StateStopped, State: store.StateStopped, AutoStart: true, CreatedAt: now, UpdatedAt: now}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err = store.AutoStart(ctx, s, two.ID, &store.AuditEvent{AccountID: a.ID, At: now, Actor: "public-url"}, now); !errors.As(err, new(*store.LimitError)) {
		t.Fatalf("over the limit: %v, want a LimitError", err)
	}

	// A sandbox in error needs its owner.
	broken, err := s.UpdateSandbox(ctx, sb.ID, func(sb *store.Sandbox, _ *store.AuditEvent) error {
		sb.DesiredState, sb.State = store.StateStopped, store.StateError
		return nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.AutoStart(ctx, s, broken.ID, &store.AuditEvent{AccountID: a.ID, At: now, Actor: "public-url"}, now); !errors.As(err, new(*store.StartRefusedError)) {
		t.Fatalf("in error: %v, want a StartRefusedError", err)
	}
}
