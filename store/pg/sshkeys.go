package pg

import (
	"context"
	"fmt"

	"froog.tech/froog/store"
)

func (s *Store) CreateSSHKey(ctx context.Context, k store.SSHKey, ev *store.AuditEvent) (store.SSHKey, error) {
	if k.ID == "" {
		k.ID = store.NewID("sshkey")
	}
	err := s.inTx(ctx, ev, func(t *txn) error {
		// The account's row, locked: concurrent adds count one at a time.
		var a store.Account
		if err := getDoc(ctx, t, &a, "account "+k.AccountID, `SELECT doc FROM accounts WHERE id = $1 FOR UPDATE`, k.AccountID); err != nil {
			return err
		}
		var n int
		if err := t.QueryRow(ctx, `SELECT count(*) FROM ssh_keys WHERE account_id = $1`, k.AccountID).Scan(&n); err != nil {
			return fmt.Errorf("count ssh keys: %w", err)
		}
		if n >= store.MaxSSHKeysPerAccount {
			return &store.LimitError{Limit: "ssh_keys", Max: store.MaxSSHKeysPerAccount}
		}
		_, err := t.Exec(ctx, `INSERT INTO ssh_keys (id, account_id, fingerprint, created_at, doc) VALUES ($1, $2, $3, $4, $5)`,
			k.ID, k.AccountID, k.Fingerprint, k.CreatedAt, mustJSON(k))
		if isUnique(err) {
			return store.ErrConflict
		}
		return err
	})
	if err != nil {
		return store.SSHKey{}, fmt.Errorf("create ssh key: %w", err)
	}
	return k, nil
}

func (s *Store) SSHKeys(ctx context.Context, accountID string) ([]store.SSHKey, error) {
	return docs[store.SSHKey](ctx, s.pool, "ssh keys", `SELECT doc FROM ssh_keys WHERE account_id = $1 ORDER BY created_at, id`, accountID)
}

func (s *Store) DeleteSSHKey(ctx context.Context, accountID, id string, ev *store.AuditEvent) error {
	err := s.inTx(ctx, ev, func(t *txn) error {
		tag, err := t.Exec(ctx, `DELETE FROM ssh_keys WHERE id = $1 AND account_id = $2`, id, accountID)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("ssh key %s: %w", id, store.ErrNotFound)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete ssh key: %w", err)
	}
	return nil
}
