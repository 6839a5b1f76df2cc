package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"froog.tech/froog/store"
)

func testSandboxCRUD(t *testing.T, o func() Backend) {
	s := open(t, o)
	a := account(t, s, 10)
	sb := sandbox(t, s, a.ID, "box", map[string]string{"team": "web"}, now)
	got, err := s.Sandbox(ctx, a.ID, "box")
	if err != nil || got.ID != sb.ID || got.Labels["team"] != "web" || !got.CreatedAt.Equal(now) {
		t.Fatalf("Sandbox: got %+v, %v", got, err)
	}
	_, err = s.CreateSandbox(ctx, store.Sandbox{AccountID: a.ID, Name: "box", CreatedAt: now}, nil)
	wantErr(t, "CreateSandbox(same name)", err, store.ErrConflict)

	// Another account may use the name.
	b := account(t, s, 10)
	sandbox(t, s, b.ID, "box", nil, now)

	// A failing update writes nothing.
	boom := errors.New("boom")
	_, err = s.UpdateSandbox(ctx, sb.ID, func(sb *store.Sandbox, _ *store.AuditEvent) error {
		sb.Name = "changed"
		return boom
	}, nil)
	wantErr(t, "UpdateSandbox(fn fails)", err, boom)
	if got, _ := s.SandboxByID(ctx, sb.ID); got.Name != "box" {
		t.Fatalf("after failed update: name %q, want box", got.Name)
	}

	sandbox(t, s, a.ID, "other", nil, now.Add(time.Second))
	_, err = s.UpdateSandbox(ctx, sb.ID, func(sb *store.Sandbox, _ *store.AuditEvent) error { sb.Name = "other"; return nil }, nil)
	wantErr(t, "rename onto a taken name", err, store.ErrConflict)

	up, err := s.UpdateSandbox(ctx, sb.ID, func(sb *store.Sandbox, _ *store.AuditEvent) error {
		sb.Name, sb.TTLSecs, sb.Labels["tier"] = "renamed", 60, "gold"
		return nil
	}, nil)
	if err != nil || up.Name != "renamed" || up.TTLSecs != 60 || up.Labels["tier"] != "gold" {
		t.Fatalf("UpdateSandbox: got %+v, %v", up, err)
	}
	if _, err := s.Sandbox(ctx, a.ID, "box"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("old name after rename: got %v, want ErrNotFound", err)
	}

	// Deleting frees the name at once and hides the sandbox.
	if err := s.DeleteSandbox(ctx, sb.ID, now, nil); err != nil {
		t.Fatalf("DeleteSandbox: %v", err)
	}
	_, err = s.Sandbox(ctx, a.ID, "renamed")
	wantErr(t, "Sandbox(deleted)", err, store.ErrNotFound)
	gone, err := s.SandboxByID(ctx, sb.ID)
	if err != nil || gone.DeletedAt == nil || gone.DesiredState != store.StateDeleted {
		t.Fatalf("SandboxByID(deleted): got %+v, %v; want it kept for reaping", gone, err)
	}
	err = s.DeleteSandbox(ctx, sb.ID, now, nil)
	wantErr(t, "DeleteSandbox twice", err, store.ErrNotFound)
	sandbox(t, s, a.ID, "renamed", nil, now)
}

func testSandboxList(t *testing.T, o func() Backend) {
	s := open(t, o)
	a := account(t, s, 100)
	other := account(t, s, 100)
	sandbox(t, s, other.ID, "ci-x", nil, now)
	for i := 0; i < 6; i++ {
		labels := map[string]string{"team": []string{"web", "api"}[i%2]}
		if i < 2 {
			labels["job"] = fmt.Sprint(i)
		}
		sb := store.Sandbox{AccountID: a.ID, Name: fmt.Sprintf("ci-%d", i), State: store.StateCreating, Labels: labels, CreatedAt: now.Add(time.Duration(i) * time.Second)}
		if i == 5 {
			sb.CreatedByKey = "key_maker"
		}
		if _, err := s.CreateSandbox(ctx, sb, nil); err != nil {
			t.Fatal(err)
		}
	}
	sandbox(t, s, a.ID, "dev", nil, now.Add(time.Hour))
	names := func(f store.SandboxFilter) []string {
		t.Helper()
		f.AccountID = a.ID
		list, err := s.ListSandboxes(ctx, f)
		if err != nil {
			t.Fatalf("ListSandboxes(%+v): %v", f, err)
		}
		var out []string
		for _, sb := range list {
			out = append(out, sb.Name)
		}
		return out
	}
	tests := []struct {
		name string
		f    store.SandboxFilter
		want string
	}{
		{"all, oldest first", store.SandboxFilter{}, "[ci-0 ci-1 ci-2 ci-3 ci-4 ci-5 dev]"},
		{"prefix", store.SandboxFilter{NamePrefix: "ci-"}, "[ci-0 ci-1 ci-2 ci-3 ci-4 ci-5]"},
		{"name", store.SandboxFilter{Name: "dev"}, "[dev]"},
		{"label", store.SandboxFilter{Labels: map[string]string{"team": "web"}}, "[ci-0 ci-2 ci-4]"},
		{"two labels", store.SandboxFilter{Labels: map[string]string{"team": "web", "job": "0"}}, "[ci-0]"},
		{"label key", store.SandboxFilter{LabelKeys: []string{"job"}}, "[ci-0 ci-1]"},
		{"names", store.SandboxFilter{Names: []string{"dev", "ci-3", "nope"}}, "[ci-3 dev]"},
		{"no names", store.SandboxFilter{Names: []string{}}, "[]"},
		{"names or created by", store.SandboxFilter{Names: []string{"dev"}, OrCreatedBy: "key_maker"}, "[ci-5 dev]"},
		{"state", store.SandboxFilter{States: []string{store.StateCreating}, Limit: 2}, "[ci-0 ci-1]"},
		{"other state", store.SandboxFilter{States: []string{store.StateRunning}}, "[]"},
		{"cursor", store.SandboxFilter{AfterTime: now.Add(2 * time.Second), AfterID: "~", Limit: 3}, "[ci-3 ci-4 ci-5]"},
	}
	for _, tt := range tests {
		if got := fmt.Sprint(names(tt.f)); got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
	// Paging through with cursors visits every sandbox once, also when
	// several share a created_at.
	for i := 0; i < 3; i++ {
		sandbox(t, s, a.ID, fmt.Sprintf("same-%d", i), nil, now.Add(2*time.Hour))
	}
	var all []string
	f := store.SandboxFilter{AccountID: a.ID, Limit: 2}
	for {
		page, err := s.ListSandboxes(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, sb := range page {
			all = append(all, sb.Name)
		}
		if len(page) < f.Limit {
			break
		}
		last := page[len(page)-1]
		f.AfterTime, f.AfterID = last.CreatedAt, last.ID
	}
	if len(all) != 10 {
		t.Fatalf("paging: got %v (%d), want 10 sandboxes", all, len(all))
	}
}

func testSameNameConcurrently(t *testing.T, o func() Backend) {
	s := open(t, o)
	a := account(t, s, 100)
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, errs[i] = s.CreateSandbox(ctx, store.Sandbox{AccountID: a.ID, Name: "race", DesiredState: store.StateRunning, CreatedAt: now}, nil)
		}(i)
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, store.ErrConflict):
			t.Errorf("loser: got %v, want ErrConflict", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d writers won, want exactly 1", won)
	}
}

func testRunningLimit(t *testing.T, o func() Backend) {
	s := open(t, o)
	a := account(t, s, 2)
	var wg sync.WaitGroup
	errs := make([]error, 5)
	for i := range errs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, errs[i] = s.CreateSandbox(ctx, store.Sandbox{AccountID: a.ID, Name: fmt.Sprint("b", i), DesiredState: store.StateRunning, CreatedAt: now}, nil)
		}(i)
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		var le *store.LimitError
		switch {
		case err == nil:
			ok++
		case errors.As(err, &le) && le.Limit == "sandboxes_at_once" && errors.Is(err, store.ErrLimit):
		default:
			t.Errorf("got %v, want a sandboxes_at_once LimitError", err)
		}
	}
	if ok != 2 {
		t.Fatalf("%d sandboxes running, want 2", ok)
	}
	// A stopped one does not count; starting it again does.
	stopped, err := s.CreateSandbox(ctx, store.Sandbox{AccountID: a.ID, Name: "cold", DesiredState: store.StateStopped, CreatedAt: now}, nil)
	if err != nil {
		t.Fatalf("create stopped: %v", err)
	}
	_, err = s.UpdateSandbox(ctx, stopped.ID, func(sb *store.Sandbox, _ *store.AuditEvent) error { sb.DesiredState = store.StateRunning; return nil }, nil)
	wantErr(t, "start past the limit", err, store.ErrLimit)
}

func testStops(t *testing.T, o func() Backend) {
	s := open(t, o)
	a := account(t, s, 10)
	sb := sandbox(t, s, a.ID, "box", nil, now)
	st, err := s.StopSandbox(ctx, sb.ID, now, &store.AuditEvent{AccountID: a.ID, At: now, Action: "sandbox.stop", Target: "box"})
	if err != nil || st.Status != store.StopPending || st.Sandbox != "box" {
		t.Fatalf("StopSandbox: got %+v, %v", st, err)
	}
	again, err := s.StopSandbox(ctx, sb.ID, now.Add(time.Second), &store.AuditEvent{AccountID: a.ID, At: now, Action: "sandbox.stop", Target: "box"})
	if err != nil || again.ID != st.ID {
		t.Fatalf("stopping again: got %+v, %v; want the pending stop %s", again, err, st.ID)
	}
	if ev, _ := s.Audit(ctx, a.ID, 0, 0); len(ev) != 1 {
		t.Fatalf("audit after stopping twice: %d events, want 1", len(ev))
	}
	got, _ := s.SandboxByID(ctx, sb.ID)
	if got.DesiredState != store.StateStopped || got.PendingStopID != st.ID {
		t.Fatalf("sandbox after stop: %+v", got)
	}
	if err := s.FinishStop(ctx, st.ID, store.StopCompleted, "", now.Add(2*time.Second)); err != nil {
		t.Fatalf("FinishStop: %v", err)
	}
	done, err := s.Stop(ctx, a.ID, st.ID)
	if err != nil || done.Status != store.StopCompleted || done.EndedAt == nil {
		t.Fatalf("Stop: got %+v, %v", done, err)
	}
	if got, _ := s.SandboxByID(ctx, sb.ID); got.PendingStopID != "" {
		t.Fatalf("pending stop after finish: %q", got.PendingStopID)
	}
	wantErr(t, "FinishStop twice", s.FinishStop(ctx, st.ID, store.StopCompleted, "", now), store.ErrNotFound)
	_, err = s.Stop(ctx, "acct_other", st.ID)
	wantErr(t, "Stop of another account", err, store.ErrNotFound)

	// A start while a stop is pending supersedes it: the next stop is a
	// new one that stops the sandbox, and the old one ends, saying why.
	box2 := sandbox(t, s, a.ID, "box2", nil, now)
	first, err := s.StopSandbox(ctx, box2.ID, now, nil)
	if err != nil || first.Status != store.StopPending {
		t.Fatalf("StopSandbox: %+v, %v", first, err)
	}
	if _, err := s.UpdateSandbox(ctx, box2.ID, func(sb *store.Sandbox, _ *store.AuditEvent) error {
		sb.DesiredState = store.StateRunning
		return nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	second, err := s.StopSandbox(ctx, box2.ID, now.Add(time.Second), nil)
	if err != nil || second.ID == first.ID || second.Status != store.StopPending {
		t.Fatalf("a stop after a start: %+v, %v; want a new pending stop", second, err)
	}
	if got, _ := s.SandboxByID(ctx, box2.ID); got.DesiredState != store.StateStopped || got.PendingStopID != second.ID {
		t.Fatalf("after the new stop: desired %s, pending %s", got.DesiredState, got.PendingStopID)
	}
	if old, err := s.Stop(ctx, a.ID, first.ID); err != nil || old.Status != store.StopFailed || old.EndedAt == nil || old.Error == "" {
		t.Fatalf("the superseded stop: %+v, %v", old, err)
	}

	// Stopping a stopped sandbox completes at once.
	if _, err := s.UpdateSandbox(ctx, sb.ID, func(sb *store.Sandbox, _ *store.AuditEvent) error { sb.State = store.StateStopped; return nil }, nil); err != nil {
		t.Fatal(err)
	}
	st2, err := s.StopSandbox(ctx, sb.ID, now, nil)
	if err != nil || st2.Status != store.StopCompleted || st2.ID == st.ID {
		t.Fatalf("stop a stopped sandbox: got %+v, %v", st2, err)
	}
}
