package pg

import (
	"context"
	"errors"
	"fmt"

	"froog.tech/froog/store"
)

// env reads the account's environment (empty when none was set), locking
// its row with lock; ErrNotFound without the account.
func env(ctx context.Context, t *txn, accountID string, lock bool) (store.Environment, error) {
	var a store.Account
	if err := getDoc(ctx, t, &a, "account "+accountID, `SELECT doc FROM accounts WHERE id = $1`, accountID); err != nil {
		return store.Environment{}, err
	}
	q := `SELECT doc FROM environments WHERE account_id = $1`
	if lock {
		q += ` FOR UPDATE`
	}
	e := store.Environment{AccountID: accountID}
	err := getDoc(ctx, t, &e, "environment", q, accountID)
	if errors.Is(err, store.ErrNotFound) {
		return e, nil
	}
	return e, err
}

func (s *Store) Environment(ctx context.Context, accountID string) (store.Environment, error) {
	var e store.Environment
	err := s.inTx(ctx, nil, func(t *txn) (err error) {
		e, err = env(ctx, t, accountID, false)
		return err
	})
	if err != nil {
		return store.Environment{}, fmt.Errorf("environment: %w", err)
	}
	return e, nil
}

func (s *Store) UpdateEnvironment(ctx context.Context, accountID string, fn func(*store.Environment, *store.AuditEvent) error, ev *store.AuditEvent) (store.Environment, error) {
	var out store.Environment
	err := s.inTx(ctx, ev, func(t *txn) error {
		// The first write for an account has no row to lock: the
		// account's row serializes those.
		if _, err := t.Exec(ctx, `SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE`, accountID); err != nil {
			return err
		}
		e, err := env(ctx, t, accountID, true)
		if err != nil {
			return err
		}
		if err := fn(&e, ev); err != nil {
			return err
		}
		e.AccountID = accountID
		if err := e.Check(); err != nil {
			return err
		}
		out = e
		_, err = t.Exec(ctx, `INSERT INTO environments (account_id, doc) VALUES ($1, $2)
			ON CONFLICT (account_id) DO UPDATE SET doc = EXCLUDED.doc`, accountID, mustJSON(e))
		return err
	})
	if err != nil {
		return store.Environment{}, fmt.Errorf("update environment: %w", err)
	}
	return out, nil
}
