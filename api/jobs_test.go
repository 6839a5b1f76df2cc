package api_test

import (
	"encoding/json"
	"testing"
	"time"

	"froog.tech/froog/internal/wait"
)

// TestJobViewsAsDocumented: a job reads the same from its start, its
// reads, the list and its stop: command_id named, started_at RFC 3339 as
// every other time of the API (it was unix seconds).
func TestJobViewsAsDocumented(t *testing.T) {
	forEachLiveStore(t, func(t *testing.T, e *liveEnv) {
		e.running("box")
		type view struct {
			ID        string          `json:"id"`
			CommandID string          `json:"command_id"`
			State     string          `json:"state"`
			StartedAt json.RawMessage `json:"started_at"`
		}
		check := func(what string, v view) {
			t.Helper()
			var at time.Time
			if err := json.Unmarshal(v.StartedAt, &at); err != nil || time.Since(at) > time.Minute || time.Until(at) > time.Minute {
				t.Errorf("%s: started_at %s, want an RFC 3339 time of now (%v)", what, v.StartedAt, err)
			}
			if v.CommandID == "" || v.CommandID != v.ID {
				t.Errorf("%s: command_id %q, want the job's id %q", what, v.CommandID, v.ID)
			}
		}
		var started view
		e.do("POST", "/v1/sandboxes/box/jobs", e.admin, map[string]any{"command": "sleep 30"}).want(t, 201, "").json(t, &started)
		check("start", started)
		var list []view
		e.do("GET", "/v1/sandboxes/box/jobs", e.admin, nil).want(t, 200, "").json(t, &list)
		if len(list) != 1 {
			t.Fatalf("jobs: %+v", list)
		}
		check("list", list[0])
		var stopped view
		e.do("POST", "/v1/sandboxes/box/jobs/"+started.ID+"/stop", e.admin, nil).want(t, 200, "").json(t, &stopped)
		check("stop", stopped)
		if !wait.Until(10*time.Second, func() bool { return e.job("box", started.ID, 0).State == "killed" }) {
			t.Fatalf("job %s never killed", started.ID)
		}
	})
}
