package pg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"froog.tech/froog/store"
)

// sandboxWrite is one sandbox a transaction wrote: as it was before the
// transaction (nil: new) and as it is now.
type sandboxWrite struct {
	old, sb *store.Sandbox
}

// wroteSandbox records a sandbox write (its documents before and after)
// for queueWebhookEvents: the first write of a sandbox in the
// transaction gives its old row, the last its new one.
func (t *txn) wroteSandbox(oldDoc, doc []byte) error {
	var sb store.Sandbox
	if err := json.Unmarshal(doc, &sb); err != nil {
		return err
	}
	for i := range t.sandboxes {
		if t.sandboxes[i].sb.ID == sb.ID {
			t.sandboxes[i].sb = &sb
			return nil
		}
	}
	w := sandboxWrite{sb: &sb}
	if oldDoc != nil {
		w.old = new(store.Sandbox)
		if err := json.Unmarshal(oldDoc, w.old); err != nil {
			return err
		}
	}
	t.sandboxes = append(t.sandboxes, w)
	return nil
}

// queueWebhookEvents queues, in t, the webhook events of the sandboxes t
// wrote (store.SandboxEvents) for the endpoints that want them.
func queueWebhookEvents(ctx context.Context, t *txn, ev *store.AuditEvent) error {
	hooks := map[string][]store.Webhook{}
	for _, w := range t.sandboxes {
		events := store.SandboxEvents(w.old, w.sb, ev)
		if len(events) == 0 {
			continue
		}
		list, ok := hooks[w.sb.AccountID]
		if !ok {
			var err error
			if list, err = docs[store.Webhook](ctx, t, "webhooks", `SELECT doc FROM webhooks WHERE account_id = $1 ORDER BY created_at, id FOR SHARE`, w.sb.AccountID); err != nil {
				return err
			}
			hooks[w.sb.AccountID] = list
		}
		for _, d := range store.FanOut(events, list) {
			if err := insertWebhookDelivery(ctx, t, &d); err != nil {
				return err
			}
		}
	}
	return nil
}

func insertWebhookDelivery(ctx context.Context, t *txn, d *store.WebhookDelivery) error {
	_, err := t.Exec(ctx, `INSERT INTO webhook_deliveries (id, webhook_id, account_id, due_at, doc) VALUES ($1, $2, $3, $4, $5)`,
		d.ID, d.WebhookID, d.AccountID, d.DueAt(), mustJSON(d))
	if err != nil {
		return fmt.Errorf("queue webhook event: %w", err)
	}
	return nil
}

func (s *Store) CreateWebhook(ctx context.Context, w store.Webhook, ev *store.AuditEvent) (store.Webhook, error) {
	if w.ID == "" {
		w.ID = store.NewID("wh")
	}
	w.CreatedAt, w.UpdatedAt = store.Micro(w.CreatedAt), store.Micro(w.UpdatedAt)
	err := s.inTx(ctx, ev, func(t *txn) error {
		// The account's row serializes creates, so the limit holds.
		var a store.Account
		if err := getDoc(ctx, t, &a, "account "+w.AccountID, `SELECT doc FROM accounts WHERE id = $1 FOR UPDATE`, w.AccountID); err != nil {
			return err
		}
		var n int
		if err := t.QueryRow(ctx, `SELECT count(*) FROM webhooks WHERE account_id = $1`, w.AccountID).Scan(&n); err != nil {
			return err
		}
		if err := store.CheckWebhooks(n); err != nil {
			return err
		}
		_, err := t.Exec(ctx, `INSERT INTO webhooks (id, account_id, created_at, doc) VALUES ($1, $2, $3, $4)`, w.ID, w.AccountID, w.CreatedAt, mustJSON(w))
		if isUnique(err) {
			return store.ErrConflict
		}
		return err
	})
	if err != nil {
		return store.Webhook{}, fmt.Errorf("create webhook: %w", err)
	}
	return w, nil
}

func (s *Store) ListWebhooks(ctx context.Context, accountID string) ([]store.Webhook, error) {
	return docs[store.Webhook](ctx, s.pool, "webhooks", `SELECT doc FROM webhooks WHERE account_id = $1 ORDER BY created_at, id`, accountID)
}

func (s *Store) Webhook(ctx context.Context, accountID, id string) (store.Webhook, error) {
	var w store.Webhook
	err := getDoc(ctx, s.pool, &w, "webhook "+id, `SELECT doc FROM webhooks WHERE id = $1 AND account_id = $2`, id, accountID)
	return w, err
}

func (s *Store) UpdateWebhook(ctx context.Context, accountID, id string, fn func(*store.Webhook, *store.AuditEvent) error, ev *store.AuditEvent) (store.Webhook, error) {
	var out store.Webhook
	err := s.inTx(ctx, ev, func(t *txn) error {
		var old store.Webhook
		if err := getDoc(ctx, t, &old, "webhook "+id, `SELECT doc FROM webhooks WHERE id = $1 AND account_id = $2 FOR UPDATE`, id, accountID); err != nil {
			return err
		}
		w := old
		w.Events = append([]string(nil), old.Events...)
		if err := fn(&w, ev); err != nil {
			return err
		}
		w.ID, w.AccountID, w.CreatedAt, w.UpdatedAt = old.ID, old.AccountID, old.CreatedAt, store.Micro(w.UpdatedAt)
		if _, err := t.Exec(ctx, `UPDATE webhooks SET doc = $2 WHERE id = $1`, id, mustJSON(w)); err != nil {
			return err
		}
		if !w.Enabled {
			if _, err := t.Exec(ctx, `DELETE FROM webhook_deliveries WHERE webhook_id = $1`, id); err != nil {
				return fmt.Errorf("drop a paused endpoint's deliveries: %w", err)
			}
		}
		out = w
		return nil
	})
	if err != nil {
		return store.Webhook{}, fmt.Errorf("update webhook: %w", err)
	}
	return out, nil
}

func (s *Store) DeleteWebhook(ctx context.Context, accountID, id string, ev *store.AuditEvent) error {
	err := s.inTx(ctx, ev, func(t *txn) error {
		tag, err := t.Exec(ctx, `DELETE FROM webhooks WHERE id = $1 AND account_id = $2`, id, accountID)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("webhook %s: %w", id, store.ErrNotFound)
		}
		if _, err := t.Exec(ctx, `DELETE FROM webhook_deliveries WHERE webhook_id = $1`, id); err != nil {
			return err
		}
		_, err = t.Exec(ctx, `DELETE FROM webhook_attempts WHERE webhook_id = $1`, id)
		return err
	})
	if err != nil {
		return fmt.Errorf("delete webhook: %w", err)
	}
	return nil
}

func (s *Store) WebhookAttempts(ctx context.Context, accountID, webhookID string, since time.Time, limit int) ([]store.WebhookAttempt, error) {
	if _, err := s.Webhook(ctx, accountID, webhookID); err != nil {
		return nil, fmt.Errorf("webhook attempts: %w", err)
	}
	q := `SELECT doc FROM webhook_attempts WHERE webhook_id = $1 AND created_at > $2 ORDER BY created_at DESC, id DESC`
	args := []any{webhookID, since}
	if limit > 0 {
		q += ` LIMIT $3`
		args = append(args, limit)
	}
	return docs[store.WebhookAttempt](ctx, s.pool, "webhook attempts", q, args...)
}

// logAttempt logs a and drops the endpoint's entries past
// store.WebhookLogKept.
func logAttempt(ctx context.Context, t *txn, a *store.WebhookAttempt) error {
	if _, err := t.Exec(ctx, `INSERT INTO webhook_attempts (id, webhook_id, account_id, created_at, doc) VALUES ($1, $2, $3, $4, $5)`,
		a.ID, a.WebhookID, a.AccountID, a.CreatedAt, mustJSON(a)); err != nil {
		return fmt.Errorf("log webhook attempt: %w", err)
	}
	if _, err := t.Exec(ctx, `DELETE FROM webhook_attempts WHERE webhook_id = $1 AND created_at < $2`, a.WebhookID, a.CreatedAt.Add(-store.WebhookLogKept)); err != nil {
		return fmt.Errorf("prune webhook log: %w", err)
	}
	return nil
}

func (s *Store) AddWebhookAttempt(ctx context.Context, a store.WebhookAttempt) error {
	if a.ID == "" {
		a.ID = store.NewID("wha")
	}
	a.CreatedAt = store.Micro(a.CreatedAt)
	return s.inTx(ctx, nil, func(t *txn) error {
		var w store.Webhook
		if err := getDoc(ctx, t, &w, "webhook "+a.WebhookID, `SELECT doc FROM webhooks WHERE id = $1 AND account_id = $2 FOR SHARE`, a.WebhookID, a.AccountID); err != nil {
			return fmt.Errorf("log webhook attempt: %w", err)
		}
		return logAttempt(ctx, t, &a)
	})
}

func (s *Store) ClaimWebhookDeliveries(ctx context.Context, owner string, at time.Time, lease time.Duration, limit int) ([]store.WebhookDelivery, time.Time, error) {
	var out []store.WebhookDelivery
	var next time.Time
	err := s.inTx(ctx, nil, func(t *txn) error {
		out, next = nil, time.Time{}
		// SKIP LOCKED: another sender's claim in flight is its own.
		list, err := docs[store.WebhookDelivery](ctx, t, "webhook deliveries",
			`SELECT doc FROM webhook_deliveries WHERE due_at <= $1 ORDER BY due_at, id LIMIT $2 FOR UPDATE SKIP LOCKED`, at, limit)
		if err != nil {
			return err
		}
		for i := range list {
			d := &list[i]
			if !store.ClaimWebhook(d, owner, at, lease) {
				continue
			}
			if _, err := t.Exec(ctx, `UPDATE webhook_deliveries SET due_at = $2, doc = $3 WHERE id = $1`, d.ID, d.DueAt(), mustJSON(d)); err != nil {
				return fmt.Errorf("claim webhook delivery: %w", err)
			}
			out = append(out, *d)
		}
		var min *time.Time
		if err := t.QueryRow(ctx, `SELECT min(due_at) FROM webhook_deliveries WHERE due_at > $1`, at).Scan(&min); err != nil {
			return err
		}
		if min != nil {
			next = min.UTC()
		}
		return nil
	})
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("claim webhook deliveries: %w", err)
	}
	return out, next, nil
}

func (s *Store) FinishWebhookDelivery(ctx context.Context, id, owner string, r store.WebhookResult) (store.WebhookAttempt, error) {
	var out store.WebhookAttempt
	err := s.inTx(ctx, nil, func(t *txn) error {
		var d store.WebhookDelivery
		err := getDoc(ctx, t, &d, "webhook delivery "+id, `SELECT doc FROM webhook_deliveries WHERE id = $1 FOR UPDATE`, id)
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("webhook delivery %s is gone (endpoint paused or deleted): %w", id, store.ErrConflict)
		}
		if err != nil {
			return err
		}
		a, done, err := store.FinishWebhookClaim(&d, owner, r)
		if err != nil {
			return err
		}
		if err := logAttempt(ctx, t, &a); err != nil {
			return err
		}
		if done {
			_, err = t.Exec(ctx, `DELETE FROM webhook_deliveries WHERE id = $1`, id)
		} else {
			_, err = t.Exec(ctx, `UPDATE webhook_deliveries SET due_at = $2, doc = $3 WHERE id = $1`, id, d.DueAt(), mustJSON(d))
		}
		out = a
		return err
	})
	if err != nil {
		return store.WebhookAttempt{}, fmt.Errorf("finish webhook delivery: %w", err)
	}
	return out, nil
}
