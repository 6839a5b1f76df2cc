// Package testdep is the one place for what a test does when something
// it needs is not there, and for the short tier's skips. Locally a test
// whose dependency is missing skips, saying what deploy/testdeps.sh
// installs; when CI is set it fails instead, so that a check that never
// ran is not counted as passed. A -short skip is a choice, not a missing
// dependency: it never fails. Only tests import it.
package testdep

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// CI reports whether the tests run in CI: CI set to anything but "",
// "0" or "false" (.ci/run runs with CI=true).
func CI() bool {
	switch os.Getenv("CI") {
	case "", "0", "false":
		return false
	}
	return true
}

// Need skips tb when bin is not on PATH (fails it under CI).
func Need(tb testing.TB, bin string) {
	tb.Helper()
	if _, err := exec.LookPath(bin); err != nil {
		Missing(tb, "%s is not installed (deploy/testdeps.sh installs it)", bin)
	}
}

// Missing says what tb needs and this machine lacks: tb skips, or fails
// under CI. A benchmark only skips: make bench, not CI, runs those.
func Missing(tb testing.TB, format string, args ...any) {
	tb.Helper()
	why := fmt.Sprintf(format, args...)
	if _, bench := tb.(*testing.B); CI() && !bench {
		tb.Fatalf("%s; under CI a test that cannot run fails (a skip would pass a check that never ran)", why)
	}
	tb.Skip(why)
}

// Short skips tb under go test -short (make test-short), saying why it
// is not in the short tier: it boots a VM, drives a browser, or is long.
func Short(tb testing.TB, why string) {
	tb.Helper()
	if testing.Short() {
		tb.Skip("-short: " + why)
	}
}
