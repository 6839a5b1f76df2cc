package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"froog.tech/froog/store"
)

func apiKey(t *testing.T, s Backend, acct, name, hash string, at time.Time, edit func(*store.APIKey)) store.APIKey {
	t.Helper()
	k := store.APIKey{AccountID: acct, Name: name, SecretHash: hash, Actions: []string{"sandbox.read", "exec"},
		Sandboxes: []string{"box"}, Labels: map[string]string{"team": "a"}, CreatedAt: at}
	if edit != nil {
		edit(&k)
	}
	k, err := s.CreateAPIKey(ctx, k, nil)
	if err != nil {
		t.Fatalf("CreateAPIKey %s: %v", name, err)
	}
	return k
}

func auditActions(t *testing.T, s Backend, acct string) []string {
	t.Helper()
	all, err := s.Audit(ctx, acct, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range all {
		got = append(got, e.Action+" "+e.Target)
	}
	return got
}

// testAPIKeys: keys are found by id and by hash, listed per account
// (revoked ones included), revoked and rotated with their audit event in
// the same write, refused as the APIKey rules say (nothing changes), and
// their uses add up under concurrent writers and survive a reopen.
func testAPIKeys(t *testing.T, o func() Backend) {
	s := open(t, o)
	a := account(t, s, 5)
	b := account(t, s, 5)
	exp := now.Add(48 * time.Hour)
	k1 := apiKey(t, s, a.ID, "one", "hash-1", now, func(k *store.APIKey) { k.ExpiresAt = &exp })
	k2 := apiKey(t, s, a.ID, "two", "hash-2", now.Add(time.Second), nil)
	k0 := apiKey(t, s, a.ID, "zero", "hash-0", now.Add(-time.Second), nil)
	kb := apiKey(t, s, b.ID, "other", "hash-b", now, nil)

	t.Run("by id", func(t *testing.T) {
		got, err := s.APIKeyByID(ctx, k1.ID)
		if err != nil || got.Name != "one" || got.SecretHash != "hash-1" || !got.ExpiresAt.Equal(exp) || got.Labels["team"] != "a" {
			t.Fatalf("APIKeyByID: got %+v, %v", got, err)
		}
		_, err = s.APIKeyByID(ctx, "key_missing")
		wantErr(t, "APIKeyByID(missing)", err, store.ErrNotFound)
	})

	t.Run("list", func(t *testing.T) {
		list, err := s.ListAPIKeys(ctx, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, k := range list {
			names = append(names, k.Name)
		}
		if fmt.Sprint(names) != "[zero one two]" {
			t.Fatalf("ListAPIKeys: got %v, want [zero one two] (oldest first, the account's only)", names)
		}
		if list, err := s.ListAPIKeys(ctx, "acct_none"); err != nil || len(list) != 0 {
			t.Fatalf("ListAPIKeys(no account): got %v, %v", list, err)
		}
	})

	ev := func(action, target string) *store.AuditEvent {
		return &store.AuditEvent{AccountID: a.ID, At: now, Action: action, Target: target, Actor: "key_admin"}
	}

	t.Run("revoke", func(t *testing.T) {
		_, err := s.RevokeAPIKey(ctx, a.ID, kb.ID, now, ev("api_key.revoke", kb.ID))
		wantErr(t, "RevokeAPIKey(another account's)", err, store.ErrNotFound)
		if got, _ := s.APIKeyByID(ctx, kb.ID); got.RevokedAt != nil {
			t.Fatalf("another account's key was revoked: %+v", got)
		}
		_, err = s.RevokeAPIKey(ctx, a.ID, "key_missing", now, nil)
		wantErr(t, "RevokeAPIKey(missing)", err, store.ErrNotFound)

		at := now.Add(time.Minute)
		got, err := s.RevokeAPIKey(ctx, a.ID, k0.ID, at, ev("api_key.revoke", k0.ID))
		if err != nil || got.RevokedAt == nil || !got.RevokedAt.Equal(at) {
			t.Fatalf("RevokeAPIKey: got %+v, %v", got, err)
		}
		byHash, err := s.APIKeyByHash(ctx, "hash-0")
		if err != nil || byHash.RevokedAt == nil || byHash.Live(at) || byHash.Vouches(now, at) {
			t.Fatalf("revoked key by hash: got %+v, %v; want it found, not live, vouching for nothing", byHash, err)
		}
		_, err = s.RevokeAPIKey(ctx, a.ID, k0.ID, at, ev("api_key.revoke", k0.ID))
		wantErr(t, "RevokeAPIKey(twice)", err, store.ErrNotFound)
		_, err = s.RotateAPIKey(ctx, a.ID, k0.ID, "hash-0b", at, ev("api_key.rotate", k0.ID))
		wantErr(t, "RotateAPIKey(revoked)", err, store.ErrNotFound)
		if list, _ := s.ListAPIKeys(ctx, a.ID); len(list) != 3 {
			t.Fatalf("ListAPIKeys after a revoke: %d keys, want 3 (revoked ones are listed)", len(list))
		}
	})

	t.Run("rotate", func(t *testing.T) {
		at := now.Add(2 * time.Minute)
		got, err := s.RotateAPIKey(ctx, a.ID, k1.ID, "hash-1b", at, ev("api_key.rotate", k1.ID))
		if err != nil {
			t.Fatal(err)
		}
		if got.ID != k1.ID || got.SecretHash != "hash-1b" || got.RotatedAt == nil || !got.RotatedAt.Equal(at) ||
			!got.ExpiresAt.Equal(exp) || !slices.Equal(got.Actions, k1.Actions) || !slices.Equal(got.Sandboxes, k1.Sandboxes) || got.Labels["team"] != "a" {
			t.Fatalf("RotateAPIKey: got %+v; want the same id, scope and expiry with the new hash", got)
		}
		_, err = s.APIKeyByHash(ctx, "hash-1")
		wantErr(t, "APIKeyByHash(the old secret)", err, store.ErrNotFound)
		if byHash, err := s.APIKeyByHash(ctx, "hash-1b"); err != nil || byHash.ID != k1.ID {
			t.Fatalf("APIKeyByHash(the new secret): got %+v, %v", byHash, err)
		}
		if byID, _ := s.APIKeyByID(ctx, k1.ID); byID.Vouches(at.Add(-time.Microsecond), at) || !byID.Vouches(at, at) {
			t.Fatalf("after a rotate: %+v vouches for what it minted before", byID)
		}
		_, err = s.RotateAPIKey(ctx, a.ID, k1.ID, "hash-2", at, ev("api_key.rotate", k1.ID))
		wantErr(t, "RotateAPIKey(to a taken hash)", err, store.ErrConflict)
		_, err = s.RotateAPIKey(ctx, b.ID, k1.ID, "hash-1c", at, nil)
		wantErr(t, "RotateAPIKey(another account's)", err, store.ErrNotFound)
		_, err = s.RotateAPIKey(ctx, a.ID, k1.ID, "hash-1c", exp, ev("api_key.rotate", k1.ID))
		wantErr(t, "RotateAPIKey(expired)", err, store.ErrKeyExpired)
		if byID, _ := s.APIKeyByID(ctx, k1.ID); byID.SecretHash != "hash-1b" || !byID.RotatedAt.Equal(at) {
			t.Fatalf("a refused rotate changed the key: %+v", byID)
		}
	})

	t.Run("audit", func(t *testing.T) {
		got := fmt.Sprint(auditActions(t, s, a.ID))
		want := fmt.Sprint([]string{"api_key.rotate " + k1.ID, "api_key.revoke " + k0.ID})
		if got != want {
			t.Fatalf("audit: got %v, want %v (refused writes record nothing)", got, want)
		}
	})

	t.Run("uses", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make(chan error, 20)
		for i := range 20 {
			wg.Go(func() {
				errs <- s.RecordAPIKeyUse(ctx, k2.ID, now.Add(time.Duration(i)*time.Second), 3)
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		// A day before, and one 30 days before (out of the window).
		if err := s.RecordAPIKeyUse(ctx, k2.ID, now.AddDate(0, 0, -1), 5); err != nil {
			t.Fatal(err)
		}
		if err := s.RecordAPIKeyUse(ctx, k2.ID, now.AddDate(0, 0, -store.UsesKept), 7); err != nil {
			t.Fatal(err)
		}
		got, err := s.APIKeyByID(ctx, k2.ID)
		if err != nil {
			t.Fatal(err)
		}
		if n := got.Requests(now); n != 65 {
			t.Fatalf("Requests: got %d, want 65 (20 writers × 3, and 5 the day before; none lost)", n)
		}
		if last := now.Add(19 * time.Second); got.LastUsedAt == nil || !got.LastUsedAt.Equal(last) {
			t.Fatalf("LastUsedAt: got %v, want %v (the latest, whatever the order of writes)", got.LastUsedAt, last)
		}
		wantErr(t, "RecordAPIKeyUse(missing)", s.RecordAPIKeyUse(ctx, "key_missing", now, 1), store.ErrNotFound)
	})

	t.Run("reopen", func(t *testing.T) {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s = open(t, o)
		k, err := s.APIKeyByHash(ctx, "hash-1b")
		if err != nil || k.RotatedAt == nil {
			t.Fatalf("rotated key after reopen: %+v, %v", k, err)
		}
		if k, err := s.APIKeyByID(ctx, k0.ID); err != nil || k.RevokedAt == nil {
			t.Fatalf("revoked key after reopen: %+v, %v", k, err)
		}
		if k, err := s.APIKeyByID(ctx, k2.ID); err != nil || k.Requests(now) != 65 {
			t.Fatalf("uses after reopen: %+v, %v", k, err)
		}
		if _, err := s.APIKeyByHash(ctx, "hash-1"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("old secret after reopen: %v, want ErrNotFound", err)
		}
	})
}
