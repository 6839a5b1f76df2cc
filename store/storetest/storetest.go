// Package storetest is the conformance suite every store implementation
// passes: Run(t, factory) against the embedded store and Postgres.
package storetest

import (
	"context"
	"errors"
	"fmt"
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
		{"Environment", testEnvironment},
		{"EnvironmentConcurrent", testEnvironmentConcurrent},
		{"SandboxCRUD", testSandboxCRUD},
		{"SandboxList", testSandboxList},
		{"LastActive", testLastActive},
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
		{"Ports", testPorts},
		{"PortsLimit", testPortsLimit},
		{"Audit", testAudit},
		{"Idempotency", testIdempotency},
		{"KV", testKV},
		{"Leases", testLeases},
		{"Feed", testFeed},
		{"FeedConcurrentWriters", testFeedConcurrent},
		{"Reopen", testReopen},
		{"Snapshots", testSnapshots},
		{"Inbox", testInbox},
		{"InboxBounds", testInboxBounds},
		{"InboxAccountBound", testInboxAccountBound},
		{"Webhooks", testWebhooks},
		{"WebhookEvents", testWebhookEvents},
		{"WebhookEndpoints", testWebhookEndpoints},
		{"WebhookLimit", testWebhookLimit},
		{"History", testHistory},
		{"HistoryOutput", testHistoryOutput},
		{"HistoryPrune", testHistoryPrune},
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
