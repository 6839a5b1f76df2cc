package embedded

import (
	"context"
	"fmt"
	"sort"

	"froog.tech/froog/store"
)

func (s *Store) CreateSSHKey(ctx context.Context, k store.SSHKey, ev *store.AuditEvent) (store.SSHKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if k.ID == "" {
		k.ID = store.NewID("sshkey")
	}
	if _, ok := s.accounts[k.AccountID]; !ok {
		return store.SSHKey{}, fmt.Errorf("create ssh key: account %s: %w", k.AccountID, store.ErrNotFound)
	}
	n := 0
	for _, o := range s.sshKeys {
		if o.ID == k.ID || o.AccountID == k.AccountID && o.Fingerprint == k.Fingerprint {
			return store.SSHKey{}, fmt.Errorf("create ssh key %s: %w", k.Fingerprint, store.ErrConflict)
		}
		if o.AccountID == k.AccountID {
			n++
		}
	}
	if n >= store.MaxSSHKeysPerAccount {
		return store.SSHKey{}, fmt.Errorf("create ssh key: %w", &store.LimitError{Limit: "ssh_keys", Max: store.MaxSSHKeysPerAccount})
	}
	if err := s.commit([]record{put(tSSHKey, k.ID, clone(&k))}, ev); err != nil {
		return store.SSHKey{}, err
	}
	return k, nil
}

func (s *Store) SSHKeys(ctx context.Context, accountID string) ([]store.SSHKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []store.SSHKey{}
	for _, k := range s.sshKeys {
		if k.AccountID == accountID {
			out = append(out, *clone(k))
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

func (s *Store) DeleteSSHKey(ctx context.Context, accountID, id string, ev *store.AuditEvent) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if k, ok := s.sshKeys[id]; !ok || k.AccountID != accountID {
		return fmt.Errorf("ssh key %s: %w", id, store.ErrNotFound)
	}
	return s.commit([]record{del(tSSHKey, id)}, ev)
}
