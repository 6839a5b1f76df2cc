package embedded

import (
	"context"
	"fmt"

	"froog.tech/froog/store"
)

// env returns the account's environment (empty when none was set).
func (s *Store) env(accountID string) store.Environment {
	if e, ok := s.envs[accountID]; ok {
		return *clone(e)
	}
	return store.Environment{AccountID: accountID}
}

func (s *Store) Environment(ctx context.Context, accountID string) (store.Environment, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.accounts[accountID]; !ok {
		return store.Environment{}, fmt.Errorf("environment: account %s: %w", accountID, store.ErrNotFound)
	}
	return s.env(accountID), nil
}

func (s *Store) UpdateEnvironment(ctx context.Context, accountID string, fn func(*store.Environment, *store.AuditEvent) error, ev *store.AuditEvent) (store.Environment, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.accounts[accountID]; !ok {
		return store.Environment{}, fmt.Errorf("update environment: account %s: %w", accountID, store.ErrNotFound)
	}
	e := s.env(accountID)
	if err := fn(&e, ev); err != nil {
		return store.Environment{}, fmt.Errorf("update environment: %w", err)
	}
	e.AccountID = accountID
	if err := e.Check(); err != nil {
		return store.Environment{}, fmt.Errorf("update environment: %w", err)
	}
	if err := s.commit([]record{put(tEnv, accountID, clone(&e))}, ev); err != nil {
		return store.Environment{}, err
	}
	return e, nil
}
