package e2e_test

import (
	"testing"
	"time"

	"froog.tech/froog/internal/wait"
)

// touched is what TestTouch reads of a sandbox.
type touched struct {
	State        string
	DesiredState string     `json:"desired_state"`
	AutoStopAt   *time.Time `json:"auto_stop_at"`
	LastActiveAt *time.Time `json:"last_active_at"`
}

// POST …/touch through the real binary. froogd dev's clock runs 20
// minutes ahead (the test clock), so the last_active_at a touch records
// is the API's time, not this process's; the auto-stop deadline stays
// where the start put it, and GET says so. A stopped sandbox with
// auto-start is touched and stays stopped: hostctl, which looks at every
// sandbox every second under the test clock, does not start it.
func TestTouch(t *testing.T) {
	t.Parallel()
	d := startDev(t, devOptions{clock: true})
	c := d.c
	newSandbox(t, c, "busy", 60*time.Second)
	var before touched
	c.call("GET", "/v1/sandboxes/busy", "", 200, &before)
	if before.LastActiveAt != nil || before.AutoStopAt == nil {
		t.Fatalf("before a touch: last_active_at %v (want null), auto_stop_at %v (want the start's deadline)", before.LastActiveAt, before.AutoStopAt)
	}

	const ahead = 20 * time.Minute // within the default hour's auto-stop
	d.advance(t, ahead)
	from := time.Now().Truncate(time.Microsecond).Add(ahead)
	var answer touched
	c.call("POST", "/v1/sandboxes/busy/touch", "", 200, &answer)
	to := time.Now().Add(ahead)
	var shown touched
	c.call("GET", "/v1/sandboxes/busy", "", 200, &shown)
	for where, sb := range map[string]touched{"the answer": answer, "GET": shown} {
		if sb.LastActiveAt == nil || sb.LastActiveAt.Before(from) || sb.LastActiveAt.After(to) {
			t.Errorf("%s: last_active_at %v, want the API's clock, between %v and %v", where, sb.LastActiveAt, from, to)
		}
		if sb.AutoStopAt == nil || !sb.AutoStopAt.Equal(*before.AutoStopAt) || sb.State != "running" {
			t.Errorf("%s: auto_stop_at %v, state %s; want %v, running: a touch moves no deadline", where, sb.AutoStopAt, sb.State, before.AutoStopAt)
		}
	}

	c.call("POST", "/v1/sandboxes", `{"name": "cold", "auto_start": true}`, 202, nil)
	runsWithin(t, c, "cold", 60*time.Second)
	c.call("POST", "/v1/sandboxes/cold/stop", "", 202, nil)
	var cold touched
	wait.For(t, 30*time.Second, "cold stops", func() bool {
		c.call("GET", "/v1/sandboxes/cold", "", 200, &cold)
		return cold.State == "stopped"
	})
	c.call("POST", "/v1/sandboxes/cold/touch", "", 200, &cold)
	if cold.LastActiveAt == nil || cold.DesiredState != "stopped" {
		t.Fatalf("touch of a stopped sandbox: last_active_at %v, desired_state %s; want it touched, still meant to be stopped", cold.LastActiveAt, cold.DesiredState)
	}
	if wait.Until(3*time.Second, func() bool {
		c.call("GET", "/v1/sandboxes/cold", "", 200, &cold)
		return cold.State != "stopped"
	}) {
		t.Fatalf("a touch started a stopped sandbox: state %s", cold.State)
	}
	c.call("POST", "/v1/sandboxes/nope/touch", "", 404, nil)
}
