package store

import (
	"net/netip"
	"sort"
	"time"
)

// Sandbox states, desired and observed.
const (
	StateCreating = "creating"
	StateStarting = "starting"
	StateRunning  = "running"
	StateStopping = "stopping"
	StateStopped  = "stopped"
	StateError    = "error"
	// StateDeleted is only ever a desired state: the sandbox is gone from
	// the API at once and hostctl removes what is left of it.
	StateDeleted = "deleted"
)

// Stop statuses.
const (
	StopPending   = "pending"
	StopCompleted = "completed"
	StopFailed    = "failed"
)

// Product limits that the store enforces inside its transactions, so that
// concurrent writers cannot overshoot them.
const (
	MaxURLsPerSandbox    = 50
	MaxLiveTokensPerURL  = 100
	MaxSSHKeysPerAccount = 20
	// IdempotencyWindow is how long an Idempotency-Key is remembered.
	IdempotencyWindow = 24 * time.Hour
)

// Account is a customer, with the limits of its plan.
type Account struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// MaxSandboxes is how many sandboxes may be running (desired) at once.
	MaxSandboxes int `json:"max_sandboxes"`
	// URLNamesPerDay is how many new public-URL host names the account may
	// take in one UTC day.
	URLNamesPerDay int `json:"url_names_per_day"`
	// StartsPerMinute, StartsPerHour and StartsPerDay are its start
	// limits; 0 means the docs' (see StartWindows).
	StartsPerMinute int `json:"starts_per_minute,omitempty"`
	StartsPerHour   int `json:"starts_per_hour,omitempty"`
	StartsPerDay    int `json:"starts_per_day,omitempty"`
	// SavedSnapshotsIncluded is how many saved snapshots its plan
	// includes; 0 means the docs' DefaultSavedSnapshotsIncluded. Only
	// shown (GET /v1/limits): billing lives in froog's control plane.
	SavedSnapshotsIncluded int       `json:"saved_snapshots_included,omitempty"`
	CreatedAt              time.Time `json:"created_at"`
}

// APIKey is an API key. Only the SHA-256 of its secret is kept.
type APIKey struct {
	ID         string            `json:"id"`
	AccountID  string            `json:"account_id"`
	Name       string            `json:"name"`
	SecretHash string            `json:"secret_hash"` // hex SHA-256
	Actions    []string          `json:"actions"`
	Sandboxes  []string          `json:"sandboxes,omitempty"` // names; empty: any
	Labels     map[string]string `json:"labels,omitempty"`    // required labels
	ExpiresAt  *time.Time        `json:"expires_at,omitempty"`
	RevokedAt  *time.Time        `json:"revoked_at,omitempty"`
	// RotatedAt is when the key last got a new secret: what it minted
	// before (signed links, desktop sessions) no longer stands (Vouches).
	RotatedAt *time.Time `json:"rotated_at,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	// LastUsedAt and Uses (requests per UTC day, the last UsesKept days)
	// are written in batches by RecordAPIKeyUse, not at every request.
	LastUsedAt *time.Time     `json:"last_used_at,omitempty"`
	Uses       map[string]int `json:"uses,omitempty"`
}

// SSHKey is a public key that may log in as user to every sandbox of its
// account, from each sandbox's next start on.
type SSHKey struct {
	ID        string `json:"id"`
	AccountID string `json:"account_id"`
	Name      string `json:"name"`
	// PublicKey is one authorized_keys line: type, key and comment, no
	// options.
	PublicKey   string    `json:"public_key"`
	Fingerprint string    `json:"fingerprint"` // SHA256:…, unique per account
	CreatedAt   time.Time `json:"created_at"`
}

// Host is a machine that runs sandboxes.
type Host struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Capacity int    `json:"capacity"` // sandboxes it can run at once
	// Address is where other machines reach this host's sandboxes (the
	// address its controller advertises); empty on a single machine.
	Address   string    `json:"address,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	SeenAt    time.Time `json:"seen_at"` // its controller's last heartbeat
	// Draining: no new sandboxes are placed on it (an operator's choice,
	// kept across its controller's restarts).
	Draining bool `json:"draining,omitempty"`
	// DownAt: marked down, its heartbeat missed; the next heartbeat
	// clears it.
	DownAt *time.Time `json:"down_at,omitempty"`
	// Sandboxes is how many sandboxes are placed on it, deleted ones
	// aside (filled in by Hosts, not stored).
	Sandboxes int `json:"-"`
}

// Sandbox is one VM: its intent (desired state and settings, written by the
// API) and what hostctl observed.
type Sandbox struct {
	ID        string `json:"id"`
	AccountID string `json:"account_id"`
	Name      string `json:"name"`
	Size      string `json:"size"`
	OS        string `json:"os"`

	DesiredState string `json:"desired_state"`
	State        string `json:"state"`
	Error        string `json:"error,omitempty"`
	// StartStage is how far the current start has got, in words, as its
	// host's driver says ("booting: the kernel", "the guest's SSH server
	// answers"): written while State is starting, kept when the start
	// fails (the stage it failed in), cleared once it runs or stops.
	StartStage string `json:"start_stage,omitempty"`

	HostID     string `json:"host_id,omitempty"`
	SSHHost    string `json:"ssh_host,omitempty"`
	SSHPort    int    `json:"ssh_port,omitempty"`
	SSHHostKey string `json:"ssh_host_key,omitempty"` // authorized_keys format
	// IPv6 is the sandbox's own IPv6 address while it runs (observed:
	// hostctl writes what its driver gave it at the start, "" when the
	// driver has none).
	IPv6 string `json:"ipv6,omitempty"`
	// Ports are the ports opened on its IPv6 address (intent), sorted,
	// each once; with its public URLs' TCP ports, at most
	// MaxPortsPerSandbox. Kept across stops, starts and restores, and
	// copied by forks.
	Ports []Port `json:"ports,omitempty"`

	AutoStart       bool              `json:"auto_start"`
	TTLSecs         int64             `json:"ttl_secs"` // 0: no auto-stop
	MaxLifetimeSecs int64             `json:"max_lifetime_secs"`
	DeleteAfterSecs int64             `json:"delete_after_secs"`
	Labels          map[string]string `json:"labels"`
	// EnvSealed is the sandbox's own variables, encrypted by the API (as
	// URL tokens are): the store, its change feed and its logs never hold
	// a value in the clear. EnvNames are their names, sorted, to show.
	EnvSealed []byte   `json:"env_sealed,omitempty"`
	EnvNames  []string `json:"env_names,omitempty"`
	// NoEnvironment: created with environment: false (none of the
	// account's environment; its forks get none either).
	NoEnvironment bool `json:"no_environment,omitempty"`
	// AccountEnv is the account's variables (sealed) as they were at the
	// sandbox's last start (StartEnvironment); its own variables win.
	AccountEnv []EnvVar `json:"account_env,omitempty"`
	// Repo is the repo of its own a create asked for (shown; cloned by
	// the first boot's setup only, while FirstBoot is pending).
	Repo *SandboxRepo `json:"repo,omitempty"`
	// FirstBoot is what its create asked for at its first boot alone
	// (its own files and setup script, sealed; its repo's clone): hostctl
	// applies it once and clears it. Forks never get it.
	FirstBoot *FirstBoot `json:"first_boot,omitempty"`
	// OwnFiles are the paths of the files its create wrote (not their
	// contents, which FirstBoot held): no start writes the account's
	// secret file at one of them over the sandbox's own. Forks keep it.
	OwnFiles []string `json:"own_files,omitempty"`
	// SetupStatus is how the last start's setup went (observed: hostctl
	// writes the account's secret files and runs its repos' clones and
	// setup script, see hostctl's setup.go): "" when there was nothing to
	// do, SetupRunning, SetupDone or SetupFailed, with SetupError saying
	// why. SetupJob is the background command (a job on its disk) that
	// clones and runs the script.
	SetupStatus string `json:"setup_status,omitempty"`
	SetupError  string `json:"setup_error,omitempty"`
	SetupJob    string `json:"setup_job,omitempty"`
	// NoSnapshots: created with snapshots: false, so no snapshot is ever
	// taken of it (nor a fork or restore made) and a stop erases it: its
	// VM and disk are removed, and the sandbox is deleted (see Erasing).
	NoSnapshots bool `json:"no_snapshots,omitempty"`
	// NoMonitoring: created with monitoring: false, so nothing of its
	// commands is kept (no command history) and reading its numbers
	// answers 409 monitoring_off. Forks keep it unless asked otherwise.
	NoMonitoring bool `json:"no_monitoring,omitempty"`

	// ForkOf is the sandbox whose disk this one starts from: its first
	// start copies the source's disk (hostctl asks the driver).
	ForkOf string `json:"fork_of,omitempty"`
	// ForkSnapshot, on a fork, is the snapshot (of ForkOf) whose disk it
	// starts from instead of the source's current one.
	ForkSnapshot string `json:"fork_snapshot,omitempty"`
	// RestoreFrom asks hostctl to roll the sandbox's disk back to this
	// snapshot (intent); hostctl clears it once done.
	RestoreFrom string `json:"restore_from,omitempty"`
	// SnapshotAt is when hostctl last took an automatic snapshot of it
	// (observed): the next hourly one is due an hour after this or the
	// start, whichever is later.
	SnapshotAt *time.Time `json:"snapshot_at,omitempty"`

	CreatedByKey string     `json:"created_by_key,omitempty"`
	CreatedAt    time.Time  `json:"created_at"`
	UpdatedAt    time.Time  `json:"updated_at"`
	StartedAt    *time.Time `json:"started_at,omitempty"`
	// AutoStopAt is when the auto-stop timer stops it: set at each start,
	// and moved by a change of ttl_secs while it runs.
	AutoStopAt *time.Time `json:"auto_stop_at,omitempty"`
	StoppedAt  *time.Time `json:"stopped_at,omitempty"`
	WarmUntil  *time.Time `json:"warm_until,omitempty"`
	// DiskExpiredAt is when hostctl deleted its disk, DiskKept after it
	// stopped (DiskExpiresAt); a restore that gives it one clears it.
	DiskExpiredAt *time.Time `json:"disk_expired_at,omitempty"`
	// LastProcesses is what ran as it last stopped (KeptProcesses).
	LastProcesses *ProcessSample `json:"last_processes,omitempty"`
	// LastActiveAt is the latest activity recorded on it (Touch): nil
	// until there is some. It is bookkeeping, not intent: nothing starts,
	// stops or moves a deadline because of it.
	LastActiveAt *time.Time `json:"last_active_at,omitempty"`
	// PendingStopID is the stop that is under way, if any.
	PendingStopID string `json:"pending_stop_id,omitempty"`
	// DeletedAt is set when the sandbox was deleted: its name is free and
	// the API no longer shows it, and hostctl reaps what is left.
	DeletedAt *time.Time `json:"deleted_at,omitempty"`
}

// Stop is one request to stop a sandbox and its outcome.
type Stop struct {
	ID        string `json:"id"`
	AccountID string `json:"account_id"`
	SandboxID string `json:"sandbox_id"`
	Sandbox   string `json:"sandbox"` // its name when asked
	// Labels and CreatedByKey are the sandbox's when the stop was asked:
	// what decides which keys reach the stop once a stop erased its
	// sandbox (snapshots off) and the sandbox's record is gone.
	Labels       map[string]string `json:"labels,omitempty"`
	CreatedByKey string            `json:"created_by_key,omitempty"`
	Status       string            `json:"status"`
	RequestedAt  time.Time         `json:"requested_at"`
	EndedAt      *time.Time        `json:"ended_at,omitempty"`
	Error        string            `json:"error,omitempty"`
}

// URL is a public address for one port of a sandbox.
type URL struct {
	ID        string `json:"id"`
	AccountID string `json:"account_id"`
	SandboxID string `json:"sandbox_id"`
	Port      int    `json:"port"`
	Hostname  string `json:"hostname"` // the single label under the public domain
	Public    bool   `json:"public"`
	Title     string `json:"title,omitempty"`
	// TokenHash is the hex SHA-256 of the URL's own token (private URLs).
	TokenHash string `json:"token_hash,omitempty"`
	// TokenSealed is the URL's own token encrypted by the API, so that it
	// can show the link again. The store never sees the key.
	TokenSealed []byte `json:"token_sealed,omitempty"`
	// Inbox is the URL's webhook inbox; nil: none.
	Inbox *Inbox `json:"inbox,omitempty"`
	// ShowPorts lets the edge's "nothing is listening" answer say which
	// ports do listen to anyone who may open the URL, not only to the
	// holder of the URL's own token. Off by default.
	ShowPorts bool `json:"show_ports,omitempty"`
	// Capture makes the edge keep, for the URL's owner, the headers and
	// the first bytes of the bodies of its recent exchanges (redacted, in
	// memory, bounded). Off by default; a change of public/private turns
	// it off.
	Capture bool `json:"capture,omitempty"`
	// AllowIPs, when set, are the only source addresses the URL answers:
	// the connection's, never a header's. nil: any.
	AllowIPs []netip.Prefix `json:"allow_ips,omitempty"`
	// RateLimit bounds each client address's requests to the URL; nil:
	// only the edge's own limit.
	RateLimit *RateLimit `json:"rate_limit,omitempty"`
	// FrameAncestors, when set, are the only origins that may frame the
	// URL's answers (CSP frame-ancestors, replacing the app's framing
	// rules). nil: whatever the app says.
	FrameAncestors []string `json:"frame_ancestors,omitempty"`
	// BandwidthMbit caps the bytes of the URL's request and answer bodies
	// and websockets, both ways together, in megabits a second, on each
	// edge that serves it; 0: no cap.
	BandwidthMbit int64 `json:"bandwidth_mbit,omitempty"`
	// Routes send the paths under a prefix to another port of the same
	// sandbox (one origin for a frontend and its API); every other path
	// goes to Port. nil: none.
	Routes    []PathRoute `json:"routes,omitempty"`
	CreatedAt time.Time   `json:"created_at"`
	UpdatedAt time.Time   `json:"updated_at"`
}

// PathRoute sends a URL's requests whose path starts with Prefix (as
// sent, byte for byte) to Port, the prefix kept.
type PathRoute struct {
	Prefix string `json:"prefix"`
	Port   int    `json:"port"`
}

// RateLimit is a token bucket per client address: PerSecond requests a
// second on average, Burst at once.
type RateLimit struct {
	PerSecond float64 `json:"per_second"`
	Burst     int     `json:"burst"`
}

// URLToken is a viewer token of a private URL.
type URLToken struct {
	ID        string     `json:"id"`
	URLID     string     `json:"url_id"`
	Hash      string     `json:"hash"` // hex SHA-256
	Label     string     `json:"label,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt time.Time  `json:"expires_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
}

// Live reports whether the token still opens its URL at now.
func (t URLToken) Live(now time.Time) bool {
	return t.RevokedAt == nil && now.Before(t.ExpiresAt)
}

// DesktopLink is a link to a sandbox's desktop or browser view.
type DesktopLink struct {
	ID        string `json:"id"`
	AccountID string `json:"account_id,omitempty"` // a wall's; its SandboxID is empty
	SandboxID string `json:"sandbox_id"`
	Hash      string `json:"hash"` // hex SHA-256 of the dt_ token
	Kind      string `json:"kind"` // desktop, browser or wall
	ViewOnly  bool   `json:"view_only"`
	// Profile is the browser view's Chromium profile folder ("" for the
	// default; desktop links have none).
	Profile string `json:"profile,omitempty"`
	// Run is the run of the sandbox the link was made in (its StartedAt
	// then): the link opens nothing once the sandbox has stopped, even
	// if it was started again. Zero for a wall's.
	Run time.Time `json:"run,omitzero"`
	// KeyID is the API key that made the link (for a wall's Use and
	// Open, the key that made the wall's link); its sessions carry it.
	KeyID     string    `json:"key_id,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
}

// AuditEvent is one entry of an account's audit log.
type AuditEvent struct {
	ID         int64             `json:"id"`
	AccountID  string            `json:"account_id"`
	At         time.Time         `json:"at"`
	Action     string            `json:"action"`
	Target     string            `json:"target"`
	Actor      string            `json:"actor"`
	ActorLabel string            `json:"actor_label,omitempty"`
	IP         string            `json:"ip,omitempty"`
	RequestID  string            `json:"request_id,omitempty"`
	Detail     map[string]string `json:"detail,omitempty"`
}

// Idempotency records the outcome of a request sent with an
// Idempotency-Key. Status 0 means the first request is still running.
type Idempotency struct {
	AccountID string `json:"account_id"`
	Key       string `json:"key"`
	// KeyID is the API key that sent the first request: its answer is
	// replayed to a key that reaches what it made.
	KeyID       string    `json:"key_id,omitempty"`
	RequestHash string    `json:"request_hash"`
	Status      int       `json:"status"`
	Body        []byte    `json:"body,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
}

// KV is one entry of the key-value area (certificate storage).
type KV struct {
	Key      string    `json:"key"`
	Value    []byte    `json:"value"`
	Modified time.Time `json:"modified"`
}

// LiveTokens keeps the tokens live at now, oldest first.
func LiveTokens(all []URLToken, now time.Time) []URLToken {
	var out []URLToken
	for _, t := range all {
		if t.Live(now) {
			out = append(out, t)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out
}
