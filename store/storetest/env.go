package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"froog.tech/froog/store"
)

func testEnvironment(t *testing.T, o func() Backend) {
	s := open(t, o)
	a := account(t, s, 5)
	b := account(t, s, 5)
	_, err := s.Environment(ctx, "acct_missing")
	wantErr(t, "Environment(no account)", err, store.ErrNotFound)
	_, err = s.UpdateEnvironment(ctx, "acct_missing", func(*store.Environment, *store.AuditEvent) error { return nil }, nil)
	wantErr(t, "UpdateEnvironment(no account)", err, store.ErrNotFound)
	if e, err := s.Environment(ctx, a.ID); err != nil || e.AccountID != a.ID || len(e.Vars) != 0 {
		t.Fatalf("Environment(none set): got %+v, %v", e, err)
	}

	set := func(e *store.Environment, ev *store.AuditEvent) error {
		e.Vars = append(e.Vars, store.EnvVar{Name: "TOKEN", Sealed: []byte{1, 2, 3}, Size: 8, Preview: "ab…", UpdatedAt: now})
		e.Repos = append(e.Repos, store.EnvRepo{URL: "https://github.com/you/app", Branch: "main"})
		e.Files = append(e.Files, store.EnvFile{Path: "app/.env", Sealed: []byte{4}, Size: 10, UpdatedAt: now})
		e.SetupSealed, e.SetupSize, e.UpdatedAt = []byte{5}, 12, now
		ev.Target = "TOKEN"
		return nil
	}
	ev := &store.AuditEvent{AccountID: a.ID, At: now, Action: "environment.update"}
	if _, err := s.UpdateEnvironment(ctx, a.ID, set, ev); err != nil {
		t.Fatalf("UpdateEnvironment: %v", err)
	}
	e, err := s.Environment(ctx, a.ID)
	if err != nil || len(e.Vars) != 1 || e.Vars[0].Name != "TOKEN" || string(e.Vars[0].Sealed) != "\x01\x02\x03" ||
		len(e.Repos) != 1 || e.Repos[0].Branch != "main" || len(e.Files) != 1 || e.Files[0].Size != 10 || e.SetupSize != 12 || !e.UpdatedAt.Equal(now) {
		t.Fatalf("Environment: got %+v, %v", e, err)
	}
	if other, err := s.Environment(ctx, b.ID); err != nil || len(other.Vars) != 0 {
		t.Fatalf("another account's environment: got %+v, %v", other, err)
	}
	events, err := s.Audit(ctx, a.ID, 0, 10)
	if err != nil || len(events) != 1 || events[0].Action != "environment.update" || events[0].Target != "TOKEN" {
		t.Fatalf("Audit: got %+v, %v", events, err)
	}

	// A refused write (fn's error, or past a limit) changes nothing and
	// records nothing.
	boom := errors.New("boom")
	_, err = s.UpdateEnvironment(ctx, a.ID, func(e *store.Environment, _ *store.AuditEvent) error { e.Vars = nil; return boom }, ev)
	wantErr(t, "UpdateEnvironment(fn fails)", err, boom)
	for _, tc := range []struct {
		limit string
		fn    func(e *store.Environment)
	}{
		{"environment_variables", func(e *store.Environment) {
			for i := range store.MaxEnvVars {
				e.Vars = append(e.Vars, store.EnvVar{Name: fmt.Sprintf("V%d", i), Size: 3})
			}
		}},
		{"environment_variable_bytes", func(e *store.Environment) { e.Vars[0].Size = store.MaxEnvVarBytes + 1 }},
		{"environment_repos", func(e *store.Environment) {
			for range store.MaxEnvRepos {
				e.Repos = append(e.Repos, store.EnvRepo{URL: "https://github.com/you/x"})
			}
		}},
		{"environment_files", func(e *store.Environment) {
			for i := range store.MaxEnvFiles {
				e.Files = append(e.Files, store.EnvFile{Path: fmt.Sprintf("f%d", i), Size: 1})
			}
		}},
		{"environment_file_bytes", func(e *store.Environment) { e.Files[0].Size = store.MaxEnvFileBytes + 1 }},
		{"environment_files_bytes", func(e *store.Environment) {
			for i := range 16 {
				e.Files = append(e.Files, store.EnvFile{Path: fmt.Sprintf("big%d", i), Size: store.MaxEnvFileBytes})
			}
		}},
		{"environment_setup_bytes", func(e *store.Environment) { e.SetupSize = store.MaxEnvSetupBytes + 1 }},
	} {
		_, err := s.UpdateEnvironment(ctx, a.ID, func(e *store.Environment, _ *store.AuditEvent) error { tc.fn(e); return nil }, ev)
		var le *store.LimitError
		if !errors.As(err, &le) || le.Limit != tc.limit {
			t.Errorf("past %s: got %v, want a LimitError", tc.limit, err)
		}
	}
	if again, err := s.Environment(ctx, a.ID); err != nil || len(again.Vars) != 1 || len(again.Repos) != 1 || len(again.Files) != 1 || again.SetupSize != 12 {
		t.Fatalf("after refused writes: got %+v, %v", again, err)
	}
	if events, _ := s.Audit(ctx, a.ID, 0, 10); len(events) != 1 {
		t.Fatalf("after refused writes: %d audit events, want 1", len(events))
	}

	// Every start takes the account's variables as they are then; a
	// sandbox made with environment: false takes none.
	sb := sandbox(t, s, a.ID, "with-env", nil, now)
	if len(sb.AccountEnv) != 1 || sb.AccountEnv[0].Name != "TOKEN" {
		t.Fatalf("created sandbox: AccountEnv %+v, want TOKEN", sb.AccountEnv)
	}
	none, err := s.CreateSandbox(ctx, store.Sandbox{AccountID: a.ID, Name: "no-env", NoEnvironment: true, DesiredState: store.StateRunning, CreatedAt: now}, nil)
	if err != nil || len(none.AccountEnv) != 0 {
		t.Fatalf("environment: false sandbox: %+v, %v", none.AccountEnv, err)
	}
	if _, err := s.UpdateEnvironment(ctx, a.ID, func(e *store.Environment, _ *store.AuditEvent) error {
		e.Vars = append(e.Vars, store.EnvVar{Name: "ZED", Sealed: []byte{9}, Size: 4})
		return nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.SandboxByID(ctx, sb.ID); len(got.AccountEnv) != 1 {
		t.Fatalf("running sandbox after a change: %d variables, want 1 until its next start", len(got.AccountEnv))
	}
	stopSandbox := func(id string) {
		t.Helper()
		if _, err := s.UpdateSandbox(ctx, id, func(sb *store.Sandbox, _ *store.AuditEvent) error {
			sb.DesiredState, sb.State = store.StateStopped, store.StateStopped
			return nil
		}, nil); err != nil {
			t.Fatal(err)
		}
	}
	start := func(id string) store.Sandbox {
		t.Helper()
		got, err := s.UpdateSandbox(ctx, id, func(sb *store.Sandbox, _ *store.AuditEvent) error { sb.DesiredState = store.StateRunning; return nil }, nil)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	stopSandbox(sb.ID)
	if got := start(sb.ID); len(got.AccountEnv) != 2 || got.AccountEnv[1].Name != "ZED" {
		t.Fatalf("next start: AccountEnv %+v, want TOKEN and ZED", got.AccountEnv)
	}
	stopSandbox(none.ID)
	if got := start(none.ID); len(got.AccountEnv) != 0 {
		t.Fatalf("environment: false sandbox started again: AccountEnv %+v", got.AccountEnv)
	}
	// A restore boots it again: the variables as they are then.
	if _, err := s.UpdateEnvironment(ctx, a.ID, func(e *store.Environment, _ *store.AuditEvent) error {
		e.Vars = e.Vars[1:]
		return nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	restored, err := s.UpdateSandbox(ctx, sb.ID, func(sb *store.Sandbox, _ *store.AuditEvent) error { sb.RestoreFrom = "snap_1"; return nil }, nil)
	if err != nil || len(restored.AccountEnv) != 1 || restored.AccountEnv[0].Name != "ZED" {
		t.Fatalf("restore: AccountEnv %+v, %v; want ZED alone", restored.AccountEnv, err)
	}

	// It is kept across a restart.
	s.Close()
	s = open(t, o)
	if e, err := s.Environment(ctx, a.ID); err != nil || len(e.Vars) != 1 || len(e.Files) != 1 || string(e.SetupSealed) != "\x05" {
		t.Fatalf("reopened: got %+v, %v", e, err)
	}
}

// Concurrent writers cannot pass a limit between them.
func testEnvironmentConcurrent(t *testing.T, o func() Backend) {
	s := open(t, o)
	a := account(t, s, 5)
	var wg sync.WaitGroup
	for i := range store.MaxEnvRepos + 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.UpdateEnvironment(ctx, a.ID, func(e *store.Environment, _ *store.AuditEvent) error {
				e.Repos = append(e.Repos, store.EnvRepo{URL: fmt.Sprintf("https://github.com/you/r%d", i)})
				return nil
			}, nil)
		}()
	}
	wg.Wait()
	if e, err := s.Environment(ctx, a.ID); err != nil || len(e.Repos) != store.MaxEnvRepos {
		t.Fatalf("after concurrent adds: %d repos, %v; want %d", len(e.Repos), err, store.MaxEnvRepos)
	}
}
