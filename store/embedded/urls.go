package embedded

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"froog.tech/froog/store"
)

func (s *Store) urlFor(sandboxID string, port int) *store.URL {
	for _, u := range s.urls {
		if u.SandboxID == sandboxID && u.Port == port {
			return u
		}
	}
	return nil
}

// deleteURLRecords removes a URL and its viewer tokens.
func (s *Store) deleteURLRecords(u *store.URL) []record {
	recs := []record{del(tURL, u.ID)}
	for _, t := range s.tokens {
		if t.URLID == u.ID {
			recs = append(recs, del(tURLToken, t.ID))
		}
	}
	return append(recs, s.purgeRecords(u.ID)...)
}

func (s *Store) PutURL(ctx context.Context, sandboxID string, port int, fn func(*store.URL, *store.AuditEvent) (store.URL, error), ev *store.AuditEvent) (store.URL, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb, err := s.live(sandboxID)
	if err != nil {
		return store.URL{}, fmt.Errorf("put url: %w", err)
	}
	var old *store.URL
	if o := s.urlFor(sandboxID, port); o != nil {
		old = clone(o)
	}
	u, err := store.PutURLIn(ctx, &urlTx{s: s, ev: ev}, sb, port, old, fn, ev)
	if err != nil {
		return store.URL{}, fmt.Errorf("put url: %w", err)
	}
	return u, nil
}

// urlTx is the persistence of one PutURL; s.mu is held.
type urlTx struct {
	s  *Store
	ev *store.AuditEvent
}

var _ store.URLTx = (*urlTx)(nil)

func (t *urlTx) CountURLs(ctx context.Context, sandboxID string) (int, error) {
	n := 0
	for _, o := range t.s.urls {
		if o.SandboxID == sandboxID {
			n++
		}
	}
	return n, nil
}

func (t *urlTx) PublicURLPorts(ctx context.Context, sandboxID string) ([]int, error) {
	var ports []int
	for _, o := range t.s.urls {
		if o.SandboxID == sandboxID && o.Public {
			ports = append(ports, o.Port)
		}
	}
	return ports, nil
}

func (t *urlTx) URLNames(ctx context.Context, accountID, hostname, day string) (store.URLNames, error) {
	var names store.URLNames
	acct, ok := t.s.accounts[accountID]
	if !ok {
		return names, fmt.Errorf("account %s: %w", accountID, store.ErrNotFound)
	}
	names.Account = *acct
	for _, o := range t.s.urls {
		if o.Hostname == hostname {
			names.Taken = true
		}
	}
	for _, name := range t.s.urlNames {
		if name.AccountID == accountID && name.Day == day {
			names.Today = append(names.Today, name.Hostname)
		}
	}
	return names, nil
}

func (t *urlTx) WriteURL(ctx context.Context, w store.URLWrite) error {
	var recs []record
	if w.NameDay != "" {
		for id, name := range t.s.urlNames {
			if name.Day < w.NameDay {
				recs = append(recs, del(tURLName, id)) // an old day: forget it
			}
		}
	}
	if w.AddName {
		id := w.NameDay + "/" + w.URL.AccountID + "/" + w.URL.Hostname
		recs = append(recs, put(tURLName, id, &urlName{AccountID: w.URL.AccountID, Hostname: w.URL.Hostname, Day: w.NameDay}))
	}
	if w.DropViews {
		for _, tok := range t.s.tokens {
			if tok.URLID == w.URL.ID {
				recs = append(recs, del(tURLToken, tok.ID))
			}
		}
	}
	recs = append(recs, put(tURL, w.URL.ID, clone(&w.URL)))
	return t.s.commit(recs, t.ev)
}

func (s *Store) URLs(ctx context.Context, sandboxID string) ([]store.URL, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []store.URL
	for _, u := range s.urls {
		if u.SandboxID == sandboxID {
			out = append(out, *clone(u))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Port < out[j].Port })
	return out, nil
}

func (s *Store) URL(ctx context.Context, sandboxID string, port int) (store.URL, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.urlFor(sandboxID, port)
	if u == nil {
		return store.URL{}, fmt.Errorf("url for port %d: %w", port, store.ErrNotFound)
	}
	return *clone(u), nil
}

func (s *Store) DeleteURL(ctx context.Context, sandboxID string, port int, ev *store.AuditEvent) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.urlFor(sandboxID, port)
	if u == nil {
		return fmt.Errorf("delete url for port %d: %w", port, store.ErrNotFound)
	}
	return s.commit(s.deleteURLRecords(u), ev)
}

func (s *Store) CreateURLToken(ctx context.Context, t store.URLToken, ev *store.AuditEvent) (store.URLToken, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.urls[t.URLID]
	if !ok {
		return store.URLToken{}, fmt.Errorf("create url token: url %s: %w", t.URLID, store.ErrNotFound)
	}
	if t.ID == "" {
		t.ID = store.NewID("utk")
	}
	var all []store.URLToken
	for _, o := range s.tokens {
		if o.URLID == t.URLID {
			all = append(all, *o)
		}
	}
	dead, err := store.CheckURLToken(u, &t, all)
	if err != nil {
		return store.URLToken{}, fmt.Errorf("create url token: %w", err)
	}
	var recs []record
	for _, id := range dead {
		recs = append(recs, del(tURLToken, id)) // dead tokens go
	}
	recs = append(recs, put(tURLToken, t.ID, clone(&t)))
	if err := s.commit(recs, ev); err != nil {
		return store.URLToken{}, err
	}
	return t, nil
}

func (s *Store) URLTokens(ctx context.Context, urlID string, now time.Time) ([]store.URLToken, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var all []store.URLToken
	for _, t := range s.tokens {
		if t.URLID == urlID {
			all = append(all, *clone(t))
		}
	}
	return store.LiveTokens(all, now), nil
}

func (s *Store) RevokeURLToken(ctx context.Context, urlID, id string, at time.Time, ev *store.AuditEvent) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tokens[id]
	if !ok || t.URLID != urlID || t.RevokedAt != nil {
		return fmt.Errorf("revoke url token %s: %w", id, store.ErrNotFound)
	}
	t = clone(t)
	t.RevokedAt = &at
	return s.commit([]record{put(tURLToken, t.ID, t)}, ev)
}

// --- audit and idempotency ---

func (s *Store) Audit(ctx context.Context, accountID string, before int64, limit int) ([]store.AuditEvent, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []store.AuditEvent
	for _, e := range s.audit {
		if e.AccountID == accountID && (before <= 0 || e.ID < before) {
			out = append(out, *clone(e))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID > out[j].ID })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

func idemID(accountID, key string) string { return accountID + "\x00" + key }

func (s *Store) BeginIdempotent(ctx context.Context, rec store.Idempotency) (*store.Idempotency, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := idemID(rec.AccountID, rec.Key)
	if old, ok := s.idem[id]; ok && rec.CreatedAt.Sub(old.CreatedAt) < store.IdempotencyWindow {
		switch {
		case old.RequestHash != rec.RequestHash:
			return nil, store.ErrIdempotencyReused
		case old.Status == 0:
			return nil, store.ErrIdempotencyInUse
		}
		return clone(old), nil
	}
	recs := []record{put(tIdem, id, clone(&rec))}
	for oid, old := range s.idem {
		if rec.CreatedAt.Sub(old.CreatedAt) >= store.IdempotencyWindow && oid != id {
			recs = append(recs, del(tIdem, oid))
		}
	}
	return nil, s.commit(recs, nil)
}

func (s *Store) FinishIdempotent(ctx context.Context, accountID, key string, status int, body []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := idemID(accountID, key)
	old, ok := s.idem[id]
	if !ok {
		return fmt.Errorf("finish idempotency key: %w", store.ErrNotFound)
	}
	rec := clone(old)
	rec.Status, rec.Body = status, body
	return s.commit([]record{put(tIdem, id, rec)}, nil)
}

func (s *Store) AbandonIdempotent(ctx context.Context, accountID, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := idemID(accountID, key)
	if _, ok := s.idem[id]; !ok {
		return nil
	}
	return s.commit([]record{del(tIdem, id)}, nil)
}

// --- certificate storage ---

func (s *Store) KVGet(ctx context.Context, key string) (store.KV, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	kv, ok := s.kv[key]
	if !ok {
		return store.KV{}, fmt.Errorf("kv %s: %w", key, store.ErrNotFound)
	}
	return *clone(kv), nil
}

func (s *Store) KVPut(ctx context.Context, key string, value []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.commit([]record{put(tKV, key, &store.KV{Key: key, Value: value, Modified: time.Now().UTC()})}, nil)
}

func (s *Store) KVDelete(ctx context.Context, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var recs []record
	for k := range s.kv {
		if k == key || strings.HasPrefix(k, key+"/") {
			recs = append(recs, del(tKV, k))
		}
	}
	if len(recs) == 0 {
		return fmt.Errorf("kv %s: %w", key, store.ErrNotFound)
	}
	return s.commit(recs, nil)
}

func (s *Store) KVList(ctx context.Context, prefix string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for k := range s.kv {
		if prefix == "" || strings.HasPrefix(k, prefix+"/") {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out, nil
}

func (s *Store) AcquireLease(ctx context.Context, name, owner string, ttl time.Duration) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if l, ok := s.leases[name]; ok && l.Owner != owner && now.UnixNano() < l.Expires {
		return false, nil
	}
	return true, s.commit([]record{put(tLease, name, &lease{Name: name, Owner: owner, Expires: now.Add(ttl).UnixNano()})}, nil)
}

func (s *Store) ReleaseLease(ctx context.Context, name, owner string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l, ok := s.leases[name]; !ok || l.Owner != owner {
		return nil
	}
	return s.commit([]record{del(tLease, name)}, nil)
}

// --- change feed ---

func (s *Store) Subscribe(ctx context.Context, after int64) (*store.Subscription, error) {
	return store.NewSubscription(ctx, s, after)
}

func (s *Store) Head(ctx context.Context) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.meta.Seq, nil
}

func (s *Store) Changed() <-chan struct{} { return s.signal.Changed() }

func (s *Store) ChangesAfter(ctx context.Context, after int64, limit int) ([]store.Change, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("read changes: store is closed")
	}
	if after >= s.meta.Seq {
		return nil, nil
	}
	if len(s.changes) == 0 || after < s.changes[0].Seq-1 {
		return nil, fmt.Errorf("read changes after %d: %w", after, store.ErrFeedGap)
	}
	i := sort.Search(len(s.changes), func(i int) bool { return s.changes[i].Seq > after })
	end := min(i+limit, len(s.changes))
	return append([]store.Change(nil), s.changes[i:end]...), nil
}

func (s *Store) AllURLs(ctx context.Context) ([]store.URL, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]store.URL, 0, len(s.urls))
	for _, u := range s.urls {
		out = append(out, *clone(u))
	}
	return out, nil
}

func (s *Store) AllSandboxes(ctx context.Context) ([]store.Sandbox, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]store.Sandbox, 0, len(s.sandboxes))
	for _, sb := range s.sandboxes {
		if sb.DeletedAt == nil {
			out = append(out, *clone(sb))
		}
	}
	return out, nil
}

func (s *Store) AllURLTokens(ctx context.Context, now time.Time) ([]store.URLToken, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []store.URLToken
	for _, t := range s.tokens {
		if t.Live(now) {
			out = append(out, *clone(t))
		}
	}
	return out, nil
}

func (s *Store) CreateDesktopLink(ctx context.Context, l store.DesktopLink, ev *store.AuditEvent) (store.DesktopLink, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l.SandboxID == "" { // a wall's
		if _, ok := s.accounts[l.AccountID]; !ok {
			return store.DesktopLink{}, fmt.Errorf("create desktop link: account %s: %w", l.AccountID, store.ErrNotFound)
		}
	} else if _, err := s.live(l.SandboxID); err != nil {
		return store.DesktopLink{}, fmt.Errorf("create desktop link: %w", err)
	}
	if l.ID == "" {
		l.ID = store.NewID("dtl")
	}
	var recs []record
	for _, o := range s.links {
		if o.SandboxID == l.SandboxID && o.AccountID == l.AccountID && !l.CreatedAt.Before(o.ExpiresAt) {
			recs = append(recs, del(tLink, o.ID)) // expired: it opens nothing
		}
	}
	recs = append(recs, put(tLink, l.ID, clone(&l)))
	if err := s.commit(recs, ev); err != nil {
		return store.DesktopLink{}, err
	}
	return l, nil
}

func (s *Store) DesktopLink(ctx context.Context, hash string) (store.DesktopLink, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.links {
		if l.Hash == hash {
			return *clone(l), nil
		}
	}
	return store.DesktopLink{}, fmt.Errorf("desktop link: %w", store.ErrNotFound)
}

func (s *Store) LockDesktopLinkViewOnly(ctx context.Context, hash string) (store.DesktopLink, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.links {
		if l.Hash != hash {
			continue
		}
		if l.ViewOnly {
			return *clone(l), nil
		}
		locked := clone(l)
		locked.ViewOnly = true
		if err := s.commit([]record{put(tLink, l.ID, clone(locked))}, nil); err != nil {
			return store.DesktopLink{}, fmt.Errorf("lock desktop link view-only: %w", err)
		}
		return *locked, nil
	}
	return store.DesktopLink{}, fmt.Errorf("lock desktop link view-only: %w", store.ErrNotFound)
}
