package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// Errors every implementation returns, wrapped with what was being done.
var (
	ErrNotFound = errors.New("not found")
	// ErrConflict: a name or host name is taken, or the record changed in a
	// way that forbids the write.
	ErrConflict = errors.New("conflict")
	// ErrLimit: a plan or product limit would be passed (see LimitError).
	ErrLimit = errors.New("limit reached")
	// ErrURLPublic: viewer tokens are for private URLs only.
	ErrURLPublic = errors.New("url is public")
	// ErrIdempotencyInUse: the first request with this key is still running.
	ErrIdempotencyInUse = errors.New("idempotency key in use")
	// ErrIdempotencyReused: the key was used with a different request.
	ErrIdempotencyReused = errors.New("idempotency key reused with another request")
	// ErrFeedGap: the subscription fell behind what the change log keeps;
	// the subscriber must reload everything and subscribe again.
	ErrFeedGap = errors.New("change feed gap: reload and resubscribe")
	// ErrKeyExpired: an expired API key cannot be rotated.
	ErrKeyExpired = errors.New("api key expired")
)

// LimitError says which limit a write would have passed. It matches
// ErrLimit with errors.Is.
type LimitError struct {
	Limit string // e.g. "sandboxes_at_once", "url_names_per_day", "starts_per_minute"
	Max   int
	// Window is the length of a rate limit's window (0 for a count, such
	// as sandboxes at once).
	Window time.Duration
	// RetryAt is when the limit next allows the write, when the store
	// knows (a rate limit); zero when it depends on something else (a
	// sandbox stopping).
	RetryAt time.Time
}

func (e *LimitError) Error() string        { return fmt.Sprintf("limit reached: %s (%d)", e.Limit, e.Max) }
func (e *LimitError) Is(target error) bool { return target == ErrLimit }

// Store is everything the API needs. Every write that takes an
// *AuditEvent records it in the same transaction (nil records nothing).
// Functions passed to Update* run inside the transaction, may run again,
// and must not have side effects beyond the values they are given.
type Store interface {
	CreateAccount(ctx context.Context, a Account) (Account, error)
	Account(ctx context.Context, id string) (Account, error)

	// CreateAPIKey adds a key: ErrNotFound without its account,
	// ErrConflict when its id or secret hash is taken.
	CreateAPIKey(ctx context.Context, k APIKey, ev *AuditEvent) (APIKey, error)
	// APIKeyByHash and APIKeyByID find a key, revoked and expired ones
	// included (the caller decides: APIKey.Live, APIKey.Vouches);
	// ErrNotFound when none.
	APIKeyByHash(ctx context.Context, secretHash string) (APIKey, error)
	APIKeyByID(ctx context.Context, id string) (APIKey, error)
	// ListAPIKeys lists an account's keys, revoked ones included, oldest
	// first.
	ListAPIKeys(ctx context.Context, accountID string) ([]APIKey, error)
	// RevokeAPIKey revokes the account's key id at at (APIKey.Revoke):
	// ErrNotFound when the account has no such key, or it is revoked.
	RevokeAPIKey(ctx context.Context, accountID, id string, at time.Time, ev *AuditEvent) (APIKey, error)
	// RotateAPIKey gives the account's key id the secret whose hash is
	// secretHash at at (APIKey.Rotate): ErrNotFound as for RevokeAPIKey,
	// ErrKeyExpired when it has expired, ErrConflict when the hash is
	// taken. The old secret finds nothing from then on.
	RotateAPIKey(ctx context.Context, accountID, id, secretHash string, at time.Time, ev *AuditEvent) (APIKey, error)
	// RecordAPIKeyUse adds n requests made by key id up to at
	// (APIKey.AddUses); ErrNotFound when there is no such key. Callers
	// batch: it is not meant to run at every request.
	RecordAPIKeyUse(ctx context.Context, id string, at time.Time, n int) error

	// CreateSSHKey adds an account's SSH key: ErrConflict when the account
	// has that key already (same fingerprint), a LimitError past
	// MaxSSHKeysPerAccount.
	CreateSSHKey(ctx context.Context, k SSHKey, ev *AuditEvent) (SSHKey, error)
	// SSHKeys lists an account's SSH keys, oldest first.
	SSHKeys(ctx context.Context, accountID string) ([]SSHKey, error)
	DeleteSSHKey(ctx context.Context, accountID, id string, ev *AuditEvent) error

	// CreateSandbox adds a sandbox; ErrConflict when the account already
	// has one of that name, a LimitError when a running desired state would
	// pass the account's sandboxes at once or one of its start limits
	// (CheckStart). Every write that starts a sandbox (StartsRunning) is
	// counted as a start at StartAt, whichever process makes it.
	CreateSandbox(ctx context.Context, sb Sandbox, ev *AuditEvent) (Sandbox, error)
	Sandbox(ctx context.Context, accountID, name string) (Sandbox, error)
	// AccountUsage reads the account, how many of its sandboxes are meant
	// to run, and its starts within StartsKept before at.
	AccountUsage(ctx context.Context, accountID string, at time.Time) (AccountUsage, error)
	SandboxByID(ctx context.Context, id string) (Sandbox, error)
	ListSandboxes(ctx context.Context, f SandboxFilter) ([]Sandbox, error)
	// UpdateSandbox reads the sandbox, applies fn and writes the result,
	// with the same checks as CreateSandbox. fn may fill in ev.
	UpdateSandbox(ctx context.Context, id string, fn func(*Sandbox, *AuditEvent) error, ev *AuditEvent) (Sandbox, error)
	// StopSandbox sets the desired state to stopped and returns the stop
	// that tracks it: the pending one when a stop is already under way.
	StopSandbox(ctx context.Context, id string, at time.Time, ev *AuditEvent) (Stop, error)
	Stop(ctx context.Context, accountID, id string) (Stop, error)
	// FinishStop records the end of a pending stop.
	FinishStop(ctx context.Context, id string, status, errMsg string, at time.Time) error
	// DeleteSandbox frees the name at once, removes the sandbox's URLs,
	// tokens and desktop links, and leaves the rest for hostctl to reap.
	DeleteSandbox(ctx context.Context, id string, at time.Time, ev *AuditEvent) error

	// RegisterHost adds a host, or refreshes the one of that name
	// (capacity, address, seen_at; it is no longer down, and stays
	// draining if it was), and returns it with its id.
	RegisterHost(ctx context.Context, h Host) (Host, error)
	// Hosts lists every host by name, each with its Sandboxes counted.
	Hosts(ctx context.Context) ([]Host, error)
	// SetHostDraining drains a host (no new placements) or undrains it;
	// ErrNotFound when no host has that name.
	SetHostDraining(ctx context.Context, name string, draining bool) (Host, error)
	// PlaceSandbox places an unplaced sandbox on a host as PickHost
	// chooses among the hosts seen since liveSince, and returns it (its
	// HostID empty when none has room); a placed one comes back as it is.
	PlaceSandbox(ctx context.Context, id string, liveSince time.Time) (Sandbox, error)
	// MarkHostsDown marks down every host not seen since seenBefore and
	// not down already: each of its sandboxes goes to error (HostDown),
	// and their pending stops end failed. It returns the hosts marked.
	MarkHostsDown(ctx context.Context, seenBefore, at time.Time) ([]Host, error)
	// HostSandboxes lists the sandboxes placed on host, and those placed
	// nowhere yet, deleted ones included (hostctl reaps them).
	HostSandboxes(ctx context.Context, hostID string) ([]Sandbox, error)
	// PurgeSandbox removes a deleted sandbox for good, once its VM is gone.
	PurgeSandbox(ctx context.Context, id string) error

	// AllURLs and AllURLTokens load every URL and every live URL token at
	// now, and AllSandboxes every sandbox not deleted: the edge's route
	// table, kept current from the feed afterwards.
	AllURLs(ctx context.Context) ([]URL, error)
	AllSandboxes(ctx context.Context) ([]Sandbox, error)
	AllURLTokens(ctx context.Context, now time.Time) ([]URLToken, error)

	// CreateDesktopLink stores a link to a sandbox's desktop or browser
	// view (its token only as Hash), and drops the sandbox's expired ones.
	CreateDesktopLink(ctx context.Context, l DesktopLink, ev *AuditEvent) (DesktopLink, error)
	// DesktopLink finds a link by its token's hash; ErrNotFound when none.
	DesktopLink(ctx context.Context, hash string) (DesktopLink, error)
	// LockDesktopLinkViewOnly makes the link with that hash view-only
	// for the rest of its life (a view-only exchange chose it) and
	// returns it; ErrNotFound when none.
	LockDesktopLinkViewOnly(ctx context.Context, hash string) (DesktopLink, error)

	// PutURL creates or changes the URL for (sandboxID, port): fn gets the
	// current one (nil when new) and returns what to store. A new host
	// name counts against the account's names per day (LimitError), a
	// taken one is ErrConflict, a new URL past MaxURLsPerSandbox is a
	// LimitError, and a URL made public loses its viewer tokens. Every
	// implementation leaves these decisions to PutURLIn.
	PutURL(ctx context.Context, sandboxID string, port int, fn func(old *URL, ev *AuditEvent) (URL, error), ev *AuditEvent) (URL, error)
	URLs(ctx context.Context, sandboxID string) ([]URL, error)
	URL(ctx context.Context, sandboxID string, port int) (URL, error)
	DeleteURL(ctx context.Context, sandboxID string, port int, ev *AuditEvent) error

	// CreateURLToken adds a viewer token: ErrURLPublic on a public URL, a
	// LimitError past MaxLiveTokensPerURL live ones.
	CreateURLToken(ctx context.Context, t URLToken, ev *AuditEvent) (URLToken, error)
	// URLTokens lists the tokens of a URL that are live at now.
	URLTokens(ctx context.Context, urlID string, now time.Time) ([]URLToken, error)
	RevokeURLToken(ctx context.Context, urlID, id string, at time.Time, ev *AuditEvent) error

	// Audit lists an account's events newest first, with ids below before
	// (0: from the newest).
	Audit(ctx context.Context, accountID string, before int64, limit int) ([]AuditEvent, error)

	// BeginIdempotent claims a key. It returns the finished record for a
	// replay, nil when the caller now owns the key, ErrIdempotencyInUse or
	// ErrIdempotencyReused. Keys older than IdempotencyWindow are forgotten.
	BeginIdempotent(ctx context.Context, rec Idempotency) (*Idempotency, error)
	FinishIdempotent(ctx context.Context, accountID, key string, status int, body []byte) error
	// AbandonIdempotent forgets a key whose request failed, so a retry
	// runs again.
	AbandonIdempotent(ctx context.Context, accountID, key string) error

	Snapshots
	Environments
	Inboxes
	Webhooks
	History
	Leases
	Feed
	Close() error
}

// SandboxFilter selects sandboxes of one account, oldest first.
type SandboxFilter struct {
	AccountID  string
	Name       string
	NamePrefix string
	States     []string
	// Labels: every entry must match; an empty value matches any value of
	// that key when the key is in LabelKeys.
	Labels    map[string]string
	LabelKeys []string
	// Names limits the result to these names, and to those created by the
	// key OrCreatedBy when it is set (a key's sandbox scope).
	Names       []string
	OrCreatedBy string
	// After is a cursor: only sandboxes after (created_at, id).
	AfterTime time.Time
	AfterID   string
	Limit     int // 0: no limit
}

// Match reports whether sb passes the filter (cursor and limit aside).
// Both implementations use it, so they agree on what a filter means.
func (f SandboxFilter) Match(sb *Sandbox) bool {
	if sb.DeletedAt != nil || sb.AccountID != f.AccountID {
		return false
	}
	if f.Name != "" && sb.Name != f.Name {
		return false
	}
	if f.NamePrefix != "" && (len(sb.Name) < len(f.NamePrefix) || sb.Name[:len(f.NamePrefix)] != f.NamePrefix) {
		return false
	}
	if len(f.States) > 0 && !contains(f.States, sb.State) {
		return false
	}
	if f.Names != nil && !contains(f.Names, sb.Name) && (f.OrCreatedBy == "" || sb.CreatedByKey != f.OrCreatedBy) {
		return false
	}
	for k, v := range f.Labels {
		if got, ok := sb.Labels[k]; !ok || got != v {
			return false
		}
	}
	for _, k := range f.LabelKeys {
		if _, ok := sb.Labels[k]; !ok {
			return false
		}
	}
	if !f.AfterTime.IsZero() {
		if sb.CreatedAt.Before(f.AfterTime) || (sb.CreatedAt.Equal(f.AfterTime) && sb.ID <= f.AfterID) {
			return false
		}
	}
	return true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// NewID returns prefix + "_" + 16 random hex digits.
func NewID(prefix string) string {
	var b [8]byte
	rand.Read(b[:])
	return prefix + "_" + hex.EncodeToString(b[:])
}

// Day is the UTC day that t falls in, as counted by per-day limits.
func Day(t time.Time) string { return t.UTC().Format("2006-01-02") }

// CertStorage is the key-value area with leases that certificate storage
// (certs) is built on. Keys are slash-separated paths.
type CertStorage interface {
	KVGet(ctx context.Context, key string) (KV, error)
	KVPut(ctx context.Context, key string, value []byte) error
	// KVDelete removes key and every key below key + "/".
	KVDelete(ctx context.Context, key string) error
	// KVList lists the keys below prefix + "/" (all of them when prefix is
	// empty), sorted.
	KVList(ctx context.Context, prefix string) ([]string, error)
	Leases
}

// Leases are named, timed leases: one owner among several processes
// does a job (a certificate's renewal, the history's copier) while it
// renews its lease.
type Leases interface {
	// AcquireLease takes or renews the lease name for owner until ttl from
	// now, and reports false when another owner holds it unexpired.
	AcquireLease(ctx context.Context, name, owner string, ttl time.Duration) (bool, error)
	// ReleaseLease ends owner's lease; another owner's lease is untouched.
	ReleaseLease(ctx context.Context, name, owner string) error
}

// StartsRunning reports whether a write that turns old into sb asks for a
// sandbox to run that was not asked to before, so it counts against the
// account's sandboxes at once.
func StartsRunning(old, sb *Sandbox) bool {
	return sb.DesiredState == StateRunning && (old == nil || old.DesiredState != StateRunning)
}

// StopStillPending reports whether st, sb's pending stop, still stands:
// a start since (desired state running again) superseded it, and then it
// ends (failed, saying so) and a new stop replaces it.
func StopStillPending(sb *Sandbox, st *Stop, at time.Time) bool {
	if sb.DesiredState == StateStopped {
		return true
	}
	st.Status, st.Error, st.EndedAt = StopFailed, "superseded: the sandbox was started again before it stopped", &at
	return false
}

// NewStop asks sb to stop (desired state stopped) and returns the stop
// that tracks it: completed at once when sb is stopped already (and has
// snapshots on: a stopped sandbox with snapshots off is still to be
// erased, and hostctl completes the stop once it is).
func NewStop(sb *Sandbox, at time.Time) Stop {
	st := Stop{ID: NewID("stop"), AccountID: sb.AccountID, SandboxID: sb.ID, Sandbox: sb.Name, Status: StopPending, RequestedAt: at,
		Labels: sb.Labels, CreatedByKey: sb.CreatedByKey}
	sb.DesiredState, sb.UpdatedAt = StateStopped, at
	if sb.State == StateStopped && !sb.NoSnapshots {
		st.Status, st.EndedAt = StopCompleted, &at
		sb.PendingStopID = ""
	} else {
		sb.PendingStopID = st.ID
	}
	return st
}

// Touch records activity on sb at at: LastActiveAt moves forward to at,
// never back (a touch from a process whose clock is behind changes
// nothing). Nothing else changes, UpdatedAt included: that is the intent
// hostctl acts on, and a touch is no intent.
func Touch(sb *Sandbox, at time.Time) {
	at = Micro(at)
	if sb.LastActiveAt == nil || at.After(*sb.LastActiveAt) {
		sb.LastActiveAt = &at
	}
}

// Erasing reports whether sb is to be erased: made with snapshots off and
// asked to stop. Nothing starts it again (a start is refused), and
// hostctl removes its VM and disk and deletes it, then completes its stop.
func Erasing(sb *Sandbox) bool {
	return sb.NoSnapshots && sb.DesiredState == StateStopped && sb.DeletedAt == nil
}

// NewSecret returns a new random secret with prefix: 32 random bytes,
// base64url.
func NewSecret(prefix string) string {
	var b [32]byte
	rand.Read(b[:])
	return prefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// HashSecret is how a secret is kept: hex SHA-256.
func HashSecret(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

// Micro is t in UTC to the microsecond, the precision every store keeps.
func Micro(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }
