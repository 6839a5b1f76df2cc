// Package storetest is the conformance suite every store implementation
// passes: Run(t, factory) against the embedded store and Postgres.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"froog.tech/froog/internal/wait"
	"froog.tech/froog/store"
)

// Backend is what an implementation offers.
type Backend interface {
	store.Store
	store.CertStorage
}

// Factory makes a fresh, empty store for one test and returns a function
// that opens it; calling it again (after Close) opens the same data.
type Factory func(t *testing.T) (open func() Backend)

// Run runs the whole suite.
func Run(t *testing.T, f Factory) {
	tests := []struct {
		name string
		fn   func(*testing.T, func() Backend)
	}{
		{"Accounts", testAccounts},
		{"APIKeys", testAPIKeys},
		{"SSHKeys", testSSHKeys},
		{"SandboxCRUD", testSandboxCRUD},
		{"SandboxList", testSandboxList},
		{"SameNameConcurrently", testSameNameConcurrently},
		{"RunningLimit", testRunningLimit},
		{"AutoStart", testAutoStart},
		{"StartLimits", testStartLimits},
		{"DesktopLinks", testDesktopLinks},
		{"Stops", testStops},
		{"Hosts", testHosts},
		{"HostPlacement", testHostPlacement},
		{"HostsDown", testHostsDown},
		{"URLs", testURLs},
		{"URLLimits", testURLLimits},
		{"URLTokens", testURLTokens},
		{"Audit", testAudit},
		{"Idempotency", testIdempotency},
		{"KV", testKV},
		{"Leases", testLeases},
		{"Feed", testFeed},
		{"FeedConcurrentWriters", testFeedConcurrent},
		{"Reopen", testReopen},
		{"Snapshots", testSnapshots},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, f(t))
		})
	}
}

var ctx = context.Background()

// now is a fixed clock for the suite, to the microsecond like the stores.
var now = store.Micro(time.Date(2026, 11, 29, 12, 0, 0, 123456000, time.UTC))

func open(t *testing.T, o func() Backend) Backend {
	t.Helper()
	s := o()
	t.Cleanup(func() { s.Close() })
	return s
}

func account(t *testing.T, s Backend, max int) store.Account {
	t.Helper()
	a, err := s.CreateAccount(ctx, store.Account{Name: "test", MaxSandboxes: max, URLNamesPerDay: 20, CreatedAt: now})
	if err != nil {
		t.Fatalf("CreateAccount: %v", err)
	}
	return a
}

func sandbox(t *testing.T, s Backend, acct, name string, labels map[string]string, at time.Time) store.Sandbox {
	t.Helper()
	sb, err := s.CreateSandbox(ctx, store.Sandbox{AccountID: acct, Name: name, Size: "small", OS: "ubuntu-24.04",
		DesiredState: store.StateRunning, State: store.StateCreating, Labels: labels, CreatedAt: at, UpdatedAt: at}, nil)
	if err != nil {
		t.Fatalf("CreateSandbox %s: %v", name, err)
	}
	return sb
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got error %v, want %v", what, err, want)
	}
}

func testAccounts(t *testing.T, o func() Backend) {
	s := open(t, o)
	a := account(t, s, 5)
	got, err := s.Account(ctx, a.ID)
	if err != nil || got.MaxSandboxes != 5 || got.URLNamesPerDay != 20 {
		t.Fatalf("Account: got %+v, %v", got, err)
	}
	_, err = s.Account(ctx, "acct_missing")
	wantErr(t, "Account(missing)", err, store.ErrNotFound)

	k := store.APIKey{AccountID: a.ID, Name: "ci", SecretHash: "abc123", Actions: []string{"sandbox.read"}, Labels: map[string]string{"team": "a"}, CreatedAt: now}
	k, err = s.CreateAPIKey(ctx, k, &store.AuditEvent{AccountID: a.ID, At: now, Action: "api_key.create", Target: "ci"})
	if err != nil {
		t.Fatalf("CreateAPIKey: %v", err)
	}
	got2, err := s.APIKeyByHash(ctx, "abc123")
	if err != nil || got2.ID != k.ID || got2.Labels["team"] != "a" || len(got2.Actions) != 1 {
		t.Fatalf("APIKeyByHash: got %+v, %v", got2, err)
	}
	_, err = s.CreateAPIKey(ctx, store.APIKey{AccountID: a.ID, SecretHash: "abc123"}, nil)
	wantErr(t, "CreateAPIKey(same hash)", err, store.ErrConflict)
	_, err = s.APIKeyByHash(ctx, "nope")
	wantErr(t, "APIKeyByHash(missing)", err, store.ErrNotFound)
	_, err = s.CreateAPIKey(ctx, store.APIKey{AccountID: "acct_missing", SecretHash: "x"}, nil)
	wantErr(t, "CreateAPIKey(no account)", err, store.ErrNotFound)
}

func testSSHKeys(t *testing.T, o func() Backend) {
	s := open(t, o)
	a := account(t, s, 1)
	b := account(t, s, 1)
	key := func(acct string, i int) store.SSHKey {
		return store.SSHKey{AccountID: acct, Name: fmt.Sprintf("laptop %d", i), PublicKey: fmt.Sprintf("ssh-ed25519 AAAA%d me@laptop", i),
			Fingerprint: fmt.Sprintf("SHA256:%d", i), CreatedAt: now.Add(time.Duration(i) * time.Second)}
	}
	ev := func(acct string) *store.AuditEvent {
		return &store.AuditEvent{AccountID: acct, At: now, Action: "ssh_key.create"}
	}
	first, err := s.CreateSSHKey(ctx, key(a.ID, 0), ev(a.ID))
	if err != nil || first.ID == "" {
		t.Fatalf("CreateSSHKey: %+v, %v", first, err)
	}
	_, err = s.CreateSSHKey(ctx, key(a.ID, 0), ev(a.ID))
	wantErr(t, "CreateSSHKey(same key)", err, store.ErrConflict)
	if _, err := s.CreateSSHKey(ctx, key(b.ID, 0), ev(b.ID)); err != nil {
		t.Fatalf("another account adds the same key: %v", err)
	}
	_, err = s.CreateSSHKey(ctx, key("acct_missing", 1), nil)
	wantErr(t, "CreateSSHKey(no account)", err, store.ErrNotFound)

	// Adds at once stop at the limit, exactly.
	var wg sync.WaitGroup
	var mu sync.Mutex
	errs := map[string]int{}
	for i := 1; i <= store.MaxSSHKeysPerAccount+5; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.CreateSSHKey(ctx, key(a.ID, i), ev(a.ID))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				errs["ok"]++
			case errors.Is(err, store.ErrLimit):
				errs["limit"]++
			default:
				errs[err.Error()]++
			}
		}()
	}
	wg.Wait()
	if errs["ok"] != store.MaxSSHKeysPerAccount-1 || errs["limit"] != 6 || len(errs) != 2 {
		t.Fatalf("%d adds at once to 1 key: %v, want %d ok and 6 at the limit", store.MaxSSHKeysPerAccount+5, errs, store.MaxSSHKeysPerAccount-1)
	}
	list, err := s.SSHKeys(ctx, a.ID)
	if err != nil || len(list) != store.MaxSSHKeysPerAccount || list[0].ID != first.ID || list[0].PublicKey != first.PublicKey || !list[0].CreatedAt.Equal(now) {
		t.Fatalf("SSHKeys: %d keys, first %+v, %v", len(list), list[0], err)
	}
	for i := 1; i < len(list); i++ {
		if list[i].CreatedAt.Before(list[i-1].CreatedAt) {
			t.Fatalf("SSHKeys: not oldest first at %d", i)
		}
	}
	events, err := s.Audit(ctx, a.ID, 0, 0)
	if err != nil || len(events) != 1+store.MaxSSHKeysPerAccount-1 {
		t.Fatalf("audit: %d events, %v; want one per key added, none for refusals", len(events), err)
	}

	err = s.DeleteSSHKey(ctx, b.ID, first.ID, nil)
	wantErr(t, "DeleteSSHKey(another account's)", err, store.ErrNotFound)
	if err := s.DeleteSSHKey(ctx, a.ID, first.ID, &store.AuditEvent{AccountID: a.ID, At: now, Action: "ssh_key.delete"}); err != nil {
		t.Fatal(err)
	}
	err = s.DeleteSSHKey(ctx, a.ID, first.ID, nil)
	wantErr(t, "DeleteSSHKey(again)", err, store.ErrNotFound)
	if list, _ := s.SSHKeys(ctx, a.ID); len(list) != store.MaxSSHKeysPerAccount-1 {
		t.Fatalf("after delete: %d keys", len(list))
	}
	if list, _ := s.SSHKeys(ctx, b.ID); len(list) != 1 {
		t.Fatalf("account b: %d keys, want 1", len(list))
	}
	if _, err := s.CreateSSHKey(ctx, key(a.ID, 0), nil); err != nil {
		t.Fatalf("re-adding a removed key: %v", err)
	}
}

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

func putURL(s Backend, sbID string, port int, host string, public bool, at time.Time) (store.URL, error) {
	return s.PutURL(ctx, sbID, port, func(old *store.URL, _ *store.AuditEvent) (store.URL, error) {
		u := store.URL{Hostname: host, Public: public, CreatedAt: at, UpdatedAt: at}
		if old != nil {
			u = *old
			u.Hostname, u.Public, u.UpdatedAt = host, public, at
		}
		if !public {
			u.TokenHash = "hash-" + host
		}
		return u, nil
	}, nil)
}

func testURLs(t *testing.T, o func() Backend) {
	s := open(t, o)
	a := account(t, s, 10)
	sb := sandbox(t, s, a.ID, "box", nil, now)
	u, err := putURL(s, sb.ID, 3000, "box-3000-abc123", false, now)
	if err != nil || u.ID == "" || u.AccountID != a.ID || u.Port != 3000 {
		t.Fatalf("PutURL: got %+v, %v", u, err)
	}
	u2, err := putURL(s, sb.ID, 3000, "acme-demo", false, now)
	if err != nil || u2.ID != u.ID || u2.Hostname != "acme-demo" {
		t.Fatalf("PutURL rename: got %+v, %v", u2, err)
	}
	other := sandbox(t, s, a.ID, "other", nil, now)
	_, err = putURL(s, other.ID, 8080, "acme-demo", false, now)
	wantErr(t, "PutURL(taken host name)", err, store.ErrConflict)
	// The old name is free again.
	if _, err := putURL(s, other.ID, 8080, "box-3000-abc123", false, now); err != nil {
		t.Fatalf("PutURL(freed name): %v", err)
	}
	tok, err := s.CreateURLToken(ctx, store.URLToken{URLID: u.ID, Hash: "v1", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}, nil)
	if err != nil {
		t.Fatalf("CreateURLToken: %v", err)
	}
	if all, err := s.AllURLs(ctx); err != nil || len(all) != 2 {
		t.Fatalf("AllURLs: %d, %v; want 2", len(all), err)
	}
	if all, err := s.AllSandboxes(ctx); err != nil || !slices.ContainsFunc(all, func(x store.Sandbox) bool { return x.ID == sb.ID }) {
		t.Fatalf("AllSandboxes: %+v, %v; want it to hold %s", all, err, sb.ID)
	}
	if all, err := s.AllURLTokens(ctx, now); err != nil || len(all) != 1 || all[0].ID != tok.ID {
		t.Fatalf("AllURLTokens: %+v, %v", all, err)
	}
	if all, _ := s.AllURLTokens(ctx, now.Add(2*time.Hour)); len(all) != 0 {
		t.Fatalf("AllURLTokens lists an expired token: %+v", all)
	}
	// Renaming a private URL, or hosting it again private, keeps them.
	if _, err := putURL(s, sb.ID, 3000, "acme-demo2", false, now); err != nil {
		t.Fatalf("PutURL rename private: %v", err)
	}
	if _, err := putURL(s, sb.ID, 3000, "acme-demo", false, now); err != nil {
		t.Fatalf("PutURL rename back: %v", err)
	}
	if list, _ := s.URLTokens(ctx, u.ID, now); len(list) != 1 {
		t.Fatalf("tokens after a private rename: got %d, want 1", len(list))
	}
	// Making it public deletes its viewer tokens.
	if _, err := putURL(s, sb.ID, 3000, "acme-demo", true, now); err != nil {
		t.Fatalf("PutURL public: %v", err)
	}
	if list, _ := s.URLTokens(ctx, u.ID, now); len(list) != 0 {
		t.Fatalf("tokens after going public: %v", list)
	}
	_, err = s.CreateURLToken(ctx, store.URLToken{URLID: u.ID, Hash: "v2", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}, nil)
	wantErr(t, "CreateURLToken(public)", err, store.ErrURLPublic)
	list, err := s.URLs(ctx, sb.ID)
	if err != nil || len(list) != 1 || !list[0].Public {
		t.Fatalf("URLs: got %+v, %v", list, err)
	}
	// A failing fn writes nothing.
	boom := errors.New("boom")
	_, err = s.PutURL(ctx, sb.ID, 4000, func(*store.URL, *store.AuditEvent) (store.URL, error) { return store.URL{}, boom }, nil)
	wantErr(t, "PutURL(fn fails)", err, boom)
	if _, err := s.URL(ctx, sb.ID, 4000); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("URL after failed put: %v", err)
	}
	if err := s.DeleteURL(ctx, sb.ID, 3000, nil); err != nil {
		t.Fatalf("DeleteURL: %v", err)
	}
	wantErr(t, "DeleteURL twice", s.DeleteURL(ctx, sb.ID, 3000, nil), store.ErrNotFound)
	_, err = putURL(s, "sbx_missing", 1, "x-1-abcdef", true, now)
	wantErr(t, "PutURL(no sandbox)", err, store.ErrNotFound)

	// Deleting the sandbox removes its URLs.
	if err := s.DeleteSandbox(ctx, other.ID, now, nil); err != nil {
		t.Fatal(err)
	}
	if list, _ := s.URLs(ctx, other.ID); len(list) != 0 {
		t.Fatalf("URLs of a deleted sandbox: %v", list)
	}
}

func testURLLimits(t *testing.T, o func() Backend) {
	s := open(t, o)
	a, err := s.CreateAccount(ctx, store.Account{MaxSandboxes: 10, URLNamesPerDay: 3})
	if err != nil {
		t.Fatal(err)
	}
	sb := sandbox(t, s, a.ID, "box", nil, now)
	for i := 0; i < 3; i++ {
		if _, err := putURL(s, sb.ID, 3000+i, fmt.Sprint("n", i), true, now); err != nil {
			t.Fatalf("name %d: %v", i, err)
		}
	}
	_, err = putURL(s, sb.ID, 4000, "n3", true, now)
	var le *store.LimitError
	if !errors.As(err, &le) || le.Limit != "url_names_per_day" {
		t.Fatalf("4th name in a day: got %v, want url_names_per_day", err)
	}
	// Changing a URL without a new name is free; the next day has room.
	if _, err := putURL(s, sb.ID, 3000, "n0", false, now); err != nil {
		t.Fatalf("same name again: %v", err)
	}
	if _, err := putURL(s, sb.ID, 4000, "n3", true, now.Add(24*time.Hour)); err != nil {
		t.Fatalf("next day: %v", err)
	}

	// A name taken again on the same day counts once.
	c, _ := s.CreateAccount(ctx, store.Account{MaxSandboxes: 10, URLNamesPerDay: 2})
	sb3 := sandbox(t, s, c.ID, "again", nil, now)
	for _, name := range []string{"r0", "r1", "r0", "r1"} {
		if _, err := putURL(s, sb3.ID, 3000, name, false, now); err != nil {
			t.Fatalf("rename to %s: %v", name, err)
		}
	}
	_, err = putURL(s, sb3.ID, 3000, "r2", false, now)
	if !errors.As(err, &le) || le.Limit != "url_names_per_day" {
		t.Fatalf("3rd name in a day after renaming back and forth: got %v, want url_names_per_day", err)
	}

	b, _ := s.CreateAccount(ctx, store.Account{MaxSandboxes: 10, URLNamesPerDay: 1000})
	sb2 := sandbox(t, s, b.ID, "many", nil, now)
	for i := 0; i < store.MaxURLsPerSandbox; i++ {
		if _, err := putURL(s, sb2.ID, 1000+i, fmt.Sprint("m", i), true, now); err != nil {
			t.Fatalf("url %d: %v", i, err)
		}
	}
	_, err = putURL(s, sb2.ID, 9999, "m-over", true, now)
	if !errors.As(err, &le) || le.Limit != "urls_per_sandbox" {
		t.Fatalf("51st url: got %v, want urls_per_sandbox", err)
	}
}

func testURLTokens(t *testing.T, o func() Backend) {
	s := open(t, o)
	a := account(t, s, 10)
	sb := sandbox(t, s, a.ID, "box", nil, now)
	u, err := putURL(s, sb.ID, 3000, "box-3000-tok", false, now)
	if err != nil {
		t.Fatal(err)
	}
	mk := func(hash string, ttl time.Duration) store.URLToken {
		t.Helper()
		tok, err := s.CreateURLToken(ctx, store.URLToken{URLID: u.ID, Hash: hash, Label: hash, CreatedAt: now, ExpiresAt: now.Add(ttl)}, nil)
		if err != nil {
			t.Fatalf("CreateURLToken %s: %v", hash, err)
		}
		return tok
	}
	t1 := mk("a", time.Hour)
	mk("b", time.Minute)
	list, err := s.URLTokens(ctx, u.ID, now.Add(2*time.Minute))
	if err != nil || len(list) != 1 || list[0].ID != t1.ID {
		t.Fatalf("live tokens after one expired: got %+v, %v", list, err)
	}
	if err := s.RevokeURLToken(ctx, u.ID, t1.ID, now, nil); err != nil {
		t.Fatalf("RevokeURLToken: %v", err)
	}
	wantErr(t, "revoke twice", s.RevokeURLToken(ctx, u.ID, t1.ID, now, nil), store.ErrNotFound)
	wantErr(t, "revoke under another url", s.RevokeURLToken(ctx, "url_other", t1.ID, now, nil), store.ErrNotFound)
	if list, _ := s.URLTokens(ctx, u.ID, now); len(list) != 1 || list[0].Hash != "b" {
		t.Fatalf("live tokens after revoke: %+v", list)
	}
	for i := 0; i < store.MaxLiveTokensPerURL-1; i++ {
		mk(fmt.Sprint("x", i), time.Hour)
	}
	_, err = s.CreateURLToken(ctx, store.URLToken{URLID: u.ID, Hash: "over", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}, nil)
	wantErr(t, "101st live token", err, store.ErrLimit)
	_, err = s.CreateURLToken(ctx, store.URLToken{URLID: "url_missing", Hash: "m", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}, nil)
	wantErr(t, "token for a missing url", err, store.ErrNotFound)
}

func testAudit(t *testing.T, o func() Backend) {
	s := open(t, o)
	a := account(t, s, 1)
	b := account(t, s, 1)
	ev := func(action, target string) *store.AuditEvent {
		return &store.AuditEvent{AccountID: a.ID, At: now, Action: action, Target: target, Actor: "key_1", IP: "192.0.2.1", RequestID: "req_1", Detail: map[string]string{"size": "small"}}
	}
	sb, err := s.CreateSandbox(ctx, store.Sandbox{AccountID: a.ID, Name: "one", DesiredState: store.StateRunning, CreatedAt: now}, ev("sandbox.create", "one"))
	if err != nil {
		t.Fatal(err)
	}
	// A refused write records nothing.
	if _, err := s.CreateSandbox(ctx, store.Sandbox{AccountID: a.ID, Name: "two", DesiredState: store.StateRunning, CreatedAt: now}, ev("sandbox.create", "two")); !errors.Is(err, store.ErrLimit) {
		t.Fatalf("second running sandbox: got %v, want ErrLimit", err)
	}
	if _, err := s.UpdateSandbox(ctx, sb.ID, func(sb *store.Sandbox, e *store.AuditEvent) error {
		e.Detail = map[string]string{"name": "uno"}
		sb.Name = "uno"
		return nil
	}, ev("sandbox.update", "one")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateSandbox(ctx, store.Sandbox{AccountID: b.ID, Name: "b", CreatedAt: now}, &store.AuditEvent{AccountID: b.ID, Action: "sandbox.create"}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSandbox(ctx, sb.ID, now, ev("sandbox.delete", "uno")); err != nil {
		t.Fatal(err)
	}
	all, err := s.Audit(ctx, a.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range all {
		got = append(got, e.Action)
	}
	if fmt.Sprint(got) != "[sandbox.delete sandbox.update sandbox.create]" {
		t.Fatalf("audit: got %v, want delete, update, create (newest first, failed writes left out)", got)
	}
	if all[1].Detail["name"] != "uno" || all[2].IP != "192.0.2.1" || all[2].RequestID != "req_1" || all[2].Actor != "key_1" {
		t.Fatalf("audit details: %+v", all)
	}
	page, err := s.Audit(ctx, a.ID, all[0].ID, 1)
	if err != nil || len(page) != 1 || page[0].ID != all[1].ID {
		t.Fatalf("audit page: got %+v, %v", page, err)
	}
}

func testIdempotency(t *testing.T, o func() Backend) {
	s := open(t, o)
	a := account(t, s, 1)
	rec := store.Idempotency{AccountID: a.ID, Key: "k1", KeyID: "key_1", RequestHash: "h1", CreatedAt: now}
	got, err := s.BeginIdempotent(ctx, rec)
	if err != nil || got != nil {
		t.Fatalf("first claim: got %v, %v", got, err)
	}
	_, err = s.BeginIdempotent(ctx, rec)
	wantErr(t, "claim while running", err, store.ErrIdempotencyInUse)
	if err := s.FinishIdempotent(ctx, a.ID, "k1", 202, []byte(`{"ok":true}`)); err != nil {
		t.Fatal(err)
	}
	got, err = s.BeginIdempotent(ctx, rec)
	if err != nil || got == nil || got.Status != 202 || string(got.Body) != `{"ok":true}` || got.KeyID != "key_1" {
		t.Fatalf("replay: got %+v, %v", got, err)
	}
	other := rec
	other.RequestHash = "h2"
	_, err = s.BeginIdempotent(ctx, other)
	wantErr(t, "same key, other request", err, store.ErrIdempotencyReused)
	// After the window the key is new again.
	later := other
	later.CreatedAt = now.Add(store.IdempotencyWindow + time.Second)
	if got, err := s.BeginIdempotent(ctx, later); err != nil || got != nil {
		t.Fatalf("after the window: got %v, %v", got, err)
	}
	// An abandoned key runs again.
	if err := s.AbandonIdempotent(ctx, a.ID, "k1"); err != nil {
		t.Fatal(err)
	}
	if got, err := s.BeginIdempotent(ctx, rec); err != nil || got != nil {
		t.Fatalf("after abandon: got %v, %v", got, err)
	}
}

func testKV(t *testing.T, o func() Backend) {
	s := open(t, o)
	for _, k := range []string{"certs/a/x.crt", "certs/a/x.key", "certs/b/y.crt", "acme/acct.json", "certs2"} {
		if err := s.KVPut(ctx, k, []byte("v:"+k)); err != nil {
			t.Fatalf("KVPut %s: %v", k, err)
		}
	}
	kv, err := s.KVGet(ctx, "certs/a/x.key")
	if err != nil || string(kv.Value) != "v:certs/a/x.key" || kv.Modified.IsZero() {
		t.Fatalf("KVGet: got %+v, %v", kv, err)
	}
	_, err = s.KVGet(ctx, "certs/a")
	wantErr(t, "KVGet(folder)", err, store.ErrNotFound)
	keys, err := s.KVList(ctx, "certs")
	if err != nil || fmt.Sprint(keys) != "[certs/a/x.crt certs/a/x.key certs/b/y.crt]" {
		t.Fatalf("KVList(certs): got %v, %v", keys, err)
	}
	if err := s.KVDelete(ctx, "certs/a"); err != nil {
		t.Fatalf("KVDelete(folder): %v", err)
	}
	keys, _ = s.KVList(ctx, "")
	if fmt.Sprint(keys) != "[acme/acct.json certs/b/y.crt certs2]" {
		t.Fatalf("after deleting certs/a: %v", keys)
	}
	wantErr(t, "KVDelete(missing)", s.KVDelete(ctx, "nope"), store.ErrNotFound)
}

func testLeases(t *testing.T, o func() Backend) {
	s := open(t, o)
	ok, err := s.AcquireLease(ctx, "issue:x", "a", time.Minute)
	if err != nil || !ok {
		t.Fatalf("a acquires: %v, %v", ok, err)
	}
	if ok, _ := s.AcquireLease(ctx, "issue:x", "b", time.Minute); ok {
		t.Fatal("b acquired a lease a holds")
	}
	if ok, _ := s.AcquireLease(ctx, "issue:x", "a", time.Minute); !ok {
		t.Fatal("a could not renew its own lease")
	}
	if err := s.ReleaseLease(ctx, "issue:x", "b"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.AcquireLease(ctx, "issue:x", "b", time.Minute); ok {
		t.Fatal("b's release ended a's lease")
	}
	if err := s.ReleaseLease(ctx, "issue:x", "a"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.AcquireLease(ctx, "issue:x", "b", 50*time.Millisecond); !ok {
		t.Fatal("b could not take a released lease")
	}
	// b's lease of 50 ms runs out on the store's clock.
	wait.For(t, 5*time.Second, "an expired lease is free", func() bool {
		ok, err := s.AcquireLease(ctx, "issue:x", "a", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	})
}

func testHosts(t *testing.T, o func() Backend) {
	s := open(t, o)
	h, err := s.RegisterHost(ctx, store.Host{Name: "h1", Capacity: 4, CreatedAt: now, SeenAt: now})
	if err != nil || h.ID == "" {
		t.Fatalf("RegisterHost: %+v, %v", h, err)
	}
	again, err := s.RegisterHost(ctx, store.Host{Name: "h1", Capacity: 8, CreatedAt: now.Add(time.Hour), SeenAt: now.Add(time.Hour)})
	if err != nil || again.ID != h.ID || again.Capacity != 8 || !again.CreatedAt.Equal(now) {
		t.Fatalf("RegisterHost again: %+v, %v", again, err)
	}
	a := account(t, s, 10)
	placed := sandbox(t, s, a.ID, "placed", nil, now)
	sandbox(t, s, a.ID, "unplaced", nil, now)
	elsewhere := sandbox(t, s, a.ID, "elsewhere", nil, now)
	for id, host := range map[string]string{placed.ID: h.ID, elsewhere.ID: "host_other"} {
		if _, err := s.UpdateSandbox(ctx, id, func(sb *store.Sandbox, _ *store.AuditEvent) error { sb.HostID = host; return nil }, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteSandbox(ctx, placed.ID, now, nil); err != nil {
		t.Fatal(err)
	}
	list, err := s.HostSandboxes(ctx, h.ID)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, sb := range list {
		names = append(names, sb.Name)
	}
	if len(names) != 2 || !(names[0] == "placed" || names[1] == "placed") || !(names[0] == "unplaced" || names[1] == "unplaced") {
		t.Fatalf("HostSandboxes: %v, want placed (deleted) and unplaced", names)
	}
	wantErr(t, "purge a live sandbox", s.PurgeSandbox(ctx, elsewhere.ID), store.ErrNotFound)
	if err := s.PurgeSandbox(ctx, placed.ID); err != nil {
		t.Fatalf("PurgeSandbox: %v", err)
	}
	_, err = s.SandboxByID(ctx, placed.ID)
	wantErr(t, "SandboxByID(purged)", err, store.ErrNotFound)
}
