package pg

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"froog.tech/froog/store"
)

func (s *Store) CreateAccount(ctx context.Context, a store.Account) (store.Account, error) {
	if a.ID == "" {
		a.ID = store.NewID("acct")
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO accounts (id, doc) VALUES ($1, $2)`, a.ID, mustJSON(a))
	if isUnique(err) {
		return store.Account{}, fmt.Errorf("create account %s: %w", a.ID, store.ErrConflict)
	}
	if err != nil {
		return store.Account{}, fmt.Errorf("create account: %w", err)
	}
	return a, nil
}

func (s *Store) Account(ctx context.Context, id string) (store.Account, error) {
	var a store.Account
	err := getDoc(ctx, s.pool, &a, "account "+id, `SELECT doc FROM accounts WHERE id = $1`, id)
	return a, err
}

func (s *Store) CreateAPIKey(ctx context.Context, k store.APIKey, ev *store.AuditEvent) (store.APIKey, error) {
	if k.ID == "" {
		k.ID = store.NewID("key")
	}
	err := s.inTx(ctx, ev, func(t *txn) error {
		var a store.Account
		if err := getDoc(ctx, t, &a, "account "+k.AccountID, `SELECT doc FROM accounts WHERE id = $1`, k.AccountID); err != nil {
			return err
		}
		_, err := t.Exec(ctx, `INSERT INTO api_keys (id, account_id, secret_hash, doc) VALUES ($1, $2, $3, $4)`, k.ID, k.AccountID, k.SecretHash, mustJSON(k))
		if isUnique(err) {
			return store.ErrConflict
		}
		return err
	})
	if err != nil {
		return store.APIKey{}, fmt.Errorf("create api key: %w", err)
	}
	return k, nil
}

func (s *Store) APIKeyByHash(ctx context.Context, hash string) (store.APIKey, error) {
	var k store.APIKey
	err := getDoc(ctx, s.pool, &k, "api key", `SELECT doc FROM api_keys WHERE secret_hash = $1`, hash)
	return k, err
}

func (s *Store) APIKeyByID(ctx context.Context, id string) (store.APIKey, error) {
	var k store.APIKey
	err := getDoc(ctx, s.pool, &k, "api key "+id, `SELECT doc FROM api_keys WHERE id = $1`, id)
	return k, err
}

func (s *Store) ListAPIKeys(ctx context.Context, accountID string) ([]store.APIKey, error) {
	keys, err := docs[store.APIKey](ctx, s.pool, "api keys", `SELECT doc FROM api_keys WHERE account_id = $1`, accountID)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(keys, func(a, b store.APIKey) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return keys, nil
}

// updateAPIKey reads the key id (of accountID, when not empty) for
// update, applies fn and writes it back with its secret hash.
func (s *Store) updateAPIKey(ctx context.Context, what, accountID, id string, fn func(*store.APIKey) error, ev *store.AuditEvent) (store.APIKey, error) {
	var k store.APIKey
	err := s.inTx(ctx, ev, func(t *txn) error {
		if err := getDoc(ctx, t, &k, "api key "+id, `SELECT doc FROM api_keys WHERE id = $1 AND ($2 = '' OR account_id = $2) FOR UPDATE`, id, accountID); err != nil {
			return err
		}
		if err := fn(&k); err != nil {
			return err
		}
		_, err := t.Exec(ctx, `UPDATE api_keys SET secret_hash = $2, doc = $3 WHERE id = $1`, k.ID, k.SecretHash, mustJSON(k))
		if isUnique(err) {
			return store.ErrConflict
		}
		return err
	})
	if err != nil {
		return store.APIKey{}, fmt.Errorf("%s: %w", what, err)
	}
	return k, nil
}

func (s *Store) RevokeAPIKey(ctx context.Context, accountID, id string, at time.Time, ev *store.AuditEvent) (store.APIKey, error) {
	return s.updateAPIKey(ctx, "revoke api key", accountID, id, func(k *store.APIKey) error { return k.Revoke(at) }, ev)
}

func (s *Store) RotateAPIKey(ctx context.Context, accountID, id, hash string, at time.Time, ev *store.AuditEvent) (store.APIKey, error) {
	return s.updateAPIKey(ctx, "rotate api key", accountID, id, func(k *store.APIKey) error { return k.Rotate(hash, at) }, ev)
}

func (s *Store) RecordAPIKeyUse(ctx context.Context, id string, at time.Time, n int) error {
	_, err := s.updateAPIKey(ctx, "record api key use", "", id, func(k *store.APIKey) error { k.AddUses(at, n); return nil }, nil)
	return err
}

// checkSandbox applies the rules every sandbox write shares (the name is
// left to the unique index): room in the account for one more running
// sandbox, and a start its start limits allow, which it records. It locks
// the account row, so concurrent starts count in turn.
func checkSandbox(ctx context.Context, t *txn, old, sb *store.Sandbox) error {
	if err := store.CheckPortsIn(ctx, urlTx{t}, old, sb); err != nil {
		return err
	}
	if store.TakesEnvironment(old, sb) {
		e, err := env(ctx, t, sb.AccountID, false)
		if err != nil {
			return err
		}
		store.StartEnvironment(sb, e)
	}
	if !store.StartsRunning(old, sb) {
		return nil
	}
	var a store.Account
	if err := getDoc(ctx, t, &a, "account "+sb.AccountID, `SELECT doc FROM accounts WHERE id = $1 FOR UPDATE`, sb.AccountID); err != nil {
		return err
	}
	var n int
	if err := t.QueryRow(ctx, `SELECT count(*) FROM sandboxes WHERE account_id = $1 AND NOT deleted AND desired_running AND id <> $2`, sb.AccountID, sb.ID).Scan(&n); err != nil {
		return fmt.Errorf("count running sandboxes: %w", err)
	}
	if n >= a.MaxSandboxes {
		return &store.LimitError{Limit: "sandboxes_at_once", Max: a.MaxSandboxes}
	}
	at := store.StartAt(sb)
	if _, err := t.Exec(ctx, `DELETE FROM starts WHERE account_id = $1 AND at <= $2`, sb.AccountID, at.Add(-store.StartsKept)); err != nil {
		return fmt.Errorf("prune starts: %w", err)
	}
	starts, err := startsSince(ctx, t, sb.AccountID, at.Add(-store.StartsKept))
	if err != nil {
		return err
	}
	if err := store.CheckStart(a, starts, at); err != nil {
		return err
	}
	if _, err := t.Exec(ctx, `INSERT INTO starts (account_id, at) VALUES ($1, $2)`, sb.AccountID, at); err != nil {
		return fmt.Errorf("record start: %w", err)
	}
	return nil
}

// startsSince lists the account's starts after since.
func startsSince(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, accountID string, since time.Time) ([]time.Time, error) {
	rows, err := q.Query(ctx, `SELECT at FROM starts WHERE account_id = $1 AND at > $2`, accountID, since)
	if err != nil {
		return nil, fmt.Errorf("read starts: %w", err)
	}
	starts, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
	if err != nil {
		return nil, fmt.Errorf("read starts: %w", err)
	}
	return starts, nil
}

func (s *Store) AccountUsage(ctx context.Context, accountID string, at time.Time) (store.AccountUsage, error) {
	var u store.AccountUsage
	if err := getDoc(ctx, s.pool, &u.Account, "account "+accountID, `SELECT doc FROM accounts WHERE id = $1`, accountID); err != nil {
		return u, err
	}
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM sandboxes WHERE account_id = $1 AND NOT deleted AND desired_running`, accountID).Scan(&u.Running); err != nil {
		return u, fmt.Errorf("count running sandboxes: %w", err)
	}
	starts, err := startsSince(ctx, s.pool, accountID, at.Add(-store.StartsKept))
	if err != nil {
		return u, err
	}
	for i := range starts {
		starts[i] = starts[i].UTC()
	}
	u.Starts = starts
	return u, nil
}

func writeSandbox(ctx context.Context, t *txn, sb *store.Sandbox, insert bool) error {
	var err error
	doc := mustJSON(sb)
	var oldDoc []byte
	if insert {
		_, err = t.Exec(ctx, `INSERT INTO sandboxes (id, account_id, name, created_at, deleted, desired_running, doc) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
			sb.ID, sb.AccountID, sb.Name, sb.CreatedAt, sb.DeletedAt != nil, sb.DesiredState == store.StateRunning, doc)
	} else {
		// The row as it was, for the write's webhook events.
		err = t.QueryRow(ctx, `WITH old AS (SELECT doc FROM sandboxes WHERE id = $1)
			UPDATE sandboxes SET name = $2, deleted = $3, desired_running = $4, doc = $5 WHERE id = $1 RETURNING (SELECT doc FROM old)`,
			sb.ID, sb.Name, sb.DeletedAt != nil, sb.DesiredState == store.StateRunning, doc).Scan(&oldDoc)
		if errors.Is(err, pgx.ErrNoRows) {
			err = nil
		}
	}
	if isUnique(err) {
		return fmt.Errorf("sandbox name %q: %w", sb.Name, store.ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("write sandbox: %w", err)
	}
	t.changed(store.KindSandbox, sb.ID, sb)
	return t.wroteSandbox(oldDoc, doc)
}

func (s *Store) CreateSandbox(ctx context.Context, sb store.Sandbox, ev *store.AuditEvent) (store.Sandbox, error) {
	if sb.ID == "" {
		sb.ID = store.NewID("sbx")
	}
	sb.CreatedAt = store.Micro(sb.CreatedAt)
	err := s.inTx(ctx, ev, func(t *txn) error {
		var a store.Account
		if err := getDoc(ctx, t, &a, "account "+sb.AccountID, `SELECT doc FROM accounts WHERE id = $1`, sb.AccountID); err != nil {
			return err
		}
		if err := checkSandbox(ctx, t, nil, &sb); err != nil {
			return err
		}
		return writeSandbox(ctx, t, &sb, true)
	})
	if err != nil {
		return store.Sandbox{}, fmt.Errorf("create sandbox: %w", err)
	}
	return sb, nil
}

func (s *Store) Sandbox(ctx context.Context, accountID, name string) (store.Sandbox, error) {
	var sb store.Sandbox
	err := getDoc(ctx, s.pool, &sb, fmt.Sprintf("sandbox %q", name), `SELECT doc FROM sandboxes WHERE account_id = $1 AND name = $2 AND NOT deleted`, accountID, name)
	return sb, err
}

func (s *Store) SandboxByID(ctx context.Context, id string) (store.Sandbox, error) {
	var sb store.Sandbox
	err := getDoc(ctx, s.pool, &sb, "sandbox "+id, `SELECT doc FROM sandboxes WHERE id = $1`, id)
	return sb, err
}

func (s *Store) ListSandboxes(ctx context.Context, f store.SandboxFilter) ([]store.Sandbox, error) {
	where := []string{"account_id = $1", "NOT deleted"}
	args := []any{f.AccountID}
	arg := func(v any) string { args = append(args, v); return fmt.Sprintf("$%d", len(args)) }
	if f.Name != "" {
		where = append(where, "name = "+arg(f.Name))
	}
	if f.NamePrefix != "" {
		where = append(where, "starts_with(name, "+arg(f.NamePrefix)+")")
	}
	if len(f.States) > 0 {
		where = append(where, "doc->>'state' = ANY("+arg(f.States)+")")
	}
	if f.Names != nil {
		scope := "name = ANY(" + arg(f.Names) + ")"
		if f.OrCreatedBy != "" {
			scope = "(" + scope + " OR doc->>'created_by_key' = " + arg(f.OrCreatedBy) + ")"
		}
		where = append(where, scope)
	}
	if len(f.Labels) > 0 {
		where = append(where, "doc->'labels' @> "+arg(mustJSON(f.Labels))+"::jsonb")
	}
	for _, k := range f.LabelKeys {
		where = append(where, "jsonb_exists(doc->'labels', "+arg(k)+")")
	}
	if !f.AfterTime.IsZero() {
		where = append(where, "(created_at, id) > ("+arg(f.AfterTime)+", "+arg(f.AfterID)+")")
	}
	q := "SELECT doc FROM sandboxes WHERE " + strings.Join(where, " AND ") + " ORDER BY created_at, id"
	if f.Limit > 0 {
		q += " LIMIT " + arg(f.Limit)
	}
	return docs[store.Sandbox](ctx, s.pool, "sandboxes", q, args...)
}

// lockSandbox reads a live sandbox and locks its row to commit.
func lockSandbox(ctx context.Context, t *txn, id string) (*store.Sandbox, error) {
	var sb store.Sandbox
	if err := getDoc(ctx, t, &sb, "sandbox "+id, `SELECT doc FROM sandboxes WHERE id = $1 AND NOT deleted FOR UPDATE`, id); err != nil {
		return nil, err
	}
	return &sb, nil
}

func (s *Store) UpdateSandbox(ctx context.Context, id string, fn func(*store.Sandbox, *store.AuditEvent) error, ev *store.AuditEvent) (store.Sandbox, error) {
	var out store.Sandbox
	err := s.inTx(ctx, ev, func(t *txn) error {
		old, err := lockSandbox(ctx, t, id)
		if err != nil {
			return err
		}
		sb := *old
		sb.Labels = cloneMap(old.Labels)
		sb.EnvSealed, sb.EnvNames = slices.Clone(old.EnvSealed), slices.Clone(old.EnvNames)
		sb.Ports = slices.Clone(old.Ports)
		if err := fn(&sb, ev); err != nil {
			return err
		}
		sb.ID, sb.AccountID, sb.CreatedAt = old.ID, old.AccountID, old.CreatedAt
		if err := checkSandbox(ctx, t, old, &sb); err != nil {
			return err
		}
		out = sb
		return writeSandbox(ctx, t, &sb, false)
	})
	if err != nil {
		return store.Sandbox{}, fmt.Errorf("update sandbox: %w", err)
	}
	return out, nil
}

func cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (s *Store) StopSandbox(ctx context.Context, id string, at time.Time, ev *store.AuditEvent) (store.Stop, error) {
	var out store.Stop
	err := s.inTx(ctx, nil, func(t *txn) error {
		sb, err := lockSandbox(ctx, t, id)
		if err != nil {
			return err
		}
		if sb.PendingStopID != "" {
			err := getDoc(ctx, t, &out, "stop", `SELECT doc FROM stops WHERE id = $1 AND pending`, sb.PendingStopID)
			if err == nil {
				if store.StopStillPending(sb, &out, at) {
					return nil // stopping again answers the pending stop
				}
				if _, err := t.Exec(ctx, `UPDATE stops SET pending = false, doc = $2 WHERE id = $1`, out.ID, mustJSON(out)); err != nil {
					return fmt.Errorf("end a superseded stop: %w", err)
				}
			}
		}
		out = store.NewStop(sb, at)
		if _, err := t.Exec(ctx, `INSERT INTO stops (id, account_id, sandbox_id, pending, doc) VALUES ($1, $2, $3, $4, $5)`,
			out.ID, out.AccountID, out.SandboxID, out.Status == store.StopPending, mustJSON(out)); err != nil {
			return fmt.Errorf("write stop: %w", err)
		}
		if err := writeSandbox(ctx, t, sb, false); err != nil {
			return err
		}
		if ev != nil {
			return insertAudit(ctx, t, ev)
		}
		return nil
	})
	if err != nil {
		return store.Stop{}, fmt.Errorf("stop sandbox: %w", err)
	}
	return out, nil
}

func (s *Store) Stop(ctx context.Context, accountID, id string) (store.Stop, error) {
	var st store.Stop
	err := getDoc(ctx, s.pool, &st, "stop "+id, `SELECT doc FROM stops WHERE id = $1 AND account_id = $2`, id, accountID)
	return st, err
}

func (s *Store) FinishStop(ctx context.Context, id, status, errMsg string, at time.Time) error {
	return s.inTx(ctx, nil, func(t *txn) error {
		var st store.Stop
		if err := getDoc(ctx, t, &st, "stop "+id, `SELECT doc FROM stops WHERE id = $1 AND pending FOR UPDATE`, id); err != nil {
			return fmt.Errorf("finish stop: %w", err)
		}
		st.Status, st.Error, st.EndedAt = status, errMsg, &at
		if _, err := t.Exec(ctx, `UPDATE stops SET pending = false, doc = $2 WHERE id = $1`, id, mustJSON(st)); err != nil {
			return fmt.Errorf("finish stop: %w", err)
		}
		var sb store.Sandbox
		err := getDoc(ctx, t, &sb, "sandbox", `SELECT doc FROM sandboxes WHERE id = $1 FOR UPDATE`, st.SandboxID)
		if err != nil || sb.PendingStopID != id {
			return nil
		}
		sb.PendingStopID = ""
		return writeSandbox(ctx, t, &sb, false)
	})
}

func (s *Store) DeleteSandbox(ctx context.Context, id string, at time.Time, ev *store.AuditEvent) error {
	err := s.inTx(ctx, ev, func(t *txn) error {
		sb, err := lockSandbox(ctx, t, id)
		if err != nil {
			return err
		}
		sb.DeletedAt, sb.DesiredState, sb.UpdatedAt = &at, store.StateDeleted, at
		if err := writeSandbox(ctx, t, sb, false); err != nil {
			return err
		}
		if err := deleteIDs(ctx, t, store.KindURLToken, `DELETE FROM url_tokens WHERE url_id IN (SELECT id FROM urls WHERE sandbox_id = $1) RETURNING id`, id); err != nil {
			return err
		}
		if _, err := t.Exec(ctx, `DELETE FROM inbox_deliveries WHERE url_id IN (SELECT id FROM urls WHERE sandbox_id = $1)`, id); err != nil {
			return fmt.Errorf("delete deliveries: %w", err)
		}
		if err := deleteIDs(ctx, t, store.KindURL, `DELETE FROM urls WHERE sandbox_id = $1 RETURNING id`, id); err != nil {
			return err
		}
		if err := deleteHistory(ctx, t, id); err != nil {
			return err
		}
		return deleteIDs(ctx, t, store.KindDesktopLink, `DELETE FROM desktop_links WHERE sandbox_id = $1 RETURNING id`, id)
	})
	if err != nil {
		return fmt.Errorf("delete sandbox: %w", err)
	}
	return nil
}

// deleteIDs runs a DELETE … RETURNING id and publishes each deletion.
func deleteIDs(ctx context.Context, t *txn, kind, q string, args ...any) error {
	rows, err := t.Query(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("delete %s: %w", kind, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("delete %s: %w", kind, err)
	}
	for _, id := range ids {
		t.changed(kind, id, nil)
	}
	return nil
}

func (s *Store) RegisterHost(ctx context.Context, h store.Host) (store.Host, error) {
	err := s.inTx(ctx, nil, func(t *txn) error {
		var old store.Host
		err := getDoc(ctx, t, &old, "host", `SELECT doc FROM hosts WHERE name = $1 FOR UPDATE`, h.Name)
		switch {
		case err == nil:
			h.ID, h.CreatedAt, h.Draining, h.DownAt = old.ID, old.CreatedAt, old.Draining, nil
		case errors.Is(err, store.ErrNotFound):
			if h.ID == "" {
				h.ID = store.NewID("host")
			}
		default:
			return err
		}
		_, err = t.Exec(ctx, `INSERT INTO hosts (id, name, doc) VALUES ($1, $2, $3) ON CONFLICT (id) DO UPDATE SET doc = excluded.doc`, h.ID, h.Name, mustJSON(h))
		return err
	})
	if err != nil {
		return store.Host{}, fmt.Errorf("register host %s: %w", h.Name, err)
	}
	return h, nil
}

func (s *Store) HostSandboxes(ctx context.Context, hostID string) ([]store.Sandbox, error) {
	return docs[store.Sandbox](ctx, s.pool, "sandboxes", `SELECT doc FROM sandboxes WHERE coalesce(doc->>'host_id', '') IN ($1, '') ORDER BY id`, hostID)
}

func (s *Store) PurgeSandbox(ctx context.Context, id string) error {
	return s.inTx(ctx, nil, func(t *txn) error {
		tag, err := t.Exec(ctx, `DELETE FROM sandboxes WHERE id = $1 AND deleted`, id)
		if err != nil {
			return fmt.Errorf("purge sandbox %s: %w", id, err)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("purge sandbox %s: %w", id, store.ErrNotFound)
		}
		t.changed(store.KindSandbox, id, nil)
		return nil
	})
}
