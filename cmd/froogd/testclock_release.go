//go:build !froogtest

package main

import "time"

// testClock is the real clock in a release build: the variable that
// moves it in test builds (testclock.go) is ignored, so that no
// environment can make a production hostctl stop, snapshot or delete
// sandboxes early, or a key, token or link outlive its expiry.
func testClock() (func() time.Time, time.Duration) { return nil, 0 }
