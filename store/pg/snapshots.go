package pg

import (
	"context"
	"fmt"

	"froog.tech/froog/store"
)

func writeSnapshot(ctx context.Context, t *txn, sn *store.Snapshot, insert bool) error {
	var err error
	if insert {
		_, err = t.Exec(ctx, `INSERT INTO snapshots (id, account_id, sandbox_id, host_id, created_at, deleted, doc) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
			sn.ID, sn.AccountID, sn.SandboxID, sn.HostID, sn.CreatedAt, sn.DeletedAt != nil, mustJSON(sn))
	} else {
		_, err = t.Exec(ctx, `UPDATE snapshots SET host_id = $2, deleted = $3, doc = $4 WHERE id = $1`,
			sn.ID, sn.HostID, sn.DeletedAt != nil, mustJSON(sn))
	}
	if isUnique(err) {
		return store.ErrConflict
	}
	if err != nil {
		return err
	}
	t.changed(store.KindSnapshot, sn.ID, sn)
	return nil
}

func (s *Store) CreateSnapshot(ctx context.Context, sn store.Snapshot, ev *store.AuditEvent) (store.Snapshot, error) {
	if sn.ID == "" {
		sn.ID = store.NewID("snap")
	}
	err := s.inTx(ctx, ev, func(t *txn) error {
		// The sandbox's row, shared-locked: a delete cannot slip between.
		var n int
		if err := t.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM sandboxes WHERE id = $1 AND account_id = $2 AND NOT deleted FOR SHARE) s`,
			sn.SandboxID, sn.AccountID).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("sandbox %s: %w", sn.SandboxID, store.ErrNotFound)
		}
		return writeSnapshot(ctx, t, &sn, true)
	})
	if err != nil {
		return store.Snapshot{}, fmt.Errorf("create snapshot: %w", err)
	}
	return sn, nil
}

func (s *Store) Snapshot(ctx context.Context, accountID, id string) (store.Snapshot, error) {
	var sn store.Snapshot
	err := getDoc(ctx, s.pool, &sn, "snapshot "+id, `SELECT doc FROM snapshots WHERE id = $1 AND account_id = $2`, id, accountID)
	return sn, err
}

func (s *Store) ListSnapshots(ctx context.Context, f store.SnapshotFilter) ([]store.Snapshot, error) {
	q := `SELECT doc FROM snapshots WHERE account_id = $1 AND NOT deleted`
	args := []any{f.AccountID}
	if f.SandboxID != "" {
		args = append(args, f.SandboxID)
		q += fmt.Sprintf(` AND sandbox_id = $%d`, len(args))
	}
	list, err := docs[store.Snapshot](ctx, s.pool, "snapshots", q, args...)
	if err != nil {
		return nil, err
	}
	out := []store.Snapshot{}
	for i := range list {
		if f.Match(&list[i]) {
			out = append(out, list[i])
		}
	}
	store.SortSnapshots(out)
	return out, nil
}

func (s *Store) HostSnapshots(ctx context.Context, hostID string) ([]store.Snapshot, error) {
	return docs[store.Snapshot](ctx, s.pool, "snapshots", `SELECT doc FROM snapshots WHERE host_id = $1 ORDER BY created_at, id`, hostID)
}

func (s *Store) UpdateSnapshot(ctx context.Context, id string, fn func(*store.Snapshot) error, ev *store.AuditEvent) (store.Snapshot, error) {
	var sn store.Snapshot
	err := s.inTx(ctx, ev, func(t *txn) error {
		if err := getDoc(ctx, t, &sn, "snapshot "+id, `SELECT doc FROM snapshots WHERE id = $1 FOR UPDATE`, id); err != nil {
			return err
		}
		accountID := sn.AccountID
		if err := fn(&sn); err != nil {
			return err
		}
		sn.ID, sn.AccountID = id, accountID
		return writeSnapshot(ctx, t, &sn, false)
	})
	if err != nil {
		return store.Snapshot{}, fmt.Errorf("update snapshot: %w", err)
	}
	return sn, nil
}

func (s *Store) PurgeSnapshot(ctx context.Context, id string) error {
	return s.inTx(ctx, nil, func(t *txn) error {
		tag, err := t.Exec(ctx, `DELETE FROM snapshots WHERE id = $1 AND deleted`, id)
		if err != nil {
			return fmt.Errorf("purge snapshot %s: %w", id, err)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("purge snapshot %s: %w", id, store.ErrNotFound)
		}
		t.changed(store.KindSnapshot, id, nil)
		return nil
	})
}
