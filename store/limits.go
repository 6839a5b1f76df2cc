package store

import (
	"slices"
	"time"
)

// The docs' start limits per account: starts a minute, an hour and a day.
// An Account's own non-zero values take their place (a trial has lower
// ones).
const (
	DefaultStartsPerMinute = 20
	DefaultStartsPerHour   = 100
	DefaultStartsPerDay    = 500
	// StartsKept is how far back a store keeps starts: the longest window.
	StartsKept = 24 * time.Hour
)

// StartWindow is one start limit: at most Max starts in any Length.
type StartWindow struct {
	Limit  string // its name, e.g. "starts_per_minute"
	Length time.Duration
	Max    int
}

// StartWindows are the account's start limits, shortest window first.
func (a Account) StartWindows() []StartWindow {
	or := func(v, def int) int {
		if v > 0 {
			return v
		}
		return def
	}
	return []StartWindow{
		{Limit: "starts_per_minute", Length: time.Minute, Max: or(a.StartsPerMinute, DefaultStartsPerMinute)},
		{Limit: "starts_per_hour", Length: time.Hour, Max: or(a.StartsPerHour, DefaultStartsPerHour)},
		{Limit: "starts_per_day", Length: StartsKept, Max: or(a.StartsPerDay, DefaultStartsPerDay)},
	}
}

// WindowUsage is where an account stands in one start window at a time.
type WindowUsage struct {
	StartWindow
	Used int
	// FreeAt is when the window next allows a start: the time asked
	// about when it allows one now.
	FreeAt time.Time
}

// Remaining is how many more starts the window allows now.
func (u WindowUsage) Remaining() int { return max(u.Max-u.Used, 0) }

// StartUsage counts starts (at the times given, in any order) in each of
// the account's windows at at. A start at s is in a window of length L
// until s+L: the windows slide, so a refused start can be retried exactly
// when the oldest start that fills the window leaves it.
func StartUsage(a Account, starts []time.Time, at time.Time) []WindowUsage {
	sorted := slices.Clone(starts)
	slices.SortFunc(sorted, func(x, y time.Time) int { return x.Compare(y) })
	var out []WindowUsage
	for _, w := range a.StartWindows() {
		var in []time.Time
		for _, s := range sorted {
			if s.After(at.Add(-w.Length)) {
				in = append(in, s)
			}
		}
		u := WindowUsage{StartWindow: w, Used: len(in), FreeAt: at}
		if len(in) >= w.Max {
			u.FreeAt = in[len(in)-w.Max].Add(w.Length)
		}
		out = append(out, u)
	}
	return out
}

// CheckStart decides whether the account may start a sandbox at at,
// given its earlier starts: a LimitError for the full window that frees
// last, with RetryAt set, or nil. Every implementation calls it inside
// the transaction that records the start, holding the account, so that
// concurrent starts (from several API and edge processes) count in turn.
func CheckStart(a Account, starts []time.Time, at time.Time) error {
	var worst *WindowUsage
	for _, u := range StartUsage(a, starts, at) {
		if u.Used >= u.Max && (worst == nil || u.FreeAt.After(worst.FreeAt)) {
			u := u
			worst = &u
		}
	}
	if worst == nil {
		return nil
	}
	return &LimitError{Limit: worst.Limit, Max: worst.Max, Window: worst.Length, RetryAt: worst.FreeAt}
}

// StartAt is when a write that starts sb counts as a start: the time the
// caller stamped on it (UpdatedAt), so that the caller's clock decides.
func StartAt(sb *Sandbox) time.Time {
	if sb.UpdatedAt.IsZero() {
		return Micro(time.Now())
	}
	return Micro(sb.UpdatedAt)
}

// AccountUsage is what GET /v1/limits shows of an account.
type AccountUsage struct {
	Account Account
	// Running is how many sandboxes are meant to run: what counts against
	// Account.MaxSandboxes.
	Running int
	// Starts are the account's starts within StartsKept before the time
	// asked about.
	Starts []time.Time
}
