package hostctl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"froog.tech/froog/store"
)

// Store is what hostctl needs of the store.
type Store interface {
	store.Feed
	RegisterHost(ctx context.Context, h store.Host) (store.Host, error)
	PlaceSandbox(ctx context.Context, id string, liveSince time.Time) (store.Sandbox, error)
	MarkHostsDown(ctx context.Context, seenBefore, at time.Time) ([]store.Host, error)
	HostSandboxes(ctx context.Context, hostID string) ([]store.Sandbox, error)
	SandboxByID(ctx context.Context, id string) (store.Sandbox, error)
	UpdateSandbox(ctx context.Context, id string, fn func(*store.Sandbox, *store.AuditEvent) error, ev *store.AuditEvent) (store.Sandbox, error)
	StopSandbox(ctx context.Context, id string, at time.Time, ev *store.AuditEvent) (store.Stop, error)
	FinishStop(ctx context.Context, id, status, errMsg string, at time.Time) error
	DeleteSandbox(ctx context.Context, id string, at time.Time, ev *store.AuditEvent) error
	PurgeSandbox(ctx context.Context, id string) error
	SSHKeys(ctx context.Context, accountID string) ([]store.SSHKey, error)
	store.Snapshots
}

// Options configure a Controller. Zero values are documented per field.
type Options struct {
	Store    Store  // required
	Driver   Driver // required
	HostName string // required: the host's name in the store
	// Capacity is how many sandboxes this host takes; 0 means 16.
	Capacity int
	// Address is the address the host advertises to other machines (its
	// driver's sandboxes listen there); recorded on the host.
	Address string
	// Heartbeat is how often the host says it is alive (and looks for
	// hosts that stopped saying so); 0 means 5 seconds.
	Heartbeat time.Duration
	// DownAfter is how long a host may miss heartbeats before it is
	// marked down and its sandboxes go to error; 0 means 30 seconds. It
	// must be well above Heartbeat.
	DownAfter time.Duration
	// Rescan is how often every sandbox is looked at again, so that a
	// missed event heals; 0 means a minute.
	Rescan time.Duration
	// WarmWindow is how long a stopped sandbox stays paused before its
	// processes end; 0 means 10 minutes.
	WarmWindow time.Duration
	// MinFreeMemory is how much memory (bytes) hostctl keeps available
	// on the host: below it, warm sandboxes give up their processes, the
	// longest stopped first (see Saver). 0 means 1 GiB.
	MinFreeMemory uint64
	// MemAvailable reads the host's available memory; nil means
	// MemAvailable in /proc/meminfo.
	MemAvailable func() (uint64, error)
	// MemoryCheck is how often the available memory is read; 0 means
	// 5 seconds.
	MemoryCheck time.Duration
	// SnapshotEvery is how often a running sandbox gets an automatic
	// snapshot (with snapshots on and a Snapshotter driver); 0 means an
	// hour, as the docs say.
	SnapshotEvery time.Duration
	Logger        *slog.Logger     // nil discards
	Now           func() time.Time // nil means time.Now
}

// Controller runs one host.
type Controller struct {
	o      Options
	hostID string // set once by Run's first beat
	// following is true while the controller follows the change feed,
	// its host registered and its sandboxes looked at (Following).
	following atomic.Bool

	mu      sync.Mutex
	seen    time.Time // the last heartbeat
	workers map[string]*worker
	// releases are the warm sandboxes asked to give up their processes
	// (closed once done); released are those whose memory is saved.
	releases map[string]chan struct{}
	released map[string]bool
	wg       sync.WaitGroup
}

// worker serializes the work on one sandbox.
type worker struct {
	kick chan struct{}
	// failedAt is the intent (UpdatedAt) that last failed to start: an
	// error state is retried only when the intent changes (a new start).
	failedAt time.Time
	adopted  bool
	timer    *time.Timer
}

// New checks the options; it starts nothing.
func New(o Options) (*Controller, error) {
	var errs []error
	if o.Store == nil {
		errs = append(errs, errors.New("hostctl: a store is required"))
	}
	if o.Driver == nil {
		errs = append(errs, errors.New("hostctl: a driver is required"))
	}
	if o.HostName == "" {
		errs = append(errs, errors.New("hostctl: a host name is required"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if o.Capacity == 0 {
		o.Capacity = 16
	}
	if o.Heartbeat == 0 {
		o.Heartbeat = 5 * time.Second
	}
	if o.DownAfter == 0 {
		o.DownAfter = 30 * time.Second
	}
	if o.Rescan == 0 {
		o.Rescan = time.Minute
	}
	if o.WarmWindow == 0 {
		o.WarmWindow = 10 * time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MinFreeMemory == 0 {
		o.MinFreeMemory = 1 << 30
	}
	if o.MemAvailable == nil {
		o.MemAvailable = memAvailable
	}
	if o.MemoryCheck == 0 {
		o.MemoryCheck = 5 * time.Second
	}
	if o.SnapshotEvery == 0 {
		o.SnapshotEvery = time.Hour
	}
	return &Controller{o: o, workers: map[string]*worker{}, releases: map[string]chan struct{}{}, released: map[string]bool{}}, nil
}

func (c *Controller) now() time.Time { return store.Micro(c.o.Now()) }

// Following reports whether the controller follows the store: its host is
// registered, its sandboxes were looked at, and the change feed reaches
// it (false while the store is away). For readiness.
func (c *Controller) Following() bool { return c.following.Load() }

// Run registers the host and reconciles until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	if err := c.beat(ctx); err != nil {
		return err
	}
	defer c.wg.Wait()
	c.wg.Add(2)
	go c.watchMemory(ctx)
	go c.heartbeat(ctx)
	for ctx.Err() == nil {
		err := c.watch(ctx)
		if ctx.Err() != nil {
			return nil
		}
		c.o.Logger.Warn("change feed interrupted; rescanning", slog.String("error", err.Error()))
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	return nil
}

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
		now := c.now()
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
			w.adopted = true
			if ep.Host != sb.SSHHost || ep.Port != sb.SSHPort || ep.HostKey != sb.SSHHostKey {
				if _, err := c.observe(ctx, sb.ID, func(s *store.Sandbox) { s.SSHHost, s.SSHPort, s.SSHHostKey = ep.Host, ep.Port, ep.HostKey }); err != nil {
					return time.Time{}, false, err
				}
			}
		}
		if ch, ok := c.o.Driver.(Checker); ok {
			if err := ch.Check(ctx, sb); err != nil {
				return c.fail(ctx, sb, w, err)
			}
		}
		if due := c.snapshotDue(sb); !due.IsZero() && !now.Before(due) {
			if err := c.autoSnapshot(ctx, sb, store.SnapshotHourly); err != nil {
				return time.Time{}, false, err
			}
		}
		return c.nextRun(sb), false, nil
	}
	if sb.State == store.StateError && sb.UpdatedAt.Equal(w.failedAt) {
		return time.Time{}, false, nil // wait for a new start
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
	if _, err := c.observe(ctx, sb.ID, func(s *store.Sandbox) { s.State, s.Error, s.SSHHostKey = store.StateStarting, "", pinned }); err != nil {
		return time.Time{}, false, err
	}
	ep, err := c.o.Driver.Start(ctx, sb, keys)
	if err != nil {
		return c.fail(ctx, sb, w, err)
	}
	w.adopted = true
	start := c.now()
	up, err := c.observe(ctx, sb.ID, func(s *store.Sandbox) {
		s.State, s.Error = store.StateRunning, ""
		s.SSHHost, s.SSHPort, s.SSHHostKey = ep.Host, ep.Port, ep.HostKey
		s.StartedAt, s.WarmUntil, s.AutoStopAt = &start, nil, nil
		if s.TTLSecs > 0 {
			t := start.Add(time.Duration(s.TTLSecs) * time.Second)
			s.AutoStopAt = &t
		}
	})
	if err != nil {
		return time.Time{}, false, err
	}
	c.o.Logger.Info("sandbox running", slog.String("sandbox", sb.ID), slog.Duration("took", time.Since(now)))
	return c.nextRun(&up), false, nil
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
	_, err := c.observe(ctx, sb.ID, func(s *store.Sandbox) { s.State, s.Error = store.StateError, cause.Error() })
	return time.Time{}, false, err
}

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
		if _, err := c.observe(ctx, sb.ID, func(s *store.Sandbox) { s.State = store.StateStopping }); err != nil {
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
			s.State, s.StoppedAt, s.WarmUntil, s.AutoStopAt = store.StateStopped, &end, warm, nil
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
		up, err := c.observe(ctx, sb.ID, func(s *store.Sandbox) { s.State, s.StoppedAt = store.StateStopped, &now })
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
	return c.nextRest(sb), false, nil
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
	return next
}
