package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"froog.tech/froog/store"
)

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
