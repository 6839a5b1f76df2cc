package embedded

import (
	"context"
	"fmt"
	"time"

	"froog.tech/froog/store"
)

// hostList is every host by name with its sandboxes counted; s.mu held.
func (s *Store) hostList() []store.Host {
	n := map[string]int{}
	for _, sb := range s.sandboxes {
		if sb.DeletedAt == nil && sb.HostID != "" {
			n[sb.HostID]++
		}
	}
	out := make([]store.Host, 0, len(s.hosts))
	for _, h := range s.hosts {
		c := *clone(h)
		c.Sandboxes = n[h.ID]
		out = append(out, c)
	}
	store.SortHosts(out)
	return out
}

func (s *Store) Hosts(ctx context.Context) ([]store.Host, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hostList(), nil
}

func (s *Store) SetHostDraining(ctx context.Context, name string, draining bool) (store.Host, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range s.hosts {
		if h.Name == name {
			c := clone(h)
			c.Draining = draining
			if err := s.commit([]record{put(tHost, c.ID, c)}, nil); err != nil {
				return store.Host{}, err
			}
			return *clone(c), nil
		}
	}
	return store.Host{}, fmt.Errorf("drain host %s: %w", name, store.ErrNotFound)
}

func (s *Store) PlaceSandbox(ctx context.Context, id string, liveSince time.Time) (store.Sandbox, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, err := s.live(id)
	if err != nil {
		return store.Sandbox{}, fmt.Errorf("place sandbox: %w", err)
	}
	if old.HostID != "" {
		return *clone(old), nil
	}
	src := ""
	switch snap, from := store.ForkSource(old); {
	case snap != "":
		if sn, ok := s.snapshots[snap]; ok {
			src = sn.HostID
		}
	case from != "":
		if f, ok := s.sandboxes[from]; ok {
			src = f.HostID
		}
	}
	h := store.PickHost(s.hostList(), old, src, liveSince)
	if h == nil {
		return *clone(old), nil
	}
	sb := clone(old)
	sb.HostID = h.ID
	if err := s.commit([]record{put(tSandbox, sb.ID, clone(sb))}, nil); err != nil {
		return store.Sandbox{}, err
	}
	return *sb, nil
}

func (s *Store) MarkHostsDown(ctx context.Context, seenBefore, at time.Time) ([]store.Host, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var recs []record
	var marked []store.Host
	for _, h := range s.hostList() {
		if h.DownAt != nil || !h.SeenAt.Before(seenBefore) {
			continue
		}
		h.DownAt = &at
		recs = append(recs, put(tHost, h.ID, clone(&h)))
		for _, old := range s.sandboxes {
			if old.HostID != h.ID || old.DeletedAt != nil {
				continue
			}
			sb := clone(old)
			changed := store.HostDown(sb, &h)
			if st, ok := s.stops[sb.PendingStopID]; ok && st.Status == store.StopPending {
				st = clone(st)
				st.Status, st.Error, st.EndedAt = store.StopFailed, store.HostDownStop(&h), &at
				recs = append(recs, put(tStop, st.ID, st))
			}
			if sb.PendingStopID != "" {
				sb.PendingStopID, changed = "", true
			}
			if changed {
				recs = append(recs, put(tSandbox, sb.ID, sb))
			}
		}
		marked = append(marked, h)
	}
	if len(recs) == 0 {
		return nil, nil
	}
	if err := s.commit(recs, nil); err != nil {
		return nil, err
	}
	return marked, nil
}
