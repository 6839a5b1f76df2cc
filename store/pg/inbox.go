package pg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"froog.tech/froog/store"
)

// writeDelivery updates d's state (its body is written once, at insert).
func writeDelivery(ctx context.Context, t *txn, d *store.Delivery) error {
	row := *d
	row.Body = nil
	_, err := t.Exec(ctx, `UPDATE inbox_deliveries SET seq = $2, queued = $3, due_at = $4, doc = $5 WHERE id = $1`,
		d.ID, d.Seq, d.Queued(), d.DueAt(), mustJSON(&row))
	return err
}

func (s *Store) AddDelivery(ctx context.Context, d store.Delivery) (store.Delivery, error) {
	err := s.inTx(ctx, nil, func(t *txn) error {
		// The account's row, locked first (as PutURL takes it before the
		// URL's): the account's adds, on any of its URLs, count what it
		// has queued in turn. NO KEY: rows that refer to the account
		// (a sandbox created meanwhile) are not held up.
		if _, err := t.Exec(ctx, `SELECT 1 FROM accounts WHERE id = $1 FOR NO KEY UPDATE`, d.AccountID); err != nil {
			return err
		}
		// The URL's row, locked: a deleted URL takes none.
		var n int
		if err := t.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM urls WHERE id = $1 FOR UPDATE) u`, d.URLID).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("url %s: %w", d.URLID, store.ErrNotFound)
		}
		var nURL, nAccount int
		if err := t.QueryRow(ctx, `SELECT count(*) FILTER (WHERE url_id = $1), count(*) FROM inbox_deliveries WHERE account_id = $2 AND queued`,
			d.URLID, d.AccountID).Scan(&nURL, &nAccount); err != nil {
			return err
		}
		if err := store.CheckDelivery(&d, nURL, nAccount); err != nil {
			return err
		}
		var seq int64
		if err := t.QueryRow(ctx, `SELECT nextval('inbox_seq')`).Scan(&seq); err != nil {
			return err
		}
		store.NewDelivery(&d, seq)
		row := d
		row.Body = nil
		body := d.Body
		if body == nil {
			body = []byte{}
		}
		_, err := t.Exec(ctx, `INSERT INTO inbox_deliveries (id, url_id, account_id, seq, queued, due_at, received_at, size, doc, body)
			VALUES ($1, $2, $3, $4, true, $5, $6, $7, $8, $9)`, d.ID, d.URLID, d.AccountID, seq, d.DueAt(), d.ReceivedAt, d.Size, mustJSON(&row), body)
		if isUnique(err) {
			return fmt.Errorf("delivery %s: %w", d.ID, store.ErrConflict)
		}
		if err != nil {
			return err
		}
		// store.Retention, in SQL: the newest finished ones kept.
		_, err = t.Exec(ctx, `DELETE FROM inbox_deliveries WHERE id IN (
			SELECT id FROM (SELECT id, received_at,
				row_number() OVER (ORDER BY seq DESC) AS n, sum(size) OVER (ORDER BY seq DESC) AS b
				FROM inbox_deliveries WHERE url_id = $1 AND NOT queued) x
			WHERE n > $2 OR b > $3 OR received_at < $4)`,
			d.URLID, store.DeliveriesKept, store.DeliveryBytesKept, d.ReceivedAt.Add(-store.DeliveriesKeptFor))
		return err
	})
	if err != nil {
		return store.Delivery{}, fmt.Errorf("add delivery: %w", err)
	}
	return d, nil
}

func (s *Store) DueInboxes(ctx context.Context, at time.Time) ([]string, time.Time, error) {
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT ON (url_id) url_id, due_at FROM inbox_deliveries WHERE queued ORDER BY url_id, seq`)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("due inboxes: %w", err)
	}
	defer rows.Close()
	var due []string
	var next time.Time
	for rows.Next() {
		var id string
		var t time.Time
		if err := rows.Scan(&id, &t); err != nil {
			return nil, time.Time{}, fmt.Errorf("due inboxes: %w", err)
		}
		switch {
		case !t.After(at):
			due = append(due, id)
		case next.IsZero() || t.Before(next):
			next = t
		}
	}
	if err := rows.Err(); err != nil {
		return nil, time.Time{}, fmt.Errorf("due inboxes: %w", err)
	}
	return due, next, nil
}

// readDelivery reads one delivery, locked for update, its body included
// when body is set.
func readDelivery(ctx context.Context, t *txn, where string, body bool, args ...any) (store.Delivery, error) {
	var d store.Delivery
	var doc, b []byte
	cols := `doc, NULL::bytea`
	if body {
		cols = `doc, body`
	}
	err := t.QueryRow(ctx, `SELECT `+cols+` FROM inbox_deliveries WHERE `+where+` FOR UPDATE`, args...).Scan(&doc, &b)
	if errors.Is(err, pgx.ErrNoRows) {
		return d, store.ErrNotFound
	}
	if err != nil {
		return d, err
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		return d, err
	}
	d.Body = b
	return d, nil
}

func (s *Store) ClaimDelivery(ctx context.Context, urlID, owner string, at time.Time, lease time.Duration) (store.Delivery, error) {
	var d store.Delivery
	err := s.inTx(ctx, nil, func(t *txn) error {
		var err error
		d, err = readDelivery(ctx, t, `url_id = $1 AND queued ORDER BY seq LIMIT 1`, true, urlID)
		if err != nil {
			return err
		}
		if !store.ClaimHead(&d, owner, at, lease) {
			return store.ErrNotFound
		}
		return writeDelivery(ctx, t, &d)
	})
	if err != nil {
		return store.Delivery{}, fmt.Errorf("claim delivery of url %s: %w", urlID, err)
	}
	return d, nil
}

func (s *Store) FinishDelivery(ctx context.Context, id, owner string, r store.DeliveryResult) (store.Delivery, error) {
	var d store.Delivery
	err := s.inTx(ctx, nil, func(t *txn) error {
		var err error
		if d, err = readDelivery(ctx, t, `id = $1`, false, id); err != nil {
			return err
		}
		if err := store.FinishClaim(&d, owner, r); err != nil {
			return err
		}
		return writeDelivery(ctx, t, &d)
	})
	if err != nil {
		return store.Delivery{}, fmt.Errorf("finish delivery %s: %w", id, err)
	}
	return d, nil
}

func (s *Store) Deliveries(ctx context.Context, urlID string, limit int) ([]store.Delivery, error) {
	q := `SELECT doc FROM inbox_deliveries WHERE url_id = $1 ORDER BY seq DESC`
	if limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", limit)
	}
	return docs[store.Delivery](ctx, s.pool, "deliveries", q, urlID)
}

func (s *Store) Delivery(ctx context.Context, urlID, id string) (store.Delivery, error) {
	var d store.Delivery
	var doc []byte
	err := s.pool.QueryRow(ctx, `SELECT doc, body FROM inbox_deliveries WHERE id = $1 AND url_id = $2`, id, urlID).Scan(&doc, &d.Body)
	if errors.Is(err, pgx.ErrNoRows) {
		return d, fmt.Errorf("delivery %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return d, fmt.Errorf("read delivery %s: %w", id, err)
	}
	body := d.Body
	if err := json.Unmarshal(doc, &d); err != nil {
		return d, err
	}
	d.Body = body
	return d, nil
}

func (s *Store) Redeliver(ctx context.Context, urlID, id string, at time.Time, ev *store.AuditEvent) (store.Delivery, error) {
	var d store.Delivery
	err := s.inTx(ctx, ev, func(t *txn) error {
		var err error
		if d, err = readDelivery(ctx, t, `id = $1 AND url_id = $2`, false, id, urlID); err != nil {
			return err
		}
		var seq int64
		if err := t.QueryRow(ctx, `SELECT nextval('inbox_seq')`).Scan(&seq); err != nil {
			return err
		}
		if err := store.RequeueDelivery(&d, seq, at); err != nil {
			return err
		}
		if err := writeDelivery(ctx, t, &d); err != nil {
			return err
		}
		// Every edge's listener wakes at commit (InboxChanged).
		_, err = t.Exec(ctx, `SELECT pg_notify($1, 'inbox')`, s.opts.channel())
		return err
	})
	if err != nil {
		return store.Delivery{}, fmt.Errorf("redeliver %s: %w", id, err)
	}
	return d, nil
}

// InboxChanged closes at every notification on the store's channel: the
// feed's commits and Redeliver's.
func (s *Store) InboxChanged() <-chan struct{} { return s.Changed() }

func (s *Store) PurgeDeliveries(ctx context.Context, urlID string, ev *store.AuditEvent) (int, error) {
	var n int64
	err := s.inTx(ctx, ev, func(t *txn) error {
		tag, err := t.Exec(ctx, `DELETE FROM inbox_deliveries WHERE url_id = $1`, urlID)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("purge deliveries: %w", err)
	}
	return int(n), nil
}
