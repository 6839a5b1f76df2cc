package embedded

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"froog.tech/froog/store"
)

// webhookEvents are the outbox records a commit of recs (with ev) adds:
// the events of every sandbox it writes (store.SandboxEvents, against
// the sandbox as it is before the commit), queued for the endpoints that
// want them. s.mu must be held.
func (s *Store) webhookEvents(recs []record, ev *store.AuditEvent) []record {
	if len(s.webhooks) == 0 {
		return nil // no endpoint wants anything: the common case costs nothing
	}
	last := map[string]*store.Sandbox{}
	var order []string
	for _, r := range recs {
		if r.T != tSandbox || r.Del {
			continue
		}
		if _, ok := last[r.ID]; !ok {
			order = append(order, r.ID)
		}
		last[r.ID] = r.val.(*store.Sandbox)
	}
	var out []record
	for _, id := range order {
		sb := last[id]
		events := store.SandboxEvents(s.sandboxes[id], sb, ev)
		if len(events) == 0 {
			continue
		}
		for _, d := range store.FanOut(events, s.accountWebhooks(sb.AccountID)) {
			out = append(out, put(tWhDeliv, d.ID, clone(&d)))
		}
	}
	return out
}

// accountWebhooks lists an account's endpoints, oldest first (copies).
func (s *Store) accountWebhooks(accountID string) []store.Webhook {
	var out []store.Webhook
	for _, w := range s.webhooks {
		if w.AccountID == accountID {
			out = append(out, *clone(w))
		}
	}
	slices.SortFunc(out, func(a, b store.Webhook) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

func (s *Store) CreateWebhook(ctx context.Context, w store.Webhook, ev *store.AuditEvent) (store.Webhook, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.accounts[w.AccountID]; !ok {
		return store.Webhook{}, fmt.Errorf("create webhook: account %s: %w", w.AccountID, store.ErrNotFound)
	}
	if w.ID == "" {
		w.ID = store.NewID("wh")
	}
	if _, ok := s.webhooks[w.ID]; ok {
		return store.Webhook{}, fmt.Errorf("create webhook %s: %w", w.ID, store.ErrConflict)
	}
	if err := store.CheckWebhooks(len(s.accountWebhooks(w.AccountID))); err != nil {
		return store.Webhook{}, fmt.Errorf("create webhook: %w", err)
	}
	w.CreatedAt, w.UpdatedAt = store.Micro(w.CreatedAt), store.Micro(w.UpdatedAt)
	if err := s.commit([]record{put(tWebhook, w.ID, clone(&w))}, ev); err != nil {
		return store.Webhook{}, err
	}
	return w, nil
}

func (s *Store) ListWebhooks(ctx context.Context, accountID string) ([]store.Webhook, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.accountWebhooks(accountID), nil
}

func (s *Store) webhook(accountID, id string) (*store.Webhook, error) {
	w, ok := s.webhooks[id]
	if !ok || w.AccountID != accountID {
		return nil, fmt.Errorf("webhook %s: %w", id, store.ErrNotFound)
	}
	return w, nil
}

func (s *Store) Webhook(ctx context.Context, accountID, id string) (store.Webhook, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, err := s.webhook(accountID, id)
	if err != nil {
		return store.Webhook{}, err
	}
	return *clone(w), nil
}

// dropQueued lists the records that remove the endpoint's queued
// deliveries.
func (s *Store) dropQueued(webhookID string) []record {
	var recs []record
	for id, d := range s.whDeliv {
		if d.WebhookID == webhookID {
			recs = append(recs, del(tWhDeliv, id))
		}
	}
	return recs
}

func (s *Store) UpdateWebhook(ctx context.Context, accountID, id string, fn func(*store.Webhook, *store.AuditEvent) error, ev *store.AuditEvent) (store.Webhook, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, err := s.webhook(accountID, id)
	if err != nil {
		return store.Webhook{}, fmt.Errorf("update webhook: %w", err)
	}
	w := clone(old)
	if err := fn(w, ev); err != nil {
		return store.Webhook{}, fmt.Errorf("update webhook: %w", err)
	}
	w.ID, w.AccountID, w.CreatedAt, w.UpdatedAt = old.ID, old.AccountID, old.CreatedAt, store.Micro(w.UpdatedAt)
	recs := []record{put(tWebhook, w.ID, clone(w))}
	if !w.Enabled {
		recs = append(recs, s.dropQueued(id)...)
	}
	if err := s.commit(recs, ev); err != nil {
		return store.Webhook{}, err
	}
	return *w, nil
}

func (s *Store) DeleteWebhook(ctx context.Context, accountID, id string, ev *store.AuditEvent) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.webhook(accountID, id); err != nil {
		return fmt.Errorf("delete webhook: %w", err)
	}
	recs := append([]record{del(tWebhook, id)}, s.dropQueued(id)...)
	for aid, a := range s.whAttempts {
		if a.WebhookID == id {
			recs = append(recs, del(tWhTry, aid))
		}
	}
	return s.commit(recs, ev)
}

func (s *Store) WebhookAttempts(ctx context.Context, accountID, webhookID string, since time.Time, limit int) ([]store.WebhookAttempt, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.webhook(accountID, webhookID); err != nil {
		return nil, fmt.Errorf("webhook attempts: %w", err)
	}
	var out []store.WebhookAttempt
	for _, a := range s.whAttempts {
		if a.WebhookID == webhookID && a.CreatedAt.After(since) {
			out = append(out, *clone(a))
		}
	}
	slices.SortFunc(out, func(a, b store.WebhookAttempt) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// logAttempt lists the records that log a and drop the endpoint's
// entries past store.WebhookLogKept.
func (s *Store) logAttempt(a *store.WebhookAttempt) []record {
	recs := []record{put(tWhTry, a.ID, clone(a))}
	for id, o := range s.whAttempts {
		if o.WebhookID == a.WebhookID && a.CreatedAt.Sub(o.CreatedAt) > store.WebhookLogKept {
			recs = append(recs, del(tWhTry, id))
		}
	}
	return recs
}

func (s *Store) AddWebhookAttempt(ctx context.Context, a store.WebhookAttempt) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.webhook(a.AccountID, a.WebhookID); err != nil {
		return fmt.Errorf("log webhook attempt: %w", err)
	}
	if a.ID == "" {
		a.ID = store.NewID("wha")
	}
	a.CreatedAt = store.Micro(a.CreatedAt)
	return s.commit(s.logAttempt(&a), nil)
}

func (s *Store) ClaimWebhookDeliveries(ctx context.Context, owner string, at time.Time, lease time.Duration, limit int) ([]store.WebhookDelivery, time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var due []*store.WebhookDelivery
	var next time.Time
	for _, d := range s.whDeliv {
		if t := d.DueAt(); t.After(at) {
			if next.IsZero() || t.Before(next) {
				next = t
			}
			continue
		}
		due = append(due, d)
	}
	slices.SortFunc(due, func(a, b *store.WebhookDelivery) int {
		if c := a.DueAt().Compare(b.DueAt()); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	if len(due) > limit {
		due = due[:limit]
	}
	var out []store.WebhookDelivery
	var recs []record
	for _, d := range due {
		c := clone(d)
		store.ClaimWebhook(c, owner, at, lease)
		recs = append(recs, put(tWhDeliv, c.ID, clone(c)))
		out = append(out, *c)
	}
	if len(recs) > 0 {
		if err := s.commit(recs, nil); err != nil {
			return nil, time.Time{}, err
		}
	}
	return out, next, nil
}

func (s *Store) FinishWebhookDelivery(ctx context.Context, id, owner string, r store.WebhookResult) (store.WebhookAttempt, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.whDeliv[id]
	if !ok {
		return store.WebhookAttempt{}, fmt.Errorf("finish webhook delivery %s: gone (endpoint paused or deleted): %w", id, store.ErrConflict)
	}
	d := clone(old)
	a, done, err := store.FinishWebhookClaim(d, owner, r)
	if err != nil {
		return store.WebhookAttempt{}, err
	}
	recs := s.logAttempt(&a)
	if done {
		recs = append(recs, del(tWhDeliv, id))
	} else {
		recs = append(recs, put(tWhDeliv, id, d))
	}
	if err := s.commit(recs, nil); err != nil {
		return store.WebhookAttempt{}, err
	}
	return a, nil
}
