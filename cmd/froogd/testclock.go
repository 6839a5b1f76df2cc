//go:build froogtest

package main

import (
	"os"
	"strings"
	"time"
)

// testClockEnv names a file that holds how far (a Go duration, such as
// 2h0m1s) the clock of every role runs ahead of the real one: hostctl's,
// the API's, the edge's route table and its desktops'. It exists for the
// end-to-end tests of what time ends or starts (automatic snapshots,
// auto-stop, the expiry of keys, tokens, links and sessions), is
// read at every look at the clock, and is only honoured by test builds
// (the froogtest build tag, which e2e's TestMain sets; a release
// build has testclock_release.go instead). With it set, hostctl also
// looks at every sandbox every second, so that a move of the clock is
// acted on at once.
const testClockEnv = "FROOG_TEST_CLOCK_FILE"

// testClock returns the roles' clock and hostctl's rescan period under
// FROOG_TEST_CLOCK_FILE; nil and 0 (the defaults) when it is not set.
func testClock() (func() time.Time, time.Duration) {
	path := os.Getenv(testClockEnv)
	if path == "" {
		return nil, 0
	}
	return func() time.Time {
		b, err := os.ReadFile(path)
		if err != nil {
			return time.Now()
		}
		d, err := time.ParseDuration(strings.TrimSpace(string(b)))
		if err != nil {
			return time.Now()
		}
		return time.Now().Add(d)
	}, time.Second
}
