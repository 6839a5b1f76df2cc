package store

import (
	"context"
	"sort"
	"time"
)

// Snapshot statuses.
const (
	SnapshotCreating  = "creating"
	SnapshotAvailable = "available"
	SnapshotFailed    = "failed"
)

// Why an automatic snapshot was taken.
const (
	SnapshotHourly  = "hourly"
	SnapshotStop    = "stop"
	SnapshotRestore = "restore" // the state a restore replaced, so it can be undone
)

// AutoSnapshotsKept is how many automatic snapshots a sandbox keeps.
const AutoSnapshotsKept = 3

// The docs' saved snapshot allowance: the first 10 are included, and each
// one past that costs PricePerExtraSavedSnapshotDayUSD a day (charged by
// froog's control plane, not here).
const (
	DefaultSavedSnapshotsIncluded    = 10
	PricePerExtraSavedSnapshotDayUSD = 0.056
)

// SavedIncluded is how many saved snapshots a's plan includes.
func (a Account) SavedIncluded() int {
	if a.SavedSnapshotsIncluded > 0 {
		return a.SavedSnapshotsIncluded
	}
	return DefaultSavedSnapshotsIncluded
}

// SavedKept counts the saved snapshots an account keeps, given its saved
// snapshot records: one per name (a name saved again replaces the older
// copy once the new one is ready), each unnamed one, none that failed.
func SavedKept(list []Snapshot) int {
	n, names := 0, map[string]bool{}
	for _, sn := range list {
		switch {
		case !sn.Saved || sn.DeletedAt != nil || sn.Status == SnapshotFailed:
		case sn.Label == "":
			n++
		case !names[sn.Label]:
			names[sn.Label] = true
			n++
		}
	}
	return n
}

// Snapshot is a copy of one sandbox's disk, kept on the host that runs
// the sandbox. The API writes a saved one as intent (status creating);
// hostctl copies the disk and reports available or failed, and takes the
// automatic ones itself. A deleted snapshot (DeletedAt set) is gone from
// the API at once, and hostctl removes its files and then the record.
type Snapshot struct {
	ID        string `json:"id"`
	AccountID string `json:"account_id"`
	SandboxID string `json:"sandbox_id"`
	Sandbox   string `json:"sandbox"` // the sandbox's name when it was taken
	HostID    string `json:"host_id"`
	// Saved snapshots are kept until deleted, also after their sandbox
	// is deleted; automatic ones (Saved false) are the newest
	// AutoSnapshotsKept of their sandbox, and go with it.
	Saved  bool   `json:"saved"`
	Label  string `json:"label,omitempty"`  // a saved snapshot's name, unique among the account's once available
	Reason string `json:"reason,omitempty"` // an automatic one's: hourly, stop or restore
	OS     string `json:"os"`
	Size   string `json:"size"`
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
	// EnvSealed is, on a saved snapshot, its sandbox's own variables when
	// it was saved, encrypted by the API as a sandbox's are: a sandbox
	// made from the snapshot gets them unless its create sends its own.
	EnvSealed []byte `json:"env_sealed,omitempty"`
	// Bytes is how much the copy takes on the host, once available.
	Bytes     int64      `json:"bytes,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	ReadyAt   *time.Time `json:"ready_at,omitempty"`
	DeletedAt *time.Time `json:"deleted_at,omitempty"`
}

// SnapshotFilter selects snapshots of one account that are not deleted,
// newest first.
type SnapshotFilter struct {
	AccountID string
	SandboxID string // "": every sandbox's
	SavedOnly bool
	Label     string // "": any
	Status    string // "": any
}

// Match reports whether sn passes the filter. Both implementations use it.
func (f SnapshotFilter) Match(sn *Snapshot) bool {
	return sn.DeletedAt == nil && sn.AccountID == f.AccountID &&
		(f.SandboxID == "" || sn.SandboxID == f.SandboxID) && (!f.SavedOnly || sn.Saved) &&
		(f.Label == "" || sn.Label == f.Label) && (f.Status == "" || sn.Status == f.Status)
}

// SortSnapshots puts list newest first (then by id, descending).
func SortSnapshots(list []Snapshot) {
	sort.Slice(list, func(i, j int) bool {
		if !list[i].CreatedAt.Equal(list[j].CreatedAt) {
			return list[i].CreatedAt.After(list[j].CreatedAt)
		}
		return list[i].ID > list[j].ID
	})
}

// AskedBefore reports whether a was asked for before b: earlier, or at
// the same moment with the smaller id (SortSnapshots' order, reversed).
// A saved snapshot replaces only the ones of its name asked before it.
func AskedBefore(a, b *Snapshot) bool {
	if !a.CreatedAt.Equal(b.CreatedAt) {
		return a.CreatedAt.Before(b.CreatedAt)
	}
	return a.ID < b.ID
}

// Snapshots are what the API and hostctl need of the store's snapshot
// records. Every write is published on the change feed (KindSnapshot).
type Snapshots interface {
	// CreateSnapshot adds a snapshot record; ErrConflict when its id is
	// taken, ErrNotFound when its sandbox is not there (or deleted).
	CreateSnapshot(ctx context.Context, sn Snapshot, ev *AuditEvent) (Snapshot, error)
	// Snapshot finds one of the account's snapshots by id, deleted ones
	// included (hostctl reads those); ErrNotFound when there is none.
	Snapshot(ctx context.Context, accountID, id string) (Snapshot, error)
	ListSnapshots(ctx context.Context, f SnapshotFilter) ([]Snapshot, error)
	// HostSnapshots lists every snapshot on a host, deleted ones included
	// (hostctl removes their files), oldest first.
	HostSnapshots(ctx context.Context, hostID string) ([]Snapshot, error)
	// UpdateSnapshot reads the snapshot, applies fn and writes the result.
	UpdateSnapshot(ctx context.Context, id string, fn func(*Snapshot) error, ev *AuditEvent) (Snapshot, error)
	// PurgeSnapshot removes a deleted snapshot's record for good, once
	// its files are gone.
	PurgeSnapshot(ctx context.Context, id string) error
}
