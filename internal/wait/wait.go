// Package wait is how tests wait for something to happen: they poll for it
// with a deadline instead of sleeping a guessed time, so they go on as
// soon as it happens and give it long enough when the machine is busy.
package wait

import (
	"testing"
	"time"
)

// The poll starts at first and backs off to every at most.
const (
	first = time.Millisecond
	every = 20 * time.Millisecond
)

// Until polls cond until it holds or timeout has passed, and reports
// whether it held. cond is checked at least once, and last at the
// deadline.
func Until(timeout time.Duration, cond func() bool) bool {
	return UntilEvery(timeout, every, cond)
}

// UntilEvery is Until for a cond that is costly to check (a screenshot):
// the poll backs off to every period at most.
func UntilEvery(timeout, period time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for d := first; ; d = min(2*d, period) {
		if cond() {
			return true
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		time.Sleep(min(d, left))
	}
}

// For polls cond until it holds; past timeout the test fails, saying what
// never happened. Call it from the test's goroutine (it calls Fatalf);
// elsewhere use Until.
func For(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	if !Until(timeout, cond) {
		tb.Fatalf("after %v: never %s", timeout, what)
	}
}
