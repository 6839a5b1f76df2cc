package drivertest

import "testing"

// A subtest's failure is its own: a subtest's rig fails the subtest,
// never its parent from the subtest's goroutine ("subtest may have called
// FailNow on a parent test"), and both share the suite.
func TestRigFailsTheSubtestThatRuns(t *testing.T) {
	r := rig{t: t, suite: &suite{top: t}}
	t.Run("sub", func(sub *testing.T) {
		s := r.on(sub)
		if s.t != sub {
			t.Errorf("in a subtest the rig fails %s; want %s", s.t.Name(), sub.Name())
		}
		if s.suite != r.suite || s.top != t {
			t.Error("the subtest's rig has a suite of its own")
		}
	})
	if r.t != t {
		t.Errorf("after the subtest the rig fails %s; want %s", r.t.Name(), t.Name())
	}
}
