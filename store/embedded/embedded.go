package embedded

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"froog.tech/froog/store"
)

// keepChanges is how many recent changes the feed keeps in memory; a
// subscriber further behind gets store.ErrFeedGap and reloads.
const keepChanges = 100_000

// Store is the embedded store. Open it with Open; Close it once done.
type Store struct {
	mu     sync.Mutex
	log    *os.File
	lock   *os.File
	closed bool
	meta   meta

	accounts  map[string]*store.Account
	keys      map[string]*store.APIKey
	sshKeys   map[string]*store.SSHKey
	envs      map[string]*store.Environment // by account id
	hosts     map[string]*store.Host
	sandboxes map[string]*store.Sandbox
	stops     map[string]*store.Stop
	urls      map[string]*store.URL
	tokens    map[string]*store.URLToken
	links     map[string]*store.DesktopLink
	audit     map[string]*store.AuditEvent
	idem      map[string]*store.Idempotency
	kv        map[string]*store.KV
	leases    map[string]*lease
	urlNames  map[string]*urlName
	starts    map[string]*startRec
	snapshots map[string]*store.Snapshot
	// deliveries are kept without their bodies, which are written once;
	// byURL and queued index them (indexDelivery).
	deliveries map[string]*store.Delivery
	byURL      map[string]map[string]*store.Delivery
	queued     map[string]int
	bodies     map[string]*deliveryBody

	webhooks   map[string]*store.Webhook
	whDeliv    map[string]*store.WebhookDelivery
	whAttempts map[string]*store.WebhookAttempt

	history history // history.go

	changes []store.Change // the newest keepChanges, oldest first
	signal  store.Signal
}

var (
	_ store.Store       = (*Store)(nil)
	_ store.CertStorage = (*Store)(nil)
	_ store.ChangeLog   = (*Store)(nil)
)

// Open opens (or creates) the store in dir.
func Open(dir string) (*Store, error) {
	s := &Store{
		accounts:  map[string]*store.Account{},
		keys:      map[string]*store.APIKey{},
		sshKeys:   map[string]*store.SSHKey{},
		envs:      map[string]*store.Environment{},
		hosts:     map[string]*store.Host{},
		sandboxes: map[string]*store.Sandbox{},
		stops:     map[string]*store.Stop{},
		urls:      map[string]*store.URL{},
		tokens:    map[string]*store.URLToken{},
		links:     map[string]*store.DesktopLink{},
		audit:     map[string]*store.AuditEvent{},
		idem:      map[string]*store.Idempotency{},
		kv:        map[string]*store.KV{},
		leases:    map[string]*lease{},
		urlNames:  map[string]*urlName{},
		starts:    map[string]*startRec{},
		snapshots: map[string]*store.Snapshot{},

		deliveries: map[string]*store.Delivery{},
		byURL:      map[string]map[string]*store.Delivery{},
		queued:     map[string]int{},
		bodies:     map[string]*deliveryBody{},
		webhooks:   map[string]*store.Webhook{},
		whDeliv:    map[string]*store.WebhookDelivery{},
		whAttempts: map[string]*store.WebhookAttempt{},
		history:    newHistory(),
	}
	log, lock, err := openLog(dir, s.apply, s.snapshot)
	if err != nil {
		return nil, err
	}
	s.log, s.lock = log, lock
	return s, nil
}

// Close closes the log. It is safe to call more than once.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	err := s.log.Close()
	s.lock.Close()
	s.signal.Wake()
	return err
}

// apply puts or deletes one row in memory.
func (s *Store) apply(r record) error {
	if r.T == tMeta {
		if !r.Del {
			s.meta = *r.val.(*meta)
		}
		return nil
	}
	switch r.T {
	case tAccount:
		setOrDel(s.accounts, r)
	case tAPIKey:
		setOrDel(s.keys, r)
	case tSSHKey:
		setOrDel(s.sshKeys, r)
	case tEnv:
		setOrDel(s.envs, r)
	case tHost:
		setOrDel(s.hosts, r)
	case tSandbox:
		setOrDel(s.sandboxes, r)
	case tStop:
		setOrDel(s.stops, r)
	case tURL:
		setOrDel(s.urls, r)
	case tURLToken:
		setOrDel(s.tokens, r)
	case tLink:
		setOrDel(s.links, r)
	case tAudit:
		setOrDel(s.audit, r)
	case tIdem:
		setOrDel(s.idem, r)
	case tKV:
		setOrDel(s.kv, r)
	case tLease:
		setOrDel(s.leases, r)
	case tURLName:
		setOrDel(s.urlNames, r)
	case tStart:
		setOrDel(s.starts, r)
	case tSnapshot:
		setOrDel(s.snapshots, r)
	case tDelivery:
		s.indexDelivery(r)
		setOrDel(s.deliveries, r)
	case tBody:
		setOrDel(s.bodies, r)
	case tWebhook:
		setOrDel(s.webhooks, r)
	case tWhDeliv:
		setOrDel(s.whDeliv, r)
	case tWhTry:
		setOrDel(s.whAttempts, r)
	case tCommand, tOutput, tHour:
		s.history.apply(r)
	default:
		return fmt.Errorf("unknown table %q", r.T)
	}
	return nil
}

func setOrDel[T any](m map[string]*T, r record) {
	if r.Del {
		delete(m, r.ID)
		return
	}
	m[r.ID] = r.val.(*T)
}

// snapshot lists every row, for compaction.
func (s *Store) snapshot() []record {
	recs := []record{metaRecord(s.meta)}
	recs = appendAll(recs, tAccount, s.accounts)
	recs = appendAll(recs, tAPIKey, s.keys)
	recs = appendAll(recs, tSSHKey, s.sshKeys)
	recs = appendAll(recs, tEnv, s.envs)
	recs = appendAll(recs, tHost, s.hosts)
	recs = appendAll(recs, tSandbox, s.sandboxes)
	recs = appendAll(recs, tStop, s.stops)
	recs = appendAll(recs, tURL, s.urls)
	recs = appendAll(recs, tURLToken, s.tokens)
	recs = appendAll(recs, tLink, s.links)
	recs = appendAll(recs, tAudit, s.audit)
	recs = appendAll(recs, tIdem, s.idem)
	recs = appendAll(recs, tKV, s.kv)
	recs = appendAll(recs, tLease, s.leases)
	recs = appendAll(recs, tURLName, s.urlNames)
	recs = appendAll(recs, tStart, s.starts)
	recs = appendAll(recs, tSnapshot, s.snapshots)
	recs = appendAll(recs, tDelivery, s.deliveries)
	recs = appendAll(recs, tBody, s.bodies)
	recs = appendAll(recs, tWebhook, s.webhooks)
	recs = appendAll(recs, tWhDeliv, s.whDeliv)
	recs = appendAll(recs, tWhTry, s.whAttempts)
	return s.history.rows(recs)
}

func appendAll[T any](recs []record, table string, m map[string]*T) []record {
	for id, v := range m {
		recs = append(recs, put(table, id, v))
	}
	return recs
}

// commit writes recs, and ev when it is not nil, as one line, syncs it,
// then applies it and publishes the changes it makes to the feed. s.mu
// must be held. On an error nothing has changed.
func (s *Store) commit(recs []record, ev *store.AuditEvent) error {
	if s.closed {
		return errors.New("store is closed")
	}
	recs = append(recs, s.webhookEvents(recs, ev)...)
	var changes []store.Change
	m := s.meta
	for _, r := range recs {
		c, ok := change(r)
		if !ok {
			continue
		}
		m.Seq++
		c.Seq = m.Seq
		changes = append(changes, c)
	}
	if ev != nil {
		m.AuditSeq++
		ev.ID = m.AuditSeq
		recs = append(recs, put(tAudit, fmt.Sprint(ev.ID), clone(ev)))
	}
	if m != s.meta {
		recs = append(recs, metaRecord(m))
	}
	line, err := encode(recs)
	if err != nil {
		return err
	}
	if _, err := s.log.Write(line); err != nil {
		return fmt.Errorf("write store log: %w", err)
	}
	if err := s.log.Sync(); err != nil {
		return fmt.Errorf("sync store log: %w", err)
	}
	for _, r := range recs {
		if err := s.apply(r); err != nil {
			return err
		}
	}
	if len(changes) > 0 {
		s.changes = append(s.changes, changes...)
		if over := len(s.changes) - keepChanges; over > 0 {
			s.changes = append([]store.Change(nil), s.changes[over:]...)
		}
		s.signal.Wake()
	}
	return nil
}

// change is the feed entry a record makes, if its table is on the feed.
func change(r record) (store.Change, bool) {
	c := store.Change{Kind: r.T, ID: r.ID, Deleted: r.Del}
	switch r.T {
	case tSandbox:
		if !r.Del {
			c.Sandbox = clone(r.val.(*store.Sandbox))
		}
	case tURL:
		if !r.Del {
			c.URL = clone(r.val.(*store.URL))
		}
	case tURLToken:
		if !r.Del {
			c.URLToken = clone(r.val.(*store.URLToken))
		}
	case tLink:
		if !r.Del {
			c.DesktopLink = clone(r.val.(*store.DesktopLink))
		}
	case tSnapshot:
		if !r.Del {
			c.Snapshot = clone(r.val.(*store.Snapshot))
		}
	default:
		return store.Change{}, false
	}
	return c, true
}

// clone deep-copies v, so that callers never share memory with the store.
func clone[T any](v *T) *T {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("clone %T: %v", v, err))
	}
	var out T
	if err := json.Unmarshal(b, &out); err != nil {
		panic(fmt.Sprintf("clone %T: %v", v, err))
	}
	return &out
}

// --- accounts and keys ---

func (s *Store) CreateAccount(ctx context.Context, a store.Account) (store.Account, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a.ID == "" {
		a.ID = store.NewID("acct")
	}
	if _, ok := s.accounts[a.ID]; ok {
		return store.Account{}, fmt.Errorf("create account %s: %w", a.ID, store.ErrConflict)
	}
	if err := s.commit([]record{put(tAccount, a.ID, clone(&a))}, nil); err != nil {
		return store.Account{}, err
	}
	return a, nil
}

func (s *Store) Account(ctx context.Context, id string) (store.Account, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.accounts[id]
	if !ok {
		return store.Account{}, fmt.Errorf("account %s: %w", id, store.ErrNotFound)
	}
	return *clone(a), nil
}

func (s *Store) CreateAPIKey(ctx context.Context, k store.APIKey, ev *store.AuditEvent) (store.APIKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if k.ID == "" {
		k.ID = store.NewID("key")
	}
	if _, ok := s.accounts[k.AccountID]; !ok {
		return store.APIKey{}, fmt.Errorf("create api key: account %s: %w", k.AccountID, store.ErrNotFound)
	}
	for _, o := range s.keys {
		if o.ID == k.ID || o.SecretHash == k.SecretHash {
			return store.APIKey{}, fmt.Errorf("create api key %s: %w", k.ID, store.ErrConflict)
		}
	}
	if err := s.commit([]record{put(tAPIKey, k.ID, clone(&k))}, ev); err != nil {
		return store.APIKey{}, err
	}
	return k, nil
}

func (s *Store) APIKeyByHash(ctx context.Context, hash string) (store.APIKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range s.keys {
		if k.SecretHash == hash {
			return *clone(k), nil
		}
	}
	return store.APIKey{}, fmt.Errorf("api key: %w", store.ErrNotFound)
}

func (s *Store) APIKeyByID(ctx context.Context, id string) (store.APIKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := s.keys[id]
	if !ok {
		return store.APIKey{}, fmt.Errorf("api key %s: %w", id, store.ErrNotFound)
	}
	return *clone(k), nil
}

func (s *Store) ListAPIKeys(ctx context.Context, accountID string) ([]store.APIKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []store.APIKey
	for _, k := range s.keys {
		if k.AccountID == accountID {
			out = append(out, *clone(k))
		}
	}
	slices.SortFunc(out, func(a, b store.APIKey) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// updateAPIKey applies fn to a copy of the key id (of accountID, when
// not empty) and commits it.
func (s *Store) updateAPIKey(what, accountID, id string, fn func(*store.APIKey) error, ev *store.AuditEvent) (store.APIKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.keys[id]
	if !ok || (accountID != "" && old.AccountID != accountID) {
		return store.APIKey{}, fmt.Errorf("%s: api key %s: %w", what, id, store.ErrNotFound)
	}
	k := clone(old)
	if err := fn(k); err != nil {
		return store.APIKey{}, fmt.Errorf("%s: %w", what, err)
	}
	for _, o := range s.keys {
		if o.ID != k.ID && o.SecretHash == k.SecretHash {
			return store.APIKey{}, fmt.Errorf("%s: %w", what, store.ErrConflict)
		}
	}
	if err := s.commit([]record{put(tAPIKey, k.ID, k)}, ev); err != nil {
		return store.APIKey{}, err
	}
	return *clone(k), nil
}

func (s *Store) RevokeAPIKey(ctx context.Context, accountID, id string, at time.Time, ev *store.AuditEvent) (store.APIKey, error) {
	return s.updateAPIKey("revoke api key", accountID, id, func(k *store.APIKey) error { return k.Revoke(at) }, ev)
}

func (s *Store) RotateAPIKey(ctx context.Context, accountID, id, hash string, at time.Time, ev *store.AuditEvent) (store.APIKey, error) {
	return s.updateAPIKey("rotate api key", accountID, id, func(k *store.APIKey) error { return k.Rotate(hash, at) }, ev)
}

func (s *Store) RecordAPIKeyUse(ctx context.Context, id string, at time.Time, n int) error {
	_, err := s.updateAPIKey("record api key use", "", id, func(k *store.APIKey) error { k.AddUses(at, n); return nil }, nil)
	return err
}
