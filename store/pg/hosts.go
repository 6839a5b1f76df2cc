package pg

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"froog.tech/froog/store"
)

// hostsLocked reads every host with its sandboxes counted; forUpdate
// locks the hosts' rows, which serializes placements and mark-downs.
func hostsLocked(ctx context.Context, t *txn, forUpdate bool) ([]store.Host, error) {
	q := `SELECT doc FROM hosts ORDER BY name`
	if forUpdate {
		q += ` FOR UPDATE`
	}
	hosts, err := docs[store.Host](ctx, t, "hosts", q)
	if err != nil {
		return nil, err
	}
	rows, err := t.Query(ctx, `SELECT doc->>'host_id', count(*) FROM sandboxes WHERE NOT deleted AND coalesce(doc->>'host_id', '') <> '' GROUP BY 1`)
	if err != nil {
		return nil, fmt.Errorf("count sandboxes per host: %w", err)
	}
	defer rows.Close()
	n := map[string]int{}
	for rows.Next() {
		var id string
		var c int
		if err := rows.Scan(&id, &c); err != nil {
			return nil, err
		}
		n[id] = c
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for i := range hosts {
		hosts[i].Sandboxes = n[hosts[i].ID]
	}
	return hosts, nil
}

func (s *Store) Hosts(ctx context.Context) ([]store.Host, error) {
	var out []store.Host
	err := s.inTx(ctx, nil, func(t *txn) (err error) {
		out, err = hostsLocked(ctx, t, false)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("hosts: %w", err)
	}
	return out, nil
}

func (s *Store) SetHostDraining(ctx context.Context, name string, draining bool) (store.Host, error) {
	var h store.Host
	err := s.inTx(ctx, nil, func(t *txn) error {
		if err := getDoc(ctx, t, &h, "host "+name, `SELECT doc FROM hosts WHERE name = $1 FOR UPDATE`, name); err != nil {
			return err
		}
		h.Draining = draining
		_, err := t.Exec(ctx, `UPDATE hosts SET doc = $2 WHERE id = $1`, h.ID, mustJSON(h))
		return err
	})
	if err != nil {
		return store.Host{}, fmt.Errorf("drain host: %w", err)
	}
	return h, nil
}

func (s *Store) PlaceSandbox(ctx context.Context, id string, liveSince time.Time) (store.Sandbox, error) {
	var out store.Sandbox
	err := s.inTx(ctx, nil, func(t *txn) error {
		hosts, err := hostsLocked(ctx, t, true)
		if err != nil {
			return err
		}
		sb, err := lockSandbox(ctx, t, id)
		if err != nil {
			return err
		}
		out = *sb
		if sb.HostID != "" {
			return nil
		}
		src := ""
		switch snap, from := store.ForkSource(sb); {
		case snap != "":
			err := t.QueryRow(ctx, `SELECT host_id FROM snapshots WHERE id = $1`, snap).Scan(&src)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("the fork's snapshot: %w", err)
			}
		case from != "":
			var f store.Sandbox
			if err := getDoc(ctx, t, &f, "sandbox "+from, `SELECT doc FROM sandboxes WHERE id = $1`, from); err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
			src = f.HostID
		}
		h := store.PickHost(hosts, sb, src, liveSince)
		if h == nil {
			return nil
		}
		sb.HostID = h.ID
		out = *sb
		return writeSandbox(ctx, t, sb, false)
	})
	if err != nil {
		return store.Sandbox{}, fmt.Errorf("place sandbox: %w", err)
	}
	return out, nil
}

func (s *Store) MarkHostsDown(ctx context.Context, seenBefore, at time.Time) ([]store.Host, error) {
	var marked []store.Host
	err := s.inTx(ctx, nil, func(t *txn) error {
		marked = nil
		hosts, err := hostsLocked(ctx, t, true)
		if err != nil {
			return err
		}
		for i := range hosts {
			h := &hosts[i]
			if h.DownAt != nil || !h.SeenAt.Before(seenBefore) {
				continue
			}
			h.DownAt = &at
			if _, err := t.Exec(ctx, `UPDATE hosts SET doc = $2 WHERE id = $1`, h.ID, mustJSON(h)); err != nil {
				return err
			}
			list, err := docs[store.Sandbox](ctx, t, "sandboxes", `SELECT doc FROM sandboxes WHERE NOT deleted AND doc->>'host_id' = $1 ORDER BY id FOR UPDATE`, h.ID)
			if err != nil {
				return err
			}
			for j := range list {
				sb := &list[j]
				if sb.PendingStopID != "" {
					var st store.Stop
					err := getDoc(ctx, t, &st, "stop", `SELECT doc FROM stops WHERE id = $1 AND pending FOR UPDATE`, sb.PendingStopID)
					if err != nil && !errors.Is(err, store.ErrNotFound) {
						return err
					}
					if err == nil {
						st.Status, st.Error, st.EndedAt = store.StopFailed, store.HostDownStop(h), &at
						if _, err := t.Exec(ctx, `UPDATE stops SET pending = false, doc = $2 WHERE id = $1`, st.ID, mustJSON(st)); err != nil {
							return err
						}
					}
					sb.PendingStopID = ""
					store.HostDown(sb, h)
				} else if !store.HostDown(sb, h) {
					continue
				}
				if err := writeSandbox(ctx, t, sb, false); err != nil {
					return err
				}
			}
			marked = append(marked, *h)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("mark hosts down: %w", err)
	}
	return marked, nil
}
