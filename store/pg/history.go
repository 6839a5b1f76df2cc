package pg

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"froog.tech/froog/store"
)

// The command history (store/history.go): records as documents in
// commands, their output as gzip chunks in command_output, and each
// account's compressed bytes per hour in command_output_hours.

func (s *Store) CreateCommand(ctx context.Context, c store.Command) (store.Command, error) {
	c.StartedAt = store.Micro(c.StartedAt)
	err := s.inTx(ctx, nil, func(t *txn) error {
		// FOR SHARE: a delete of the sandbox waits, so no record outlives it.
		var account string
		err := t.QueryRow(ctx, `SELECT account_id FROM sandboxes WHERE id = $1 AND NOT deleted FOR SHARE`, c.SandboxID).Scan(&account)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("sandbox %s: %w", c.SandboxID, store.ErrNotFound)
		}
		if err != nil {
			return err
		}
		c.AccountID = account
		_, err = t.Exec(ctx, `INSERT INTO commands (sandbox_id, id, account_id, started_at, open, doc) VALUES ($1, $2, $3, $4, $5, $6)`,
			c.SandboxID, c.ID, c.AccountID, c.StartedAt, c.Open(), mustJSON(c))
		if isUnique(err) {
			return store.ErrConflict
		}
		return err
	})
	if err != nil {
		return store.Command{}, fmt.Errorf("record command %s: %w", c.ID, err)
	}
	return c, nil
}

func (s *Store) Command(ctx context.Context, sandboxID, id string) (store.Command, error) {
	var c store.Command
	err := getDoc(ctx, s.pool, &c, "command "+id, `SELECT doc FROM commands WHERE sandbox_id = $1 AND id = $2`, sandboxID, id)
	return c, err
}

func (s *Store) Commands(ctx context.Context, f store.CommandFilter) ([]store.Command, error) {
	q := `SELECT doc FROM commands WHERE sandbox_id = $1 AND ($2 = '' OR doc->>'mode' = $2)
	AND ($3::timestamptz IS NULL OR (started_at, id) < ($3, $4)) AND (open OR NOT $5) ORDER BY started_at DESC, id DESC`
	args := []any{f.SandboxID, f.Mode, nil, f.BeforeID, f.Open}
	if !f.BeforeTime.IsZero() {
		args[2] = f.BeforeTime
	}
	if f.Limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", f.Limit)
	}
	return docs[store.Command](ctx, s.pool, "commands", q, args...)
}

func (s *Store) OpenCommands(ctx context.Context) ([]store.Command, error) {
	return docs[store.Command](ctx, s.pool, "commands", `SELECT doc FROM commands WHERE open ORDER BY started_at, id`)
}

// lockCommand reads a record for update.
func lockCommand(ctx context.Context, t *txn, sandboxID, id string) (store.Command, error) {
	var c store.Command
	err := getDoc(ctx, t, &c, "command "+id, `SELECT doc FROM commands WHERE sandbox_id = $1 AND id = $2 FOR UPDATE`, sandboxID, id)
	return c, err
}

func writeCommand(ctx context.Context, t *txn, c *store.Command) error {
	_, err := t.Exec(ctx, `UPDATE commands SET open = $3, doc = $4 WHERE sandbox_id = $1 AND id = $2`, c.SandboxID, c.ID, c.Open(), mustJSON(c))
	return err
}

func (s *Store) UpdateCommand(ctx context.Context, sandboxID, id string, fn func(*store.Command) error) (store.Command, error) {
	var out store.Command
	err := s.inTx(ctx, nil, func(t *txn) error {
		old, err := lockCommand(ctx, t, sandboxID, id)
		if err != nil {
			return err
		}
		if out, err = store.ChangeCommand(old, fn); err != nil {
			return err
		}
		return writeCommand(ctx, t, &out)
	})
	if err != nil {
		return store.Command{}, fmt.Errorf("update command %s: %w", id, err)
	}
	return out, nil
}

func (s *Store) AppendOutput(ctx context.Context, sandboxID, id string, out store.Output) (store.Command, error) {
	out.At = store.Micro(out.At)
	var c store.Command
	err := s.inTx(ctx, nil, func(t *txn) error {
		var err error
		if c, err = lockCommand(ctx, t, sandboxID, id); err != nil {
			return err
		}
		// The hour's row serializes the account's writers, so the cap holds.
		hour := store.OutputHour(out.At)
		if _, err := t.Exec(ctx, `INSERT INTO command_output_hours (account_id, hour, bytes) VALUES ($1, $2, 0) ON CONFLICT DO NOTHING`, c.AccountID, hour); err != nil {
			return err
		}
		var use store.OutputUse
		if err := t.QueryRow(ctx, `SELECT bytes FROM command_output_hours WHERE account_id = $1 AND hour = $2 FOR UPDATE`, c.AccountID, hour).Scan(&use.Hour); err != nil {
			return err
		}
		if err := t.QueryRow(ctx, `SELECT coalesce(sum((doc->>'stored_bytes')::bigint), 0) FROM commands WHERE account_id = $1`, c.AccountID).Scan(&use.Total); err != nil {
			return err
		}
		keep, err := store.AcceptOutput(&c, &out, use)
		if err != nil {
			return err
		}
		if keep {
			if _, err := t.Exec(ctx, `INSERT INTO command_output (sandbox_id, command_id, stream, pos, size, at, gzip) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
				sandboxID, id, out.Stream, out.Offset, out.Size, out.At, out.Gzip); err != nil {
				return err
			}
			if _, err := t.Exec(ctx, `UPDATE command_output_hours SET bytes = bytes + $3 WHERE account_id = $1 AND hour = $2`, c.AccountID, hour, len(out.Gzip)); err != nil {
				return err
			}
		}
		return writeCommand(ctx, t, &c)
	})
	if err != nil {
		return store.Command{}, fmt.Errorf("store output of command %s: %w", id, err)
	}
	return c, nil
}

func (s *Store) ReadOutput(ctx context.Context, sandboxID, id, stream string, offset, n int64) ([]store.Output, error) {
	if _, err := s.Command(ctx, sandboxID, id); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT stream, pos, size, at, gzip FROM command_output
	WHERE sandbox_id = $1 AND command_id = $2 AND stream = $3 AND pos + size > $4 AND pos < $5 ORDER BY pos`, sandboxID, id, stream, offset, offset+n)
	if err != nil {
		return nil, fmt.Errorf("read output of command %s: %w", id, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Output, error) {
		var o store.Output
		err := r.Scan(&o.Stream, &o.Offset, &o.Size, &o.At, &o.Gzip)
		o.At = o.At.UTC()
		return o, err
	})
	if err != nil {
		return nil, fmt.Errorf("read output of command %s: %w", id, err)
	}
	return out, nil
}

func (s *Store) PruneHistory(ctx context.Context, before time.Time) (int, error) {
	var n int
	err := s.inTx(ctx, nil, func(t *txn) error {
		rows, err := t.Query(ctx, `DELETE FROM commands WHERE NOT open AND (doc->>'ended_at')::timestamptz < $1 RETURNING sandbox_id, id`, before)
		if err != nil {
			return err
		}
		gone, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct{ SandboxID, ID string }])
		if err != nil {
			return err
		}
		for _, g := range gone {
			if _, err := t.Exec(ctx, `DELETE FROM command_output WHERE sandbox_id = $1 AND command_id = $2`, g.SandboxID, g.ID); err != nil {
				return err
			}
		}
		n = len(gone)
		_, err = t.Exec(ctx, `DELETE FROM command_output_hours WHERE hour < $1`, before.Add(-24*time.Hour))
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("prune command history: %w", err)
	}
	return n, nil
}

// deleteHistory removes a sandbox's records and their output (in
// DeleteSandbox's transaction).
func deleteHistory(ctx context.Context, t *txn, sandboxID string) error {
	if _, err := t.Exec(ctx, `DELETE FROM command_output WHERE sandbox_id = $1`, sandboxID); err != nil {
		return fmt.Errorf("delete command output: %w", err)
	}
	if _, err := t.Exec(ctx, `DELETE FROM commands WHERE sandbox_id = $1`, sandboxID); err != nil {
		return fmt.Errorf("delete command history: %w", err)
	}
	return nil
}
