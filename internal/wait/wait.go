// Package wait is how tests wait for something to happen: they poll for it
// with a deadline instead of sleeping a guessed time, so they go on as
// soon as it happens and give it long enough when the machine is busy.
package wait

import (
	"testing"
	"time"
)

// The poll starts at first and backs off to every at most. A condition
// that takes long to check (a screenshot, a command in a sandbox) waits
// spacing times as long as its check took before the next, up to
// maxPause: polled back to back, a Chromium screenshot's checks kept a
// core busy for as long as a test waited on them.
const (
	first    = time.Millisecond
	every    = 20 * time.Millisecond
	spacing  = 4
	maxPause = time.Second
)

// Until polls cond until it holds or timeout has passed, and reports
// whether it held. cond is checked at least once, and last at the
// deadline.
func Until(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for d := first; ; d = min(2*d, every) {
		began := time.Now()
		if cond() {
			return true
		}
		took := time.Since(began)
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		time.Sleep(min(max(d, min(spacing*took, maxPause)), left))
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
