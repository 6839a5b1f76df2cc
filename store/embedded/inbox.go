package embedded

import (
	"context"
	"fmt"
	"slices"
	"time"

	"froog.tech/froog/store"
)

// deliveryBody is a delivery's body, a row of its own: written once, when
// the request arrives, while the delivery's state changes at every
// attempt.
type deliveryBody struct {
	B []byte `json:"b"`
}

// indexDelivery keeps the deliveries' indexes as r is applied: byURL,
// each URL's deliveries, and queued, how many each account has queued.
// An add, a claim or a listing then reads its URL's deliveries alone,
// not every account's (10,000 may wait in one).
func (s *Store) indexDelivery(r record) {
	if old := s.deliveries[r.ID]; old != nil {
		delete(s.byURL[old.URLID], r.ID)
		if len(s.byURL[old.URLID]) == 0 {
			delete(s.byURL, old.URLID)
		}
		if old.Queued() {
			if s.queued[old.AccountID]--; s.queued[old.AccountID] == 0 {
				delete(s.queued, old.AccountID)
			}
		}
	}
	if r.Del {
		return
	}
	d := r.val.(*store.Delivery)
	if s.byURL[d.URLID] == nil {
		s.byURL[d.URLID] = map[string]*store.Delivery{}
	}
	s.byURL[d.URLID][r.ID] = d
	if d.Queued() {
		s.queued[d.AccountID]++
	}
}

// queue is the URL's deliveries, copies without bodies.
func (s *Store) queue(urlID string) []store.Delivery {
	out := make([]store.Delivery, 0, len(s.byURL[urlID]))
	for _, d := range s.byURL[urlID] {
		out = append(out, *d)
	}
	return out
}

func (s *Store) AddDelivery(ctx context.Context, d store.Delivery) (store.Delivery, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.urls[d.URLID]; !ok {
		return store.Delivery{}, fmt.Errorf("add delivery: url %s: %w", d.URLID, store.ErrNotFound)
	}
	// Only the finished ones are copied: Retention looks at no others.
	nURL := 0
	var done []store.Delivery
	for _, o := range s.byURL[d.URLID] {
		if o.Queued() {
			nURL++
		} else {
			done = append(done, *o)
		}
	}
	if err := store.CheckDelivery(&d, nURL, s.queued[d.AccountID]); err != nil {
		return store.Delivery{}, err
	}
	if _, ok := s.deliveries[d.ID]; ok {
		return store.Delivery{}, fmt.Errorf("add delivery %s: %w", d.ID, store.ErrConflict)
	}
	m := s.meta
	m.InboxSeq++
	store.NewDelivery(&d, m.InboxSeq)
	row := d
	row.Body = nil
	recs := []record{put(tDelivery, d.ID, &row), put(tBody, d.ID, &deliveryBody{B: d.Body}), metaRecord(m)}
	for _, id := range store.Retention(done, d.ReceivedAt) {
		recs = append(recs, del(tDelivery, id), del(tBody, id))
	}
	if err := s.commit(recs, nil); err != nil {
		return store.Delivery{}, err
	}
	return d, nil
}

func (s *Store) DueInboxes(ctx context.Context, at time.Time) ([]string, time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	heads := map[string]*store.Delivery{}
	for _, d := range s.deliveries {
		if h := heads[d.URLID]; d.Queued() && (h == nil || d.Seq < h.Seq) {
			heads[d.URLID] = d
		}
	}
	var due []string
	var next time.Time
	for id, h := range heads {
		switch t := h.DueAt(); {
		case !t.After(at):
			due = append(due, id)
		case next.IsZero() || t.Before(next):
			next = t
		}
	}
	slices.Sort(due)
	return due, next, nil
}

func (s *Store) ClaimDelivery(ctx context.Context, urlID, owner string, at time.Time, lease time.Duration) (store.Delivery, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	list := s.queue(urlID)
	h := store.Head(list)
	if !store.ClaimHead(h, owner, at, lease) {
		return store.Delivery{}, fmt.Errorf("claim delivery of url %s: none due: %w", urlID, store.ErrNotFound)
	}
	if err := s.commit([]record{put(tDelivery, h.ID, clone(h))}, nil); err != nil {
		return store.Delivery{}, err
	}
	out := *h
	if b := s.bodies[h.ID]; b != nil {
		out.Body = slices.Clone(b.B)
	}
	return out, nil
}

func (s *Store) FinishDelivery(ctx context.Context, id, owner string, r store.DeliveryResult) (store.Delivery, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.deliveries[id]
	if !ok {
		return store.Delivery{}, fmt.Errorf("finish delivery %s: %w", id, store.ErrNotFound)
	}
	d := clone(old)
	if err := store.FinishClaim(d, owner, r); err != nil {
		return store.Delivery{}, err
	}
	if err := s.commit([]record{put(tDelivery, id, d)}, nil); err != nil {
		return store.Delivery{}, err
	}
	return *clone(d), nil
}

func (s *Store) Deliveries(ctx context.Context, urlID string, limit int) ([]store.Delivery, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	list := s.queue(urlID)
	slices.SortFunc(list, func(a, b store.Delivery) int { return int(b.Seq - a.Seq) })
	if limit > 0 && len(list) > limit {
		list = list[:limit]
	}
	for i := range list {
		list[i].Headers = slices.Clone(list[i].Headers)
	}
	return list, nil
}

func (s *Store) Delivery(ctx context.Context, urlID, id string) (store.Delivery, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.deliveries[id]
	if !ok || d.URLID != urlID {
		return store.Delivery{}, fmt.Errorf("delivery %s: %w", id, store.ErrNotFound)
	}
	out := *clone(d)
	if b := s.bodies[id]; b != nil {
		out.Body = slices.Clone(b.B)
	}
	return out, nil
}

func (s *Store) Redeliver(ctx context.Context, urlID, id string, at time.Time, ev *store.AuditEvent) (store.Delivery, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.deliveries[id]
	if !ok || old.URLID != urlID {
		return store.Delivery{}, fmt.Errorf("redeliver %s: %w", id, store.ErrNotFound)
	}
	d := clone(old)
	m := s.meta
	m.InboxSeq++
	if err := store.RequeueDelivery(d, m.InboxSeq, at); err != nil {
		return store.Delivery{}, err
	}
	if err := s.commit([]record{put(tDelivery, id, d), metaRecord(m)}, ev); err != nil {
		return store.Delivery{}, err
	}
	s.signal.Wake()
	return *clone(d), nil
}

// InboxChanged is the store's one signal: Redeliver wakes it too, though
// it publishes nothing on the feed.
func (s *Store) InboxChanged() <-chan struct{} { return s.signal.Changed() }

func (s *Store) PurgeDeliveries(ctx context.Context, urlID string, ev *store.AuditEvent) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	recs := s.purgeRecords(urlID)
	if len(recs) == 0 && ev == nil {
		return 0, nil
	}
	if err := s.commit(recs, ev); err != nil {
		return 0, err
	}
	return len(recs) / 2, nil
}

// purgeRecords deletes every delivery of the URL, with its body.
func (s *Store) purgeRecords(urlID string) []record {
	var recs []record
	for id := range s.byURL[urlID] {
		recs = append(recs, del(tDelivery, id), del(tBody, id))
	}
	return recs
}
