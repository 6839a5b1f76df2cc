package drivertest

import "testing"

// A subtest's failure is its own: the rig's checks fail the subtest that
// runs, never its parent from the subtest's goroutine ("subtest may have
// called FailNow on a parent test"), and the suite's test again after it.
func TestRigFailsTheSubtestThatRuns(t *testing.T) {
	r := &rig{t: t, top: t}
	t.Run("sub", func(sub *testing.T) {
		r.in(sub)
		if r.t != sub {
			t.Errorf("in a subtest the rig fails %s; want %s", r.t.Name(), sub.Name())
		}
		if r.top != t {
			t.Errorf("the rig's top test changed to %s", r.top.Name())
		}
	})
	if r.t != t {
		t.Errorf("after the subtest the rig fails %s; want %s", r.t.Name(), t.Name())
	}
}
