package store

import "time"

// DiskKept is how long a stopped sandbox keeps its disk (docs: Snapshots,
// Limits). Then hostctl deletes the disk and the sandbox's automatic
// snapshots and sets DiskExpiredAt: a start or a fork is refused
// (snapshot_data_expired) until a restore from a saved snapshot gives the
// sandbox a disk again.
const DiskKept = 14 * 24 * time.Hour

// DiskExpiredMessage says why a sandbox whose disk expired cannot start:
// the API's snapshot_data_expired, an auto-start's refusal, and the error
// hostctl gives a start that came anyway.
const DiskExpiredMessage = "the sandbox stayed stopped over 14 days and its disk was deleted: restore it from a saved snapshot, or delete it"

// DiskExpiresAt is when a stopped sandbox's disk goes: nil while it is
// not stopped, or meant to run, or has no disk left.
func DiskExpiresAt(sb *Sandbox) *time.Time {
	if sb.State != StateStopped || sb.DesiredState != StateStopped || sb.StoppedAt == nil || sb.DiskExpiredAt != nil {
		return nil
	}
	t := sb.StoppedAt.Add(DiskKept)
	return &t
}
