package hostctl

import (
	"testing"
	"time"

	"froog.tech/froog/store"
)

// TestNextLook: a running setup is looked at every SetupPoll in its
// start's first minute, then every slowSetupPoll; a stop due sooner
// comes first, and without a running setup only the timers count.
func TestNextLook(t *testing.T) {
	t.Parallel()
	c := &Controller{o: Options{SetupPoll: 2 * time.Second}}
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) *time.Time { x := now.Add(-d); return &x }
	at := func(d time.Duration) *time.Time { x := now.Add(d); return &x }
	for _, tc := range []struct {
		name string
		sb   store.Sandbox
		want time.Time
	}{
		{"new setup", store.Sandbox{SetupStatus: store.SetupRunning, StartedAt: ago(10 * time.Second)}, now.Add(2 * time.Second)},
		{"long setup", store.Sandbox{SetupStatus: store.SetupRunning, StartedAt: ago(2 * time.Minute)}, now.Add(slowSetupPoll)},
		{"auto-stop first", store.Sandbox{SetupStatus: store.SetupRunning, StartedAt: ago(time.Minute), TTLSecs: 60, AutoStopAt: at(time.Second)}, now.Add(time.Second)},
		{"setup done", store.Sandbox{SetupStatus: store.SetupDone, StartedAt: ago(10 * time.Second)}, time.Time{}},
		{"setup done, auto-stop", store.Sandbox{SetupStatus: store.SetupDone, StartedAt: ago(10 * time.Second), TTLSecs: 60, AutoStopAt: at(50 * time.Second)}, now.Add(50 * time.Second)},
	} {
		if got := c.nextLook(&tc.sb, now); !got.Equal(tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}
