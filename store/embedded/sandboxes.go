package embedded

import (
	"context"
	"fmt"
	"sort"
	"time"

	"froog.tech/froog/store"
)

// live returns the sandbox with id that is not deleted.
func (s *Store) live(id string) (*store.Sandbox, error) {
	sb, ok := s.sandboxes[id]
	if !ok || sb.DeletedAt != nil {
		return nil, fmt.Errorf("sandbox %s: %w", id, store.ErrNotFound)
	}
	return sb, nil
}

// checkSandbox applies the rules every sandbox write shares: a free name,
// room in the account for one more running sandbox, and a start its start
// limits allow. It returns the records that count the start (and forget
// the account's starts too old to count).
func (s *Store) checkSandbox(old, sb *store.Sandbox) ([]record, error) {
	if err := store.CheckPortsIn(context.Background(), &urlTx{s: s}, old, sb); err != nil {
		return nil, err
	}
	for _, o := range s.sandboxes {
		if o.ID != sb.ID && o.DeletedAt == nil && o.AccountID == sb.AccountID && o.Name == sb.Name {
			return nil, fmt.Errorf("sandbox name %q: %w", sb.Name, store.ErrConflict)
		}
	}
	if store.TakesEnvironment(old, sb) {
		store.StartEnvironment(sb, s.env(sb.AccountID))
	}
	if !store.StartsRunning(old, sb) {
		return nil, nil
	}
	acct, ok := s.accounts[sb.AccountID]
	if !ok {
		return nil, fmt.Errorf("account %s: %w", sb.AccountID, store.ErrNotFound)
	}
	if n := s.running(sb.AccountID, sb.ID); n >= acct.MaxSandboxes {
		return nil, &store.LimitError{Limit: "sandboxes_at_once", Max: acct.MaxSandboxes}
	}
	at := store.StartAt(sb)
	var recs []record
	var starts []time.Time
	for id, st := range s.starts {
		switch {
		case st.AccountID != sb.AccountID:
		case !st.At.After(at.Add(-store.StartsKept)):
			recs = append(recs, del(tStart, id))
		default:
			starts = append(starts, st.At)
		}
	}
	if err := store.CheckStart(*acct, starts, at); err != nil {
		return nil, err
	}
	return append(recs, put(tStart, store.NewID("start"), &startRec{AccountID: sb.AccountID, At: at})), nil
}

// running counts the account's sandboxes meant to run, but the one with id
// except.
func (s *Store) running(accountID, except string) int {
	n := 0
	for _, o := range s.sandboxes {
		if o.ID != except && o.DeletedAt == nil && o.AccountID == accountID && o.DesiredState == store.StateRunning {
			n++
		}
	}
	return n
}

func (s *Store) AccountUsage(ctx context.Context, accountID string, at time.Time) (store.AccountUsage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	acct, ok := s.accounts[accountID]
	if !ok {
		return store.AccountUsage{}, fmt.Errorf("account %s: %w", accountID, store.ErrNotFound)
	}
	u := store.AccountUsage{Account: *acct, Running: s.running(accountID, "")}
	for _, st := range s.starts {
		if st.AccountID == accountID && st.At.After(at.Add(-store.StartsKept)) {
			u.Starts = append(u.Starts, st.At)
		}
	}
	return u, nil
}

func (s *Store) CreateSandbox(ctx context.Context, sb store.Sandbox, ev *store.AuditEvent) (store.Sandbox, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sb.ID == "" {
		sb.ID = store.NewID("sbx")
	}
	sb.CreatedAt = store.Micro(sb.CreatedAt)
	if _, ok := s.sandboxes[sb.ID]; ok {
		return store.Sandbox{}, fmt.Errorf("create sandbox %s: %w", sb.ID, store.ErrConflict)
	}
	if _, ok := s.accounts[sb.AccountID]; !ok {
		return store.Sandbox{}, fmt.Errorf("create sandbox: account %s: %w", sb.AccountID, store.ErrNotFound)
	}
	starts, err := s.checkSandbox(nil, &sb)
	if err != nil {
		return store.Sandbox{}, fmt.Errorf("create sandbox: %w", err)
	}
	if err := s.commit(append(starts, put(tSandbox, sb.ID, clone(&sb))), ev); err != nil {
		return store.Sandbox{}, err
	}
	return sb, nil
}

func (s *Store) Sandbox(ctx context.Context, accountID, name string) (store.Sandbox, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sb := range s.sandboxes {
		if sb.AccountID == accountID && sb.Name == name && sb.DeletedAt == nil {
			return *clone(sb), nil
		}
	}
	return store.Sandbox{}, fmt.Errorf("sandbox %q: %w", name, store.ErrNotFound)
}

func (s *Store) SandboxByID(ctx context.Context, id string) (store.Sandbox, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb, ok := s.sandboxes[id]
	if !ok {
		return store.Sandbox{}, fmt.Errorf("sandbox %s: %w", id, store.ErrNotFound)
	}
	return *clone(sb), nil
}

func (s *Store) ListSandboxes(ctx context.Context, f store.SandboxFilter) ([]store.Sandbox, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []store.Sandbox
	for _, sb := range s.sandboxes {
		if f.Match(sb) {
			out = append(out, *clone(sb))
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].ID < out[j].ID
	})
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out, nil
}

func (s *Store) UpdateSandbox(ctx context.Context, id string, fn func(*store.Sandbox, *store.AuditEvent) error, ev *store.AuditEvent) (store.Sandbox, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, err := s.live(id)
	if err != nil {
		return store.Sandbox{}, fmt.Errorf("update sandbox: %w", err)
	}
	sb := clone(old)
	if err := fn(sb, ev); err != nil {
		return store.Sandbox{}, err
	}
	sb.ID, sb.AccountID = old.ID, old.AccountID
	starts, err := s.checkSandbox(old, sb)
	if err != nil {
		return store.Sandbox{}, fmt.Errorf("update sandbox: %w", err)
	}
	if err := s.commit(append(starts, put(tSandbox, sb.ID, clone(sb))), ev); err != nil {
		return store.Sandbox{}, err
	}
	return *sb, nil
}

func (s *Store) StopSandbox(ctx context.Context, id string, at time.Time, ev *store.AuditEvent) (store.Stop, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, err := s.live(id)
	if err != nil {
		return store.Stop{}, fmt.Errorf("stop sandbox: %w", err)
	}
	var recs []record
	if st, ok := s.stops[old.PendingStopID]; ok && st.Status == store.StopPending {
		prev := clone(st)
		if store.StopStillPending(old, prev, at) {
			return *prev, nil
		}
		recs = append(recs, put(tStop, prev.ID, prev))
	}
	sb := clone(old)
	st := store.NewStop(sb, at)
	if err := s.commit(append(recs, put(tSandbox, sb.ID, sb), put(tStop, st.ID, clone(&st))), ev); err != nil {
		return store.Stop{}, err
	}
	return st, nil
}

func (s *Store) Stop(ctx context.Context, accountID, id string) (store.Stop, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.stops[id]
	if !ok || st.AccountID != accountID {
		return store.Stop{}, fmt.Errorf("stop %s: %w", id, store.ErrNotFound)
	}
	return *clone(st), nil
}

func (s *Store) FinishStop(ctx context.Context, id, status, errMsg string, at time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.stops[id]
	if !ok || st.Status != store.StopPending {
		return fmt.Errorf("finish stop %s: %w", id, store.ErrNotFound)
	}
	st = clone(st)
	st.Status, st.Error, st.EndedAt = status, errMsg, &at
	recs := []record{put(tStop, st.ID, st)}
	if sb, ok := s.sandboxes[st.SandboxID]; ok && sb.PendingStopID == id {
		sb = clone(sb)
		sb.PendingStopID = ""
		recs = append(recs, put(tSandbox, sb.ID, sb))
	}
	return s.commit(recs, nil)
}

func (s *Store) DeleteSandbox(ctx context.Context, id string, at time.Time, ev *store.AuditEvent) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, err := s.live(id)
	if err != nil {
		return fmt.Errorf("delete sandbox: %w", err)
	}
	sb := clone(old)
	sb.DeletedAt, sb.DesiredState, sb.UpdatedAt = &at, store.StateDeleted, at
	recs := []record{put(tSandbox, sb.ID, sb)}
	for _, u := range s.urls {
		if u.SandboxID == id {
			recs = append(recs, s.deleteURLRecords(u)...)
		}
	}
	for _, l := range s.links {
		if l.SandboxID == id {
			recs = append(recs, del(tLink, l.ID))
		}
	}
	recs = append(recs, s.history.deleteRecords(id)...)
	return s.commit(recs, ev)
}

func (s *Store) RegisterHost(ctx context.Context, h store.Host) (store.Host, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range s.hosts {
		if o.Name == h.Name {
			h.ID, h.CreatedAt, h.Draining, h.DownAt = o.ID, o.CreatedAt, o.Draining, nil
		}
	}
	if h.ID == "" {
		h.ID = store.NewID("host")
	}
	if err := s.commit([]record{put(tHost, h.ID, clone(&h))}, nil); err != nil {
		return store.Host{}, err
	}
	return h, nil
}

func (s *Store) HostSandboxes(ctx context.Context, hostID string) ([]store.Sandbox, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []store.Sandbox
	for _, sb := range s.sandboxes {
		if sb.HostID == hostID || sb.HostID == "" {
			out = append(out, *clone(sb))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func (s *Store) PurgeSandbox(ctx context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb, ok := s.sandboxes[id]
	if !ok || sb.DeletedAt == nil {
		return fmt.Errorf("purge sandbox %s: %w", id, store.ErrNotFound)
	}
	return s.commit([]record{del(tSandbox, id)}, nil)
}
