package store

import (
	"encoding/json"
	"time"
)

// ProcessesKept is how long a stopped sandbox's last process sample is
// shown (docs: Command history, froog ps).
const ProcessesKept = 7 * 24 * time.Hour

// ProcessSample is what ran in a sandbox as it stopped: its busiest
// processes (sandboxio's Process list, as JSON: the store does not read
// it) and when they were read.
type ProcessSample struct {
	At        time.Time       `json:"at"`
	Processes json.RawMessage `json:"processes"`
}

// KeptProcesses is sb's last process sample while it is kept at now:
// nil for a sandbox without one, or with one older than ProcessesKept.
func KeptProcesses(sb *Sandbox, now time.Time) *ProcessSample {
	if sb.LastProcesses == nil || now.Sub(sb.LastProcesses.At) >= ProcessesKept {
		return nil
	}
	return sb.LastProcesses
}
