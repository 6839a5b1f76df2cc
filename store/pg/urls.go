package pg

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"froog.tech/froog/store"
)

func (s *Store) PutURL(ctx context.Context, sandboxID string, port int, fn func(*store.URL, *store.AuditEvent) (store.URL, error), ev *store.AuditEvent) (store.URL, error) {
	var out store.URL
	err := s.inTx(ctx, ev, func(t *txn) error {
		// The sandbox row lock serializes every URL write of the sandbox.
		sb, err := lockSandbox(ctx, t, sandboxID)
		if err != nil {
			return err
		}
		var old *store.URL
		var cur store.URL
		err = getDoc(ctx, t, &cur, "url", `SELECT doc FROM urls WHERE sandbox_id = $1 AND port = $2`, sandboxID, port)
		switch {
		case err == nil:
			old = &cur
		case !errors.Is(err, store.ErrNotFound):
			return err
		}
		out, err = store.PutURLIn(ctx, urlTx{t}, sb, port, old, fn, ev)
		return err
	})
	if err != nil {
		return store.URL{}, fmt.Errorf("put url: %w", err)
	}
	return out, nil
}

// urlTx is the persistence of one PutURL.
type urlTx struct{ t *txn }

var _ store.URLTx = urlTx{}

func (x urlTx) CountURLs(ctx context.Context, sandboxID string) (int, error) {
	var n int
	if err := x.t.QueryRow(ctx, `SELECT count(*) FROM urls WHERE sandbox_id = $1`, sandboxID).Scan(&n); err != nil {
		return 0, fmt.Errorf("count urls: %w", err)
	}
	return n, nil
}

// PublicURLPorts reads under the sandbox's row lock, which every URL
// write of the sandbox takes first.
func (x urlTx) PublicURLPorts(ctx context.Context, sandboxID string) ([]int, error) {
	rows, err := x.t.Query(ctx, `SELECT port FROM urls WHERE sandbox_id = $1 AND (doc->>'public')::boolean ORDER BY port`, sandboxID)
	if err != nil {
		return nil, fmt.Errorf("public url ports: %w", err)
	}
	ports, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return nil, fmt.Errorf("public url ports: %w", err)
	}
	return ports, nil
}

// URLNames locks the account row, so concurrent writers count names in
// turn.
func (x urlTx) URLNames(ctx context.Context, accountID, hostname, day string) (store.URLNames, error) {
	var names store.URLNames
	if err := getDoc(ctx, x.t, &names.Account, "account "+accountID, `SELECT doc FROM accounts WHERE id = $1 FOR UPDATE`, accountID); err != nil {
		return names, err
	}
	if err := x.t.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM urls WHERE hostname = $1)`, hostname).Scan(&names.Taken); err != nil {
		return names, fmt.Errorf("check host name: %w", err)
	}
	rows, err := x.t.Query(ctx, `SELECT hostname FROM url_names WHERE day = $1::date AND account_id = $2`, day, accountID)
	if err != nil {
		return names, fmt.Errorf("read url names: %w", err)
	}
	if names.Today, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		return names, fmt.Errorf("read url names: %w", err)
	}
	return names, nil
}

func (x urlTx) WriteURL(ctx context.Context, w store.URLWrite) error {
	t, u := x.t, &w.URL
	if w.NameDay != "" {
		if _, err := t.Exec(ctx, `DELETE FROM url_names WHERE day < $1::date`, w.NameDay); err != nil {
			return fmt.Errorf("forget old url names: %w", err)
		}
	}
	if w.AddName {
		if _, err := t.Exec(ctx, `INSERT INTO url_names (day, account_id, hostname) VALUES ($1::date, $2, $3)`, w.NameDay, u.AccountID, u.Hostname); err != nil {
			return fmt.Errorf("record url name: %w", err)
		}
	}
	if w.DropViews {
		if err := deleteIDs(ctx, t, store.KindURLToken, `DELETE FROM url_tokens WHERE url_id = $1 RETURNING id`, u.ID); err != nil {
			return err
		}
	}
	_, err := t.Exec(ctx, `INSERT INTO urls (id, sandbox_id, port, hostname, doc) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (id) DO UPDATE SET hostname = excluded.hostname, doc = excluded.doc`,
		u.ID, u.SandboxID, u.Port, u.Hostname, mustJSON(u))
	if isUnique(err) {
		return fmt.Errorf("host name %q: %w", u.Hostname, store.ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("write url: %w", err)
	}
	t.changed(store.KindURL, u.ID, u)
	return nil
}

func (s *Store) URLs(ctx context.Context, sandboxID string) ([]store.URL, error) {
	return docs[store.URL](ctx, s.pool, "urls", `SELECT doc FROM urls WHERE sandbox_id = $1 ORDER BY port`, sandboxID)
}

func (s *Store) URL(ctx context.Context, sandboxID string, port int) (store.URL, error) {
	var u store.URL
	err := getDoc(ctx, s.pool, &u, fmt.Sprintf("url for port %d", port), `SELECT doc FROM urls WHERE sandbox_id = $1 AND port = $2`, sandboxID, port)
	return u, err
}

func (s *Store) DeleteURL(ctx context.Context, sandboxID string, port int, ev *store.AuditEvent) error {
	err := s.inTx(ctx, ev, func(t *txn) error {
		var id string
		if err := t.QueryRow(ctx, `DELETE FROM urls WHERE sandbox_id = $1 AND port = $2 RETURNING id`, sandboxID, port).Scan(&id); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("url for port %d: %w", port, store.ErrNotFound)
			}
			return err
		}
		t.changed(store.KindURL, id, nil)
		if _, err := t.Exec(ctx, `DELETE FROM inbox_deliveries WHERE url_id = $1`, id); err != nil {
			return fmt.Errorf("delete deliveries: %w", err)
		}
		return deleteIDs(ctx, t, store.KindURLToken, `DELETE FROM url_tokens WHERE url_id = $1 RETURNING id`, id)
	})
	if err != nil {
		return fmt.Errorf("delete url: %w", err)
	}
	return nil
}

func (s *Store) CreateURLToken(ctx context.Context, tok store.URLToken, ev *store.AuditEvent) (store.URLToken, error) {
	if tok.ID == "" {
		tok.ID = store.NewID("utk")
	}
	err := s.inTx(ctx, ev, func(t *txn) error {
		var u store.URL
		if err := getDoc(ctx, t, &u, "url "+tok.URLID, `SELECT doc FROM urls WHERE id = $1 FOR UPDATE`, tok.URLID); err != nil {
			return err
		}
		all, err := docs[store.URLToken](ctx, t, "url tokens", `SELECT doc FROM url_tokens WHERE url_id = $1`, tok.URLID)
		if err != nil {
			return err
		}
		dead, err := store.CheckURLToken(&u, &tok, all)
		if err != nil {
			return err
		}
		for _, id := range dead {
			if _, err := t.Exec(ctx, `DELETE FROM url_tokens WHERE id = $1`, id); err != nil { // dead tokens go
				return err
			}
			t.changed(store.KindURLToken, id, nil)
		}
		if _, err := t.Exec(ctx, `INSERT INTO url_tokens (id, url_id, doc) VALUES ($1, $2, $3)`, tok.ID, tok.URLID, mustJSON(tok)); err != nil {
			return fmt.Errorf("write url token: %w", err)
		}
		t.changed(store.KindURLToken, tok.ID, &tok)
		return nil
	})
	if err != nil {
		return store.URLToken{}, fmt.Errorf("create url token: %w", err)
	}
	return tok, nil
}

func (s *Store) URLTokens(ctx context.Context, urlID string, now time.Time) ([]store.URLToken, error) {
	all, err := docs[store.URLToken](ctx, s.pool, "url tokens", `SELECT doc FROM url_tokens WHERE url_id = $1`, urlID)
	if err != nil {
		return nil, err
	}
	return store.LiveTokens(all, now), nil
}

func (s *Store) RevokeURLToken(ctx context.Context, urlID, id string, at time.Time, ev *store.AuditEvent) error {
	err := s.inTx(ctx, ev, func(t *txn) error {
		var tok store.URLToken
		if err := getDoc(ctx, t, &tok, "url token "+id, `SELECT doc FROM url_tokens WHERE id = $1 AND url_id = $2 FOR UPDATE`, id, urlID); err != nil {
			return err
		}
		if tok.RevokedAt != nil {
			return fmt.Errorf("url token %s: %w", id, store.ErrNotFound)
		}
		tok.RevokedAt = &at
		if _, err := t.Exec(ctx, `UPDATE url_tokens SET doc = $2 WHERE id = $1`, id, mustJSON(tok)); err != nil {
			return fmt.Errorf("write url token: %w", err)
		}
		t.changed(store.KindURLToken, id, &tok)
		return nil
	})
	if err != nil {
		return fmt.Errorf("revoke url token: %w", err)
	}
	return nil
}

// --- audit and idempotency ---

func (s *Store) Audit(ctx context.Context, accountID string, before int64, limit int) ([]store.AuditEvent, error) {
	if before <= 0 {
		before = 1<<63 - 1
	}
	if limit <= 0 {
		limit = 1 << 30
	}
	rows, err := s.pool.Query(ctx, `SELECT id, doc FROM audit_events WHERE account_id = $1 AND id < $2 ORDER BY id DESC LIMIT $3`, accountID, before, limit)
	if err != nil {
		return nil, fmt.Errorf("read audit log: %w", err)
	}
	defer rows.Close()
	var out []store.AuditEvent
	for rows.Next() {
		var id int64
		var e store.AuditEvent
		if err := rows.Scan(&id, &e); err != nil {
			return nil, fmt.Errorf("read audit log: %w", err)
		}
		e.ID = id
		out = append(out, e)
	}
	return out, rows.Err()
}

func (s *Store) BeginIdempotent(ctx context.Context, rec store.Idempotency) (*store.Idempotency, error) {
	var out *store.Idempotency
	err := s.inTx(ctx, nil, func(t *txn) error {
		if _, err := t.Exec(ctx, `DELETE FROM idempotency_keys WHERE account_id = $1 AND created_at <= $2`, rec.AccountID, rec.CreatedAt.Add(-store.IdempotencyWindow)); err != nil {
			return err
		}
		tag, err := t.Exec(ctx, `INSERT INTO idempotency_keys (account_id, key, created_at, doc) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`,
			rec.AccountID, rec.Key, rec.CreatedAt, mustJSON(rec))
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 1 {
			return nil
		}
		var old store.Idempotency
		if err := getDoc(ctx, t, &old, "idempotency key", `SELECT doc FROM idempotency_keys WHERE account_id = $1 AND key = $2`, rec.AccountID, rec.Key); err != nil {
			return err
		}
		switch {
		case old.RequestHash != rec.RequestHash:
			return store.ErrIdempotencyReused
		case old.Status == 0:
			return store.ErrIdempotencyInUse
		}
		out = &old
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim idempotency key: %w", err)
	}
	return out, nil
}

func (s *Store) FinishIdempotent(ctx context.Context, accountID, key string, status int, body []byte) error {
	err := s.inTx(ctx, nil, func(t *txn) error {
		var rec store.Idempotency
		if err := getDoc(ctx, t, &rec, "idempotency key", `SELECT doc FROM idempotency_keys WHERE account_id = $1 AND key = $2 FOR UPDATE`, accountID, key); err != nil {
			return err
		}
		rec.Status, rec.Body = status, body
		_, err := t.Exec(ctx, `UPDATE idempotency_keys SET doc = $3 WHERE account_id = $1 AND key = $2`, accountID, key, mustJSON(rec))
		return err
	})
	if err != nil {
		return fmt.Errorf("finish idempotency key: %w", err)
	}
	return nil
}

func (s *Store) AbandonIdempotent(ctx context.Context, accountID, key string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM idempotency_keys WHERE account_id = $1 AND key = $2`, accountID, key); err != nil {
		return fmt.Errorf("abandon idempotency key: %w", err)
	}
	return nil
}

// --- certificate storage ---

func (s *Store) KVGet(ctx context.Context, key string) (store.KV, error) {
	kv := store.KV{Key: key}
	err := s.pool.QueryRow(ctx, `SELECT value, modified FROM kv WHERE key = $1`, key).Scan(&kv.Value, &kv.Modified)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.KV{}, fmt.Errorf("kv %s: %w", key, store.ErrNotFound)
	}
	if err != nil {
		return store.KV{}, fmt.Errorf("read kv %s: %w", key, err)
	}
	kv.Modified = kv.Modified.UTC()
	return kv, nil
}

func (s *Store) KVPut(ctx context.Context, key string, value []byte) error {
	if value == nil {
		value = []byte{}
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO kv (key, value, modified) VALUES ($1, $2, now())
		ON CONFLICT (key) DO UPDATE SET value = excluded.value, modified = excluded.modified`, key, value)
	if err != nil {
		return fmt.Errorf("write kv %s: %w", key, err)
	}
	return nil
}

func (s *Store) KVDelete(ctx context.Context, key string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM kv WHERE key = $1 OR starts_with(key, $1 || '/')`, key)
	if err != nil {
		return fmt.Errorf("delete kv %s: %w", key, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("kv %s: %w", key, store.ErrNotFound)
	}
	return nil
}

func (s *Store) KVList(ctx context.Context, prefix string) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT key FROM kv WHERE $1 = '' OR starts_with(key, $1 || '/') ORDER BY key COLLATE "C"`, prefix)
	if err != nil {
		return nil, fmt.Errorf("list kv %s: %w", prefix, err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list kv %s: %w", prefix, err)
	}
	return keys, nil
}

func (s *Store) AcquireLease(ctx context.Context, name, owner string, ttl time.Duration) (bool, error) {
	rows, err := s.pool.Query(ctx, `INSERT INTO leases (name, owner, expires) VALUES ($1, $2, now() + $3 * interval '1 microsecond')
		ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, expires = excluded.expires
		WHERE leases.owner = excluded.owner OR leases.expires <= now()
		RETURNING owner`, name, owner, ttl.Microseconds())
	if err != nil {
		return false, fmt.Errorf("acquire lease %s: %w", name, err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return false, fmt.Errorf("acquire lease %s: %w", name, err)
	}
	return len(got) == 1, nil
}

func (s *Store) ReleaseLease(ctx context.Context, name, owner string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM leases WHERE name = $1 AND owner = $2`, name, owner); err != nil {
		return fmt.Errorf("release lease %s: %w", name, err)
	}
	return nil
}

func (s *Store) AllURLs(ctx context.Context) ([]store.URL, error) {
	return docs[store.URL](ctx, s.pool, "urls", `SELECT doc FROM urls`)
}

func (s *Store) AllSandboxes(ctx context.Context) ([]store.Sandbox, error) {
	return docs[store.Sandbox](ctx, s.pool, "sandboxes", `SELECT doc FROM sandboxes WHERE NOT deleted`)
}

func (s *Store) AllURLTokens(ctx context.Context, now time.Time) ([]store.URLToken, error) {
	all, err := docs[store.URLToken](ctx, s.pool, "url tokens", `SELECT doc FROM url_tokens`)
	if err != nil {
		return nil, err
	}
	return store.LiveTokens(all, now), nil
}

func (s *Store) CreateDesktopLink(ctx context.Context, l store.DesktopLink, ev *store.AuditEvent) (store.DesktopLink, error) {
	if l.ID == "" {
		l.ID = store.NewID("dtl")
	}
	err := s.inTx(ctx, ev, func(t *txn) error {
		if l.SandboxID == "" { // a wall's
			var a store.Account
			if err := getDoc(ctx, t, &a, "account "+l.AccountID, `SELECT doc FROM accounts WHERE id = $1`, l.AccountID); err != nil {
				return err
			}
		} else {
			var sb store.Sandbox
			if err := getDoc(ctx, t, &sb, "sandbox "+l.SandboxID, `SELECT doc FROM sandboxes WHERE id = $1 AND NOT deleted`, l.SandboxID); err != nil {
				return err
			}
		}
		if err := deleteIDs(ctx, t, store.KindDesktopLink, `DELETE FROM desktop_links WHERE sandbox_id = $1 AND coalesce(doc->>'account_id', '') = $2 AND (doc->>'expires_at')::timestamptz <= $3 RETURNING id`, l.SandboxID, l.AccountID, l.CreatedAt); err != nil {
			return err
		}
		if _, err := t.Exec(ctx, `INSERT INTO desktop_links (id, sandbox_id, hash, doc) VALUES ($1, $2, $3, $4)`, l.ID, l.SandboxID, l.Hash, mustJSON(l)); err != nil {
			return err
		}
		t.changed(store.KindDesktopLink, l.ID, &l)
		return nil
	})
	if err != nil {
		return store.DesktopLink{}, fmt.Errorf("create desktop link: %w", err)
	}
	return l, nil
}

func (s *Store) DesktopLink(ctx context.Context, hash string) (store.DesktopLink, error) {
	var l store.DesktopLink
	err := getDoc(ctx, s.pool, &l, "desktop link", `SELECT doc FROM desktop_links WHERE hash = $1`, hash)
	return l, err
}

func (s *Store) LockDesktopLinkViewOnly(ctx context.Context, hash string) (store.DesktopLink, error) {
	var l store.DesktopLink
	err := s.inTx(ctx, nil, func(t *txn) error {
		if err := getDoc(ctx, t, &l, "desktop link", `SELECT doc FROM desktop_links WHERE hash = $1 FOR UPDATE`, hash); err != nil {
			return err
		}
		if l.ViewOnly {
			return nil
		}
		l.ViewOnly = true
		if _, err := t.Exec(ctx, `UPDATE desktop_links SET doc = $2 WHERE hash = $1`, hash, mustJSON(l)); err != nil {
			return err
		}
		t.changed(store.KindDesktopLink, l.ID, &l)
		return nil
	})
	if err != nil {
		return store.DesktopLink{}, fmt.Errorf("lock desktop link view-only: %w", err)
	}
	return l, nil
}
