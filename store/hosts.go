package store

import (
	"fmt"
	"sort"
	"time"
)

// PickHost chooses the host for an unplaced sandbox sb: among hosts seen
// since liveSince, neither draining nor down, with room (Capacity above
// Sandboxes), the one with the most room, by name on a tie. A fork goes
// on srcHost or nowhere, since its disk is copied there: its source's
// host, or its snapshot's (ForkSource). It returns nil when no host
// qualifies. Both stores place with it, so they agree on where a sandbox
// goes.
func PickHost(hosts []Host, sb *Sandbox, srcHost string, liveSince time.Time) *Host {
	var best *Host
	for i := range hosts {
		h := &hosts[i]
		if h.Draining || h.DownAt != nil || h.SeenAt.Before(liveSince) || h.Sandboxes >= h.Capacity {
			continue
		}
		if (sb.ForkOf != "" || sb.ForkSnapshot != "") && h.ID != srcHost {
			continue
		}
		if best == nil || h.Capacity-h.Sandboxes > best.Capacity-best.Sandboxes ||
			(h.Capacity-h.Sandboxes == best.Capacity-best.Sandboxes && h.Name < best.Name) {
			best = h
		}
	}
	return best
}

// HostDown records on sb that its host h stopped heart-beating: a
// sandbox that runs, or keeps processes (warm), goes to error saying so.
// It reports whether sb changed. Intent (desired state) is untouched: a
// start after the host returns starts it there.
func HostDown(sb *Sandbox, h *Host) bool {
	if sb.DeletedAt != nil || (sb.State == StateStopped && sb.WarmUntil == nil) {
		return false
	}
	sb.State = StateError
	sb.Error = fmt.Sprintf("host %s "+hostDownNote+" (last seen %s): the sandbox is unreachable until its host is back", h.Name, h.SeenAt.UTC().Format(time.RFC3339))
	sb.WarmUntil = nil
	return true
}

// HostDownStop is the error a pending stop ends with when its sandbox's
// host is marked down.
func HostDownStop(h *Host) string {
	return fmt.Sprintf("host %s stopped heart-beating: the stop could not be confirmed", h.Name)
}

// SortHosts orders hosts by name.
func SortHosts(hosts []Host) {
	sort.Slice(hosts, func(i, j int) bool { return hosts[i].Name < hosts[j].Name })
}

// ForkSource says where a fork's disk comes from, for PickHost: the
// snapshot's id when it is made from one, else its source sandbox's;
// both empty for a sandbox that is no fork.
func ForkSource(sb *Sandbox) (snapshotID, sandboxID string) {
	if sb.ForkSnapshot != "" {
		return sb.ForkSnapshot, ""
	}
	return "", sb.ForkOf
}
