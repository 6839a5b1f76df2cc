package hostctl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"froog.tech/froog/store"
)

// stopDue says whether a running sandbox's auto-stop timer or hard
// lifetime has run out, and which.
func (c *Controller) stopDue(sb *store.Sandbox, now time.Time) (string, bool) {
	if sb.TTLSecs > 0 && sb.AutoStopAt != nil && !now.Before(*sb.AutoStopAt) {
		return "auto-stop", true
	}
	if sb.MaxLifetimeSecs > 0 && sb.StartedAt != nil && !now.Before(sb.StartedAt.Add(time.Duration(sb.MaxLifetimeSecs)*time.Second)) {
		return "max-lifetime", true
	}
	return "", false
}

// nextLook is nextRun, or sooner while its setup runs: every SetupPoll
// in the start's first minute, then at most every slowSetupPoll (a long
// setup costs a login that often, not every two seconds).
func (c *Controller) nextLook(sb *store.Sandbox, now time.Time) time.Time {
	next := c.nextRun(sb)
	if sb.SetupStatus == store.SetupRunning {
		every := c.o.SetupPoll
		if sb.StartedAt != nil && now.Sub(*sb.StartedAt) > time.Minute {
			every = max(every, slowSetupPoll)
		}
		if poll := now.Add(every); next.IsZero() || poll.Before(next) {
			next = poll
		}
	}
	return next
}

// nextRun is when a running sandbox next needs a look: its stop, or its
// next hourly snapshot, whichever comes first.
func (c *Controller) nextRun(sb *store.Sandbox) time.Time {
	next := c.nextStop(sb)
	if due := c.snapshotDue(sb); !due.IsZero() && (next.IsZero() || due.Before(next)) {
		next = due
	}
	return next
}

func (c *Controller) nextStop(sb *store.Sandbox) time.Time {
	var next time.Time
	if sb.TTLSecs > 0 && sb.AutoStopAt != nil {
		next = *sb.AutoStopAt
	}
	if sb.MaxLifetimeSecs > 0 && sb.StartedAt != nil {
		if t := sb.StartedAt.Add(time.Duration(sb.MaxLifetimeSecs) * time.Second); next.IsZero() || t.Before(next) {
			next = t
		}
	}
	return next
}

// rest handles a sandbox that should be stopped.
// release says the host needs the memory of this sandbox, if it is warm.
func (c *Controller) rest(ctx context.Context, sb *store.Sandbox, now time.Time, release bool) (time.Time, bool, error) {
	if store.Erasing(sb) {
		return c.erase(ctx, sb)
	}
	switch sb.State {
	case store.StateRunning, store.StateStarting, store.StateStopping:
		// Before stopping: the tunnel reaches a running sandbox only. The
		// process sample and the jobs' last copy go at once, so a stop
		// waits for the longer of the two, not their sum.
		var last *store.ProcessSample
		var wg sync.WaitGroup
		wg.Go(func() { last = c.sample(ctx, sb) })
		c.copyJobs(ctx, sb)
		wg.Wait()
		var setup setupResult
		if sb.SetupStatus == store.SetupRunning {
			setup = c.endSetup(ctx, sb, sb.State == store.StateRunning)
		}
		if _, err := c.observe(ctx, sb.ID, func(s *store.Sandbox) {
			s.State = store.StateStopping
			if setup.status != "" && s.SetupStatus == store.SetupRunning && s.SetupJob == sb.SetupJob {
				s.SetupStatus, s.SetupError, s.SetupJob = setup.status, setup.err, setup.job
			}
		}); err != nil {
			return time.Time{}, false, err
		}
		var warm *time.Time
		var err error
		if p, ok := c.o.Driver.(Pauser); ok {
			err = p.Pause(ctx, sb)
			t := c.now().Add(c.o.WarmWindow)
			warm = &t
		} else {
			err = c.o.Driver.Stop(ctx, sb)
		}
		if err == nil {
			// Each stop snapshots the disk (paused or stopped: at rest).
			err = c.autoSnapshot(ctx, sb, store.SnapshotStop)
		}
		end := c.now()
		if err != nil {
			if _, werr := c.observe(ctx, sb.ID, func(s *store.Sandbox) { s.State, s.Error = store.StateError, err.Error() }); werr != nil {
				return time.Time{}, false, werr
			}
			return time.Time{}, false, c.finishStop(ctx, sb, store.StopFailed, err.Error(), end)
		}
		up, err := c.observe(ctx, sb.ID, func(s *store.Sandbox) {
			s.State, s.StoppedAt, s.WarmUntil, s.AutoStopAt, s.StartStage = store.StateStopped, &end, warm, nil, ""
			s.LastProcesses = last // none of an earlier run
		})
		if err != nil {
			return time.Time{}, false, err
		}
		if err := c.finishStop(ctx, sb, store.StopCompleted, "", end); err != nil {
			return time.Time{}, false, err
		}
		return c.nextRest(&up), false, nil
	case store.StateCreating, store.StateError:
		// Never started, or broken: nothing runs; it is stopped.
		c.o.Driver.Stop(ctx, sb)
		up, err := c.observe(ctx, sb.ID, func(s *store.Sandbox) { s.State, s.StoppedAt, s.StartStage = store.StateStopped, &now, "" })
		if err != nil {
			return time.Time{}, false, err
		}
		return c.nextRest(&up), false, c.finishStop(ctx, sb, store.StopCompleted, "", now)
	}
	// Stopped.
	if sb.PendingStopID != "" {
		if err := c.finishStop(ctx, sb, store.StopCompleted, "", now); err != nil {
			return time.Time{}, false, err
		}
	}
	if sb.WarmUntil != nil && (!now.Before(*sb.WarmUntil) || release) {
		if err := c.coolDown(ctx, sb, now); err != nil {
			return time.Time{}, false, err
		}
	}
	if sb.DeleteAfterSecs > 0 && sb.StoppedAt != nil && !now.Before(sb.StoppedAt.Add(time.Duration(sb.DeleteAfterSecs)*time.Second)) {
		err := c.o.Store.DeleteSandbox(ctx, sb.ID, now, &store.AuditEvent{AccountID: sb.AccountID, At: now, Action: "sandbox.delete", Target: sb.Name, Actor: "auto-delete"})
		return time.Time{}, false, err
	}
	if sb.LastProcesses != nil && store.KeptProcesses(sb, now) == nil {
		if _, err := c.observe(ctx, sb.ID, func(s *store.Sandbox) { s.LastProcesses = nil }); err != nil {
			return time.Time{}, false, err
		}
	}
	if at := store.DiskExpiresAt(sb); at != nil && sb.WarmUntil == nil && !now.Before(*at) {
		if err := c.expire(ctx, sb, now); err != nil {
			return time.Time{}, false, err
		}
		return time.Time{}, false, nil
	}
	return c.nextRest(sb), false, nil
}

// errNoChange ends an update that finds nothing left to do.
var errNoChange = errors.New("nothing to change")

// expire ends a stopped sandbox's disk DiskKept after it stopped: the
// driver removes what the sandbox has on the host, its automatic
// snapshots go, and the sandbox stays, without a disk, until a restore
// from a saved snapshot gives it one (store.DiskExpiresAt).
func (c *Controller) expire(ctx context.Context, sb *store.Sandbox, now time.Time) error {
	if err := c.o.Driver.Delete(ctx, sb); err != nil {
		return fmt.Errorf("expire the disk: %w", err)
	}
	if err := c.forgetSandbox(ctx, sb); err != nil {
		return err
	}
	ev := &store.AuditEvent{AccountID: sb.AccountID, At: now, Action: store.ActionExpired, Target: sb.Name, Actor: "disk-expiry",
		Detail: map[string]string{"reason": fmt.Sprintf("stopped since %s: a stopped sandbox keeps its disk %s", sb.StoppedAt.Format(time.RFC3339), store.DiskKept)}}
	_, err := c.o.Store.UpdateSandbox(ctx, sb.ID, func(x *store.Sandbox, _ *store.AuditEvent) error {
		if store.DiskExpiresAt(x) == nil {
			return errNoChange // started, restored or expired meanwhile
		}
		x.DiskExpiredAt, x.SSHHostKey = &now, ""
		return nil
	}, ev)
	if errors.Is(err, errNoChange) {
		return nil
	}
	if err == nil {
		c.o.Logger.Info("a stopped sandbox's disk expired", slog.String("sandbox", sb.ID))
	}
	return err
}

// coolDown ends a warm sandbox's process: at the end of its warm window,
// or early when the host needs the memory. Then a driver that can save
// the paused sandbox's memory (Saver) does, and the sandbox stays warm
// until its window ends; otherwise its next start boots from the disk.
func (c *Controller) coolDown(ctx context.Context, sb *store.Sandbox, now time.Time) error {
	c.mu.Lock()
	saved := c.released[sb.ID]
	c.mu.Unlock()
	if now.Before(*sb.WarmUntil) && !saved {
		s, ok := c.o.Driver.(Saver)
		if ok {
			err := s.Save(ctx, sb)
			if err == nil {
				c.mu.Lock()
				c.released[sb.ID] = true
				c.mu.Unlock()
				c.o.Logger.Info("host low on memory: saved a warm sandbox's memory and ended its process", slog.String("sandbox", sb.ID))
				return nil
			}
			c.o.Logger.Warn("host low on memory: saving a warm sandbox failed; stopping it", slog.String("sandbox", sb.ID), slog.String("error", err.Error()))
		}
	}
	if err := c.o.Driver.Stop(ctx, sb); err != nil {
		return fmt.Errorf("end warm window: %w", err)
	}
	up, err := c.observe(ctx, sb.ID, func(s *store.Sandbox) { s.WarmUntil = nil })
	if err != nil {
		return err
	}
	c.mu.Lock()
	delete(c.released, sb.ID)
	c.mu.Unlock()
	*sb = up
	return nil
}

func (c *Controller) finishStop(ctx context.Context, sb *store.Sandbox, status, msg string, at time.Time) error {
	if sb.PendingStopID == "" {
		return nil
	}
	err := c.o.Store.FinishStop(ctx, sb.PendingStopID, status, msg, at)
	if errors.Is(err, store.ErrNotFound) {
		return nil // finished already
	}
	return err
}

func (c *Controller) nextRest(sb *store.Sandbox) time.Time {
	var next time.Time
	if sb.WarmUntil != nil {
		next = *sb.WarmUntil
	}
	if sb.DeleteAfterSecs > 0 && sb.StoppedAt != nil {
		if t := sb.StoppedAt.Add(time.Duration(sb.DeleteAfterSecs) * time.Second); next.IsZero() || t.Before(next) {
			next = t
		}
	}
	if t := store.DiskExpiresAt(sb); t != nil && (next.IsZero() || t.Before(next)) {
		next = *t
	}
	if p := store.KeptProcesses(sb, c.now()); p != nil {
		if t := p.At.Add(store.ProcessesKept); next.IsZero() || t.Before(next) {
			next = t
		}
	}
	return next
}

const (
	// sampleWait bounds the process sample a stop takes (Options.Sample),
	// made beside the copy below (as long: on a loaded host a sample can
	// take seconds, and one cut off leaves a stopped sandbox no processes
	// to show).
	sampleWait = 10 * time.Second
	// copyWait bounds the stop's copy of background commands' output
	// (Options.CopyJobs).
	copyWait = 10 * time.Second
)

// copyJobs gives a running sandbox's background commands their last
// copy into the history; a failure is logged, and the stop goes on.
func (c *Controller) copyJobs(ctx context.Context, sb *store.Sandbox) {
	if c.o.CopyJobs == nil || sb.State != store.StateRunning || sb.NoMonitoring {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, copyWait)
	defer cancel()
	if err := c.o.CopyJobs(cctx, sb); err != nil {
		c.o.Logger.Warn("a stopping sandbox's background commands could not be copied", slog.String("sandbox", sb.ID), slog.String("error", err.Error()))
	}
}

// sample is a running sandbox's last process sample, or nil: without a
// sampler, for a sandbox not running or with monitoring off, or when
// sampling fails (the stop goes on, and the sandbox keeps no sample).
func (c *Controller) sample(ctx context.Context, sb *store.Sandbox) *store.ProcessSample {
	if c.o.Sample == nil || sb.State != store.StateRunning || sb.NoMonitoring {
		return nil
	}
	sctx, cancel := context.WithTimeout(ctx, sampleWait)
	defer cancel()
	at := c.now()
	ps, err := c.o.Sample(sctx, sb.ID)
	if err != nil {
		c.o.Logger.Warn("a stopping sandbox's processes could not be read", slog.String("sandbox", sb.ID), slog.String("error", err.Error()))
		return nil
	}
	return &store.ProcessSample{At: at, Processes: ps}
}
