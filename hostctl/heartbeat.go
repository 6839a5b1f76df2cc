package hostctl

import (
	"context"
	"log/slog"
	"time"

	"froog.tech/froog/store"
)

// beat registers the host, or says it is still alive.
func (c *Controller) beat(ctx context.Context) error {
	now := c.now()
	h, err := c.o.Store.RegisterHost(ctx, store.Host{Name: c.o.HostName, Capacity: c.o.Capacity, Address: c.o.Address, CreatedAt: now, SeenAt: now})
	if err != nil {
		return err
	}
	if c.hostID == "" {
		c.hostID = h.ID // before any goroutine reads it
	}
	c.mu.Lock()
	c.seen = now
	c.mu.Unlock()
	return nil
}

// heartbeat beats every Heartbeat, then marks down the hosts that have
// not beaten within DownAfter (every controller does; the store marks a
// host once). A controller judges others only once its own beats have
// gone through for DownAfter: after the store was away, every host is
// silent, and each must first get the chance to beat again.
func (c *Controller) heartbeat(ctx context.Context) {
	defer c.wg.Done()
	tick := time.NewTicker(c.o.Heartbeat)
	defer tick.Stop()
	beating := c.now() // Run's first beat went through
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if err := c.beat(ctx); err != nil {
			if ctx.Err() == nil {
				c.o.Logger.Warn("heartbeat failed", slog.String("error", err.Error()))
			}
			beating = time.Time{}
			continue
		}
		// Judge others by the time this beat wrote, not a fresh reading:
		// a clock that moved on in between (a paused process, the tests'
		// clock) would otherwise find this very host silent.
		c.mu.Lock()
		now := c.seen
		c.mu.Unlock()
		if beating.IsZero() {
			beating = now
		}
		if now.Sub(beating) < c.o.DownAfter {
			continue
		}
		down, err := c.o.Store.MarkHostsDown(ctx, now.Add(-c.o.DownAfter), now)
		if err != nil {
			if ctx.Err() == nil {
				c.o.Logger.Warn("looking for hosts that are down", slog.String("error", err.Error()))
			}
			continue
		}
		for _, h := range down {
			c.o.Logger.Error("host marked down: no heartbeat; its sandboxes are in error", slog.String("host", h.Name), slog.Time("last_seen", h.SeenAt))
		}
	}
}
