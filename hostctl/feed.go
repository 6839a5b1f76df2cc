package hostctl

import (
	"context"
	"log/slog"
	"time"

	"froog.tech/froog/store"
)

// watch rescans, then follows the feed (and rescans every Rescan) until
// the feed fails.
func (c *Controller) watch(ctx context.Context) error {
	head, err := c.o.Store.Head(ctx)
	if err != nil {
		return err
	}
	if err := c.rescan(ctx); err != nil {
		return err
	}
	sub, err := c.o.Store.Subscribe(ctx, head)
	if err != nil {
		return err
	}
	c.following.Store(true)
	defer c.following.Store(false)
	changes := make(chan store.Change)
	errc := make(chan error, 1)
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		for {
			ch, err := sub.Next(fctx)
			if err != nil {
				errc <- err
				return
			}
			select {
			case changes <- ch:
			case <-fctx.Done():
				errc <- fctx.Err()
				return
			}
		}
	}()
	tick := time.NewTicker(c.o.Rescan)
	defer tick.Stop()
	for {
		select {
		case ch := <-changes:
			if ch.Kind == store.KindSnapshot && ch.Snapshot != nil && ch.Snapshot.HostID == c.hostID {
				if ch.Snapshot.DeletedAt != nil {
					c.kick(ctx, reapID)
				} else if ch.Snapshot.Status == store.SnapshotCreating {
					c.kick(ctx, ch.Snapshot.SandboxID)
				}
			}
			if ch.Kind == store.KindURL {
				c.urlChanged(ctx, ch)
			}
			if ch.Kind != store.KindSandbox {
				continue
			}
			if ch.Sandbox == nil || ch.Sandbox.HostID == "" || ch.Sandbox.HostID == c.hostID {
				c.kick(ctx, ch.ID)
			}
		case <-tick.C:
			if err := c.rescan(ctx); err != nil {
				return err
			}
		case err := <-errc:
			return err
		}
	}
}

func (c *Controller) rescan(ctx context.Context) error {
	list, err := c.o.Store.HostSandboxes(ctx, c.hostID)
	if err != nil {
		return err
	}
	for _, sb := range list {
		c.kick(ctx, sb.ID)
	}
	c.kick(ctx, reapID)
	return nil
}

// kick asks the sandbox's worker to reconcile, starting it if needed.
func (c *Controller) kick(ctx context.Context, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ctx.Err() != nil {
		return // shutting down: Run is waiting for the workers
	}
	w, ok := c.workers[id]
	if !ok {
		w = &worker{kick: make(chan struct{}, 1)}
		c.workers[id] = w
		c.wg.Add(1)
		go c.work(ctx, id, w)
	}
	select {
	case w.kick <- struct{}{}:
	default: // a reconcile is already due
	}
}

func (c *Controller) work(ctx context.Context, id string, w *worker) {
	defer c.wg.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.kick:
		}
		if id == reapID {
			if err := c.reap(ctx); err != nil && ctx.Err() == nil {
				c.o.Logger.Error("remove deleted snapshots", slog.String("error", err.Error()))
			}
			continue
		}
		next, done, err := c.reconcile(ctx, id, w)
		if err != nil && ctx.Err() == nil {
			c.o.Logger.Error("reconcile", slog.String("sandbox", id), slog.String("error", err.Error()))
			next = c.now().Add(5 * time.Second) // try again soon
		}
		if w.timer != nil {
			w.timer.Stop()
			w.timer = nil
		}
		if done {
			c.mu.Lock()
			delete(c.workers, id)
			delete(c.released, id)
			c.mu.Unlock()
			return
		}
		if !next.IsZero() {
			w.timer = time.AfterFunc(max(next.Sub(c.now()), 0), func() { c.kick(ctx, id) })
		}
	}
}
