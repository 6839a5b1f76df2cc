package hostctl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"froog.tech/froog/store"
)

// reapID is the worker that removes deleted snapshots' files (it is no
// sandbox's: a saved snapshot outlives its sandbox).
const reapID = "reap:snapshots"

// snapshotDue is when a running sandbox's next hourly snapshot is due
// (zero: none is, snapshots are off or the driver takes none).
func (c *Controller) snapshotDue(sb *store.Sandbox) time.Time {
	if _, ok := c.o.Driver.(Snapshotter); !ok || sb.NoSnapshots || sb.StartedAt == nil {
		return time.Time{}
	}
	from := *sb.StartedAt
	if sb.SnapshotAt != nil && sb.SnapshotAt.After(from) {
		from = *sb.SnapshotAt
	}
	return from.Add(c.o.SnapshotEvery)
}

// autoSnapshot takes an automatic snapshot of sb (reason: hourly, stop or
// restore), then keeps the newest AutoSnapshotsKept. Snapshots off, or a
// driver that takes none: nothing.
func (c *Controller) autoSnapshot(ctx context.Context, sb *store.Sandbox, reason string) error {
	if _, ok := c.o.Driver.(Snapshotter); !ok || sb.NoSnapshots {
		return nil
	}
	now := c.now()
	sn, err := c.o.Store.CreateSnapshot(ctx, store.Snapshot{ID: store.NewID("snap"), AccountID: sb.AccountID, SandboxID: sb.ID, Sandbox: sb.Name,
		HostID: c.hostID, Reason: reason, OS: sb.OS, Size: sb.Size, Status: store.SnapshotCreating, CreatedAt: now}, nil)
	if err != nil {
		return fmt.Errorf("automatic snapshot: %w", err)
	}
	if _, err := c.observe(ctx, sb.ID, func(s *store.Sandbox) { s.SnapshotAt = &now }); err != nil {
		return err
	}
	sb.SnapshotAt = &now
	return c.take(ctx, sb, &sn)
}

// take copies sb's disk to sn (status creating) and records the outcome.
// A saved snapshot replaces the account's ones of its label that were
// asked before it (store.AskedBefore), whichever sandbox they are of, and
// gives way itself to one asked after it that is ready already: the API
// decided, when each was asked, that its key could replace the ones there
// then (a key limited to some sandboxes never replaces another's), so a
// copy never replaces one asked later. An automatic one ends the oldest
// past AutoSnapshotsKept, and the failed automatic ones.
func (c *Controller) take(ctx context.Context, sb *store.Sandbox, sn *store.Snapshot) error {
	s, ok := c.o.Driver.(Snapshotter)
	if !ok {
		_, err := c.o.Store.UpdateSnapshot(ctx, sn.ID, func(x *store.Snapshot) error {
			x.Status, x.Error = store.SnapshotFailed, "this host's driver takes no snapshots"
			return nil
		}, nil)
		return err
	}
	began := time.Now()
	n, err := s.Snapshot(ctx, sb, sn.ID)
	if err != nil && ctx.Err() != nil {
		return ctx.Err() // cut short by a shutdown: the next hostctl takes it again
	}
	ready := c.now()
	up, uerr := c.o.Store.UpdateSnapshot(ctx, sn.ID, func(x *store.Snapshot) error {
		if err != nil {
			x.Status, x.Error = store.SnapshotFailed, err.Error()
			return nil
		}
		x.Status, x.Bytes, x.ReadyAt = store.SnapshotAvailable, n, &ready
		return nil
	}, nil)
	if uerr != nil {
		return uerr
	}
	if err != nil {
		c.o.Logger.Error("snapshot failed", slog.String("sandbox", sb.ID), slog.String("snapshot", sn.ID), slog.String("error", err.Error()))
		return nil // recorded on the snapshot; the sandbox is fine
	}
	c.o.Logger.Info("snapshot taken", slog.String("sandbox", sb.ID), slog.String("snapshot", sn.ID), slog.Duration("took", time.Since(began)))
	var old []store.Snapshot
	if up.Saved && up.Label != "" {
		list, err := c.o.Store.ListSnapshots(ctx, store.SnapshotFilter{AccountID: up.AccountID, SavedOnly: true, Label: up.Label})
		if err != nil {
			return err
		}
		superseded := false
		for _, o := range list {
			switch {
			case o.ID == up.ID || o.Status == store.SnapshotCreating:
			case store.AskedBefore(&o, &up):
				old = append(old, o)
			case o.Status == store.SnapshotAvailable: // a failed one holds nothing
				superseded = true
			}
		}
		if superseded {
			old = append(old, up)
		}
	} else if !up.Saved {
		list, err := c.o.Store.ListSnapshots(ctx, store.SnapshotFilter{AccountID: up.AccountID, SandboxID: sb.ID})
		if err != nil {
			return err
		}
		kept := 0
		for _, o := range list { // newest first
			if o.Saved || o.Status == store.SnapshotCreating {
				continue
			}
			if o.Status == store.SnapshotFailed { // holds nothing; the log said why
				old = append(old, o)
				continue
			}
			if kept++; kept > store.AutoSnapshotsKept {
				old = append(old, o)
			}
		}
	}
	return c.deleteSnapshots(ctx, old)
}

// deleteSnapshots marks snapshots deleted; the reaper removes their files.
func (c *Controller) deleteSnapshots(ctx context.Context, list []store.Snapshot) error {
	if len(list) == 0 {
		return nil
	}
	now := c.now()
	for _, o := range list {
		_, err := c.o.Store.UpdateSnapshot(ctx, o.ID, func(x *store.Snapshot) error {
			if x.DeletedAt == nil {
				x.DeletedAt = &now
			}
			return nil
		}, nil)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
	}
	c.kick(ctx, reapID)
	return nil
}

// pendingSnapshots takes the snapshots asked of sb (saved ones the API
// wrote, or automatic ones a restart cut short).
func (c *Controller) pendingSnapshots(ctx context.Context, sb *store.Sandbox) error {
	list, err := c.o.Store.ListSnapshots(ctx, store.SnapshotFilter{AccountID: sb.AccountID, SandboxID: sb.ID, Status: store.SnapshotCreating})
	if err != nil {
		return err
	}
	for i := len(list) - 1; i >= 0; i-- { // oldest first
		if list[i].HostID != c.hostID {
			continue
		}
		if err := c.take(ctx, sb, &list[i]); err != nil {
			return err
		}
	}
	return nil
}

// restore rolls sb's disk back to the snapshot sb.RestoreFrom: the VM
// stops (a restore never writes under a running VM), the current disk is
// kept as an automatic snapshot (so the restore can be undone), the
// snapshot's disk replaces it, and the sandbox boots again if it is meant
// to run. A restore that cannot be done leaves the disk as it was and the
// sandbox in error, saying why.
func (c *Controller) restore(ctx context.Context, sb *store.Sandbox, w *worker) error {
	snapID := sb.RestoreFrom
	var err error
	s, ok := c.o.Driver.(Snapshotter)
	if !ok {
		err = errors.New("this host's driver cannot restore snapshots")
	}
	var sn store.Snapshot
	if err == nil {
		sn, err = c.o.Store.Snapshot(ctx, sb.AccountID, snapID)
	}
	switch {
	case err != nil:
	case sn.DeletedAt != nil:
		err = fmt.Errorf("snapshot %s was deleted", snapID)
	case sn.Status != store.SnapshotAvailable:
		err = fmt.Errorf("snapshot %s is %s", snapID, sn.Status)
	case sn.HostID != c.hostID:
		err = fmt.Errorf("snapshot %s is on another host", snapID)
	}
	if err == nil {
		w.adopted = false
		if err = c.o.Driver.Stop(ctx, sb); err == nil {
			if sb.State != store.StateCreating && sb.DiskExpiredAt == nil { // a disk to keep
				err = c.autoSnapshot(ctx, sb, store.SnapshotRestore)
			}
		}
		if err == nil {
			err = s.Restore(ctx, sb, snapID)
		}
	}
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	now := c.now()
	up, uerr := c.o.Store.UpdateSandbox(ctx, sb.ID, func(x *store.Sandbox, _ *store.AuditEvent) error {
		if x.RestoreFrom == snapID {
			x.RestoreFrom = ""
		}
		x.WarmUntil = nil
		if err != nil {
			x.State, x.Error = store.StateError, "restore: "+err.Error()
		} else {
			if x.State != store.StateStopped || x.StoppedAt == nil || x.DiskExpiredAt != nil {
				x.StoppedAt = &now // a disk given back keeps its 14 days from now
			}
			x.State, x.Error, x.DiskExpiredAt = store.StateStopped, "", nil
		}
		return nil
	}, nil)
	if uerr != nil {
		return uerr
	}
	if err != nil {
		w.failedAt = up.UpdatedAt
		c.o.Logger.Error("restore failed", slog.String("sandbox", sb.ID), slog.String("snapshot", snapID), slog.String("error", err.Error()))
	} else {
		c.o.Logger.Info("restored", slog.String("sandbox", sb.ID), slog.String("snapshot", snapID))
	}
	return nil
}

// forgetSandbox marks a deleted sandbox's automatic snapshots deleted,
// and the saved ones it can no longer take; its saved ones stay.
func (c *Controller) forgetSandbox(ctx context.Context, sb *store.Sandbox) error {
	list, err := c.o.Store.ListSnapshots(ctx, store.SnapshotFilter{AccountID: sb.AccountID, SandboxID: sb.ID})
	if err != nil {
		return err
	}
	var auto []store.Snapshot
	for _, sn := range list {
		if !sn.Saved || sn.Status == store.SnapshotCreating {
			auto = append(auto, sn)
		}
	}
	return c.deleteSnapshots(ctx, auto)
}

// reap removes the files of this host's deleted snapshots, then their
// records.
func (c *Controller) reap(ctx context.Context) error {
	list, err := c.o.Store.HostSnapshots(ctx, c.hostID)
	if err != nil {
		return err
	}
	s, _ := c.o.Driver.(Snapshotter)
	for _, sn := range list {
		if sn.DeletedAt == nil {
			continue
		}
		if s != nil {
			if err := s.DeleteSnapshot(ctx, sn.ID); err != nil {
				return fmt.Errorf("delete snapshot %s: %w", sn.ID, err)
			}
		}
		if err := c.o.Store.PurgeSnapshot(ctx, sn.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
	}
	return nil
}
