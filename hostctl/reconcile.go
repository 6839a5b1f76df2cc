package hostctl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"froog.tech/froog/store"
)

// reconcile moves one sandbox one or more steps towards its desired state.
// It returns when it next needs a look (a timer), and done when the
// sandbox is gone from this host.
func (c *Controller) reconcile(ctx context.Context, id string, w *worker) (next time.Time, done bool, err error) {
	c.mu.Lock()
	release := c.releases[id]
	delete(c.releases, id)
	c.mu.Unlock()
	if release != nil {
		defer close(release)
	}
	sb, err := c.o.Store.SandboxByID(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return time.Time{}, true, nil
	}
	if err != nil {
		return time.Time{}, false, err
	}
	if sb.DeletedAt != nil {
		if err := c.remove(ctx, &sb); err != nil {
			return time.Time{}, false, err
		}
		return time.Time{}, true, nil
	}
	if sb.HostID == "" {
		placed, err := c.place(ctx, &sb)
		if err != nil || !placed {
			return time.Time{}, !placed, err
		}
	}
	if sb.HostID != c.hostID {
		return time.Time{}, true, nil
	}
	if sb.RestoreFrom != "" {
		if err := c.restore(ctx, &sb, w); err != nil {
			return time.Time{}, false, err
		}
		return c.now(), false, nil // look again at what the restore left
	}
	if sb.State != store.StateCreating {
		if err := c.pendingSnapshots(ctx, &sb); err != nil {
			return time.Time{}, false, err
		}
	}
	now := c.now()
	if sb.DesiredState == store.StateRunning {
		return c.run(ctx, &sb, w, now)
	}
	return c.rest(ctx, &sb, now, release != nil)
}

// remove ends a deleted sandbox: its VM and everything it has on this
// host go, then its automatic snapshots, a stop still pending (completed:
// the sandbox is stopped for good), and its record.
func (c *Controller) remove(ctx context.Context, sb *store.Sandbox) error {
	if sb.HostID == c.hostID {
		if err := c.o.Driver.Delete(ctx, sb); err != nil {
			return fmt.Errorf("delete: %w", err)
		}
		if err := c.forgetSandbox(ctx, sb); err != nil {
			return err
		}
	}
	if sb.HostID == c.hostID || sb.HostID == "" {
		if err := c.finishStop(ctx, sb, store.StopCompleted, "", c.now()); err != nil {
			return err
		}
	}
	if err := c.o.Store.PurgeSandbox(ctx, sb.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return nil
}

// erase ends a sandbox made with snapshots off that is asked to stop: a
// stop erases it, as the docs say. It is deleted first (gone from the API,
// its name free, an audit event saying why), then its VM and disk are
// removed: never paused for a warm window, since nothing of it may be
// kept; then its stop completes. A restart halfway finishes the job: the
// deleted sandbox is removed like any other.
func (c *Controller) erase(ctx context.Context, sb *store.Sandbox) (time.Time, bool, error) {
	now := c.now()
	detail := map[string]string{"reason": "stopped with snapshots off: a stop erases the sandbox"}
	if sb.PendingStopID != "" {
		detail["stop_id"] = sb.PendingStopID
	}
	err := c.o.Store.DeleteSandbox(ctx, sb.ID, now, &store.AuditEvent{AccountID: sb.AccountID, At: now, Action: "sandbox.delete",
		Target: sb.Name, Actor: "snapshots-off", Detail: detail})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return time.Time{}, false, fmt.Errorf("erase: %w", err)
	}
	sb.DeletedAt = &now
	if err := c.remove(ctx, sb); err != nil {
		return time.Time{}, false, fmt.Errorf("erase: %w", err)
	}
	c.o.Logger.Info("sandbox erased (stopped with snapshots off)", slog.String("sandbox", sb.ID))
	return time.Time{}, true, nil
}

// place asks the store to place an unplaced sandbox (on the host with
// the most room, see store.PickHost) and reports whether it came here.
// Another host's controller follows one placed there; one no host has
// room for waits for the rescan.
func (c *Controller) place(ctx context.Context, sb *store.Sandbox) (bool, error) {
	now := c.now()
	c.mu.Lock()
	stale := now.Sub(c.seen) > c.o.DownAfter/2
	c.mu.Unlock()
	if stale {
		// Not beaten lately (a slow store, a clock that jumped): beat
		// first, or this host would not count as live.
		if err := c.beat(ctx); err != nil {
			return false, err
		}
	}
	up, err := c.o.Store.PlaceSandbox(ctx, sb.ID, now.Add(-c.o.DownAfter))
	if err != nil {
		return false, err
	}
	*sb = up
	return up.HostID == c.hostID, nil
}

// observe writes observed fields; it never touches intent.
func (c *Controller) observe(ctx context.Context, id string, fn func(*store.Sandbox)) (store.Sandbox, error) {
	return c.o.Store.UpdateSandbox(ctx, id, func(s *store.Sandbox, _ *store.AuditEvent) error { fn(s); return nil }, nil)
}

// run handles a sandbox that should be running.
func (c *Controller) run(ctx context.Context, sb *store.Sandbox, w *worker, now time.Time) (time.Time, bool, error) {
	c.mu.Lock()
	delete(c.released, sb.ID)
	c.mu.Unlock()
	if sb.State == store.StateRunning {
		if reason, due := c.stopDue(sb, now); due {
			_, err := c.o.Store.StopSandbox(ctx, sb.ID, now, &store.AuditEvent{AccountID: sb.AccountID, At: now, Action: "sandbox.stop", Target: sb.Name, Actor: reason})
			return time.Time{}, false, err
		}
		if !w.adopted {
			// First look since this process started: make sure the driver
			// really runs it (after a restart it may not), and adopt it.
			keys, err := c.accountKeys(ctx, sb)
			if err != nil {
				return time.Time{}, false, err
			}
			ep, err := c.o.Driver.Start(ctx, sb, keys)
			if err != nil {
				return c.fail(ctx, sb, w, err)
			}
			w.adopted, w.portsOpen = true, false
			if ep.Host != sb.SSHHost || ep.Port != sb.SSHPort || ep.HostKey != sb.SSHHostKey || ep.IPv6 != sb.IPv6 {
				if _, err := c.observe(ctx, sb.ID, func(s *store.Sandbox) {
					s.SSHHost, s.SSHPort, s.SSHHostKey, s.IPv6 = ep.Host, ep.Port, ep.HostKey, ep.IPv6
				}); err != nil {
					return time.Time{}, false, err
				}
			}
		}
		if ch, ok := c.o.Driver.(Checker); ok {
			if err := ch.Check(ctx, sb); err != nil {
				return c.fail(ctx, sb, w, err)
			}
		}
		if err := c.openPorts(ctx, sb, w); err != nil {
			return time.Time{}, false, err // logged, and tried again soon
		}
		if due := c.snapshotDue(sb); !due.IsZero() && !now.Before(due) {
			if err := c.autoSnapshot(ctx, sb, store.SnapshotHourly); err != nil {
				return time.Time{}, false, err
			}
		}
		if sb.SetupStatus == store.SetupRunning {
			res, err := c.lookSetup(ctx, sb, lookTimeout)
			if err != nil {
				if ctx.Err() != nil {
					return time.Time{}, false, ctx.Err()
				}
				c.o.Logger.Warn("setup: the sandbox did not answer a look", slog.String("sandbox", sb.ID), slog.String("error", err.Error()))
			}
			if res.status != store.SetupRunning {
				if err := c.recordSetup(ctx, sb, res); err != nil {
					return time.Time{}, false, err
				}
				sb.SetupStatus = res.status
			}
		}
		return c.nextLook(sb, now), false, nil
	}
	if sb.State == store.StateError && sb.UpdatedAt.Equal(w.failedAt) {
		return time.Time{}, false, nil // wait for a new start
	}
	if sb.DiskExpiredAt != nil {
		// The API and auto-start refuse; a start that came anyway must not
		// boot a fresh disk in its place.
		return c.fail(ctx, sb, w, errors.New(store.DiskExpiredMessage))
	}
	if sb.ForkOf != "" {
		if err := c.fork(ctx, sb); err != nil {
			return c.fail(ctx, sb, w, err)
		}
	}
	pinned := sb.SSHHostKey
	if km, ok := c.o.Driver.(KeyMaker); ok {
		key, err := km.HostKey(ctx, sb)
		if err != nil {
			return c.fail(ctx, sb, w, err)
		}
		pinned = key
	}
	keys, err := c.accountKeys(ctx, sb)
	if err != nil {
		return time.Time{}, false, err
	}
	if _, err := c.observe(ctx, sb.ID, func(s *store.Sandbox) {
		s.State, s.Error, s.SSHHostKey, s.StartStage = store.StateStarting, "", pinned, ""
		s.SetupStatus, s.SetupError, s.SetupJob = "", "", ""
	}); err != nil {
		return time.Time{}, false, err
	}
	sctx, ended := c.startProgress(ctx, sb.ID)
	ep, err := c.o.Driver.Start(sctx, sb, keys)
	ended() // a failed start keeps the stage it failed in
	if err != nil {
		return c.fail(ctx, sb, w, err)
	}
	w.adopted, w.portsOpen = true, false
	// Its open ports, before it counts as running.
	if err := c.openPorts(ctx, sb, w); err != nil {
		return c.fail(ctx, sb, w, err)
	}
	// The account's environment, before the sandbox counts as running.
	setup, err := c.startSetup(ctx, sb, ep)
	if err != nil {
		return time.Time{}, false, err
	}
	start := c.now()
	up, err := c.observe(ctx, sb.ID, func(s *store.Sandbox) {
		s.State, s.Error, s.StartStage = store.StateRunning, "", ""
		s.SetupStatus, s.SetupError, s.SetupJob = setup.status, setup.err, setup.job
		if setup.firstBoot {
			s.FirstBoot = nil // applied: forgotten
		}
		s.SSHHost, s.SSHPort, s.SSHHostKey, s.IPv6 = ep.Host, ep.Port, ep.HostKey, ep.IPv6
		s.StartedAt, s.WarmUntil, s.AutoStopAt = &start, nil, nil
		if s.TTLSecs > 0 {
			t := start.Add(time.Duration(s.TTLSecs) * time.Second)
			s.AutoStopAt = &t
		}
	})
	if err != nil {
		return time.Time{}, false, err
	}
	c.o.Logger.Info("sandbox running", slog.String("sandbox", sb.ID), slog.Duration("took", time.Since(now)), slog.String("setup", setup.status))
	return c.nextLook(&up, start), false, nil
}

// accountKeys are the SSH keys the sandbox's account has now.
func (c *Controller) accountKeys(ctx context.Context, sb *store.Sandbox) ([]string, error) {
	list, err := c.o.Store.SSHKeys(ctx, sb.AccountID)
	if err != nil {
		return nil, fmt.Errorf("the account's ssh keys: %w", err)
	}
	keys := make([]string, len(list))
	for i, k := range list {
		keys[i] = k.PublicKey
	}
	return keys, nil
}

// fork gives a sandbox made as a fork its source's disk, or its
// snapshot's.
func (c *Controller) fork(ctx context.Context, sb *store.Sandbox) error {
	if sb.ForkSnapshot != "" {
		s, ok := c.o.Driver.(Snapshotter)
		if !ok {
			return errors.New("this host's driver cannot fork from snapshots")
		}
		return s.ForkSnapshot(ctx, sb.ForkSnapshot, sb)
	}
	f, ok := c.o.Driver.(Forker)
	if !ok {
		return errors.New("this host's driver cannot fork sandboxes")
	}
	src, err := c.o.Store.SandboxByID(ctx, sb.ForkOf)
	if err != nil {
		return fmt.Errorf("the sandbox to fork: %w", err)
	}
	if src.HostID != sb.HostID {
		return errors.New("the sandbox to fork is on another host")
	}
	return f.Fork(ctx, &src, sb)
}

// fail records a driver error: the sandbox is in error with the reason,
// never half-running and reported as running.
func (c *Controller) fail(ctx context.Context, sb *store.Sandbox, w *worker, cause error) (time.Time, bool, error) {
	if ctx.Err() != nil {
		// hostctl is shutting down: the driver call was cut short, not the
		// sandbox broken. The next hostctl looks again.
		return time.Time{}, false, ctx.Err()
	}
	w.failedAt = sb.UpdatedAt
	w.adopted = false
	c.o.Driver.Stop(ctx, sb) // leave nothing half-started
	_, err := c.observe(ctx, sb.ID, func(s *store.Sandbox) {
		s.State, s.Error = store.StateError, cause.Error()
		if s.SetupStatus == store.SetupRunning {
			s.SetupStatus, s.SetupError = store.SetupFailed, "stopped mid-setup"
		}
	})
	return time.Time{}, false, err
}
