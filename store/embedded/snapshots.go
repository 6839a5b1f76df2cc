package embedded

import (
	"context"
	"fmt"
	"sort"

	"froog.tech/froog/store"
)

func (s *Store) CreateSnapshot(ctx context.Context, sn store.Snapshot, ev *store.AuditEvent) (store.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sn.ID == "" {
		sn.ID = store.NewID("snap")
	}
	if _, ok := s.snapshots[sn.ID]; ok {
		return store.Snapshot{}, fmt.Errorf("create snapshot %s: %w", sn.ID, store.ErrConflict)
	}
	if sb, ok := s.sandboxes[sn.SandboxID]; !ok || sb.DeletedAt != nil || sb.AccountID != sn.AccountID {
		return store.Snapshot{}, fmt.Errorf("create snapshot: sandbox %s: %w", sn.SandboxID, store.ErrNotFound)
	}
	if err := s.commit([]record{put(tSnapshot, sn.ID, clone(&sn))}, ev); err != nil {
		return store.Snapshot{}, err
	}
	return sn, nil
}

func (s *Store) Snapshot(ctx context.Context, accountID, id string) (store.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sn, ok := s.snapshots[id]
	if !ok || sn.AccountID != accountID {
		return store.Snapshot{}, fmt.Errorf("snapshot %s: %w", id, store.ErrNotFound)
	}
	return *clone(sn), nil
}

func (s *Store) ListSnapshots(ctx context.Context, f store.SnapshotFilter) ([]store.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []store.Snapshot{}
	for _, sn := range s.snapshots {
		if f.Match(sn) {
			out = append(out, *clone(sn))
		}
	}
	store.SortSnapshots(out)
	return out, nil
}

func (s *Store) HostSnapshots(ctx context.Context, hostID string) ([]store.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []store.Snapshot{}
	for _, sn := range s.snapshots {
		if sn.HostID == hostID {
			out = append(out, *clone(sn))
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

func (s *Store) UpdateSnapshot(ctx context.Context, id string, fn func(*store.Snapshot) error, ev *store.AuditEvent) (store.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.snapshots[id]
	if !ok {
		return store.Snapshot{}, fmt.Errorf("snapshot %s: %w", id, store.ErrNotFound)
	}
	sn := clone(cur)
	if err := fn(sn); err != nil {
		return store.Snapshot{}, err
	}
	sn.ID, sn.AccountID = cur.ID, cur.AccountID
	if err := s.commit([]record{put(tSnapshot, id, sn)}, ev); err != nil {
		return store.Snapshot{}, err
	}
	return *clone(sn), nil
}

func (s *Store) PurgeSnapshot(ctx context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	sn, ok := s.snapshots[id]
	if !ok || sn.DeletedAt == nil {
		return fmt.Errorf("purge snapshot %s: %w", id, store.ErrNotFound)
	}
	return s.commit([]record{del(tSnapshot, id)}, nil)
}
