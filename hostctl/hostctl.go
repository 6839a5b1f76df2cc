package hostctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ssh"

	"froog.tech/froog/internal/seal"
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
	// URLs lists a sandbox's URLs: the public ones' ports are open.
	URLs(ctx context.Context, sandboxID string) ([]store.URL, error)
	Environment(ctx context.Context, accountID string) (store.Environment, error)
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
	// Sample reads a running sandbox's busiest processes, kept as its last
	// sample when it stops (store.ProcessSample); nil keeps none. A stop
	// waits for it at most sampleWait, and goes on without it.
	Sample func(ctx context.Context, sandboxID string) (json.RawMessage, error)
	// CopyJobs copies the output of a running sandbox's background
	// commands into its command history before it stops (package
	// history: Copier.CopyOpen); nil copies nothing. A stop waits for it
	// at most copyWait, and goes on without it.
	CopyJobs func(ctx context.Context, sb *store.Sandbox) error
	// ControlKey is the control plane's SSH key: at each start hostctl
	// logs in with it to write the account's environment (setup.go).
	// nil: nothing is written, and a sandbox whose account has repos,
	// secret files or a setup script gets setup_status failed.
	ControlKey ssh.Signer
	// SecretKey is the deployment's 32-byte secret key, the API's, which
	// opens the account's secret files, setup script and variables. nil:
	// a sandbox whose account has secret files or a setup script gets
	// setup_status failed, saying this host has no key for them (repos
	// alone are cloned, without the variables).
	SecretKey []byte
	// SetupPoll is how often a running sandbox's setup is looked at
	// while it runs; 0 means 2 seconds.
	SetupPoll time.Duration
	Logger    *slog.Logger     // nil discards
	Now       func() time.Time // nil means time.Now
}

// Controller runs one host.
type Controller struct {
	o      Options
	sealer *seal.Sealer // nil without Options.SecretKey
	hostID string       // set once by Run's first beat
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
	// urlOwners maps the URLs of sandboxes whose ports were opened to
	// their sandbox: a removed URL's change names only the URL.
	urlOwners map[string]string
	wg        sync.WaitGroup
}

// worker serializes the work on one sandbox.
type worker struct {
	kick chan struct{}
	// failedAt is the intent (UpdatedAt) that last failed to start: an
	// error state is retried only when the intent changes (a new start).
	failedAt time.Time
	adopted  bool
	timer    *time.Timer
	// ports are what the driver last opened (Firewall), portsOpen
	// whether it did since the sandbox last started.
	ports     []store.Port
	portsOpen bool
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
	var sealer *seal.Sealer
	if o.SecretKey != nil {
		var err error
		if sealer, err = seal.New(o.SecretKey); err != nil {
			errs = append(errs, fmt.Errorf("hostctl: %w", err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if o.SetupPoll == 0 {
		o.SetupPoll = 2 * time.Second
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
	return &Controller{o: o, sealer: sealer, workers: map[string]*worker{}, releases: map[string]chan struct{}{}, released: map[string]bool{},
		urlOwners: map[string]string{}}, nil
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
