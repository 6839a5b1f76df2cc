package api_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"froog.tech/froog/internal/wait"
	"froog.tech/froog/sandboxio"
	"froog.tech/froog/store"
)

// The local driver's sandboxes run on this Linux host: the numbers are
// its /proc's, read over the tunnel.
func TestMetricsAndProcesses(t *testing.T) {
	forEachLiveStore(t, func(t *testing.T, e *liveEnv) {
		e.running("box")
		var m sandboxio.Metrics
		e.do("GET", "/v1/sandboxes/box/metrics", e.key("ro", "sandbox.read"), nil).want(t, 200, "").json(t, &m)
		if m.SampledAt.IsZero() || m.CPUCount < 1 || m.CPUPercent < 0 || m.CPUPercent > 100 ||
			m.MemoryTotalBytes <= 0 || m.MemoryUsedBytes > m.MemoryTotalBytes ||
			m.DiskTotalBytes <= 0 || m.DiskUsedBytes > m.DiskTotalBytes || m.NetworkRxBytes < 0 || m.NetworkTxBytes < 0 {
			t.Errorf("metrics %+v", m)
		}

		// A process of the sandbox's, busy on the CPU, is in the list.
		job := e.do("POST", "/v1/sandboxes/box/jobs", e.admin, map[string]any{"command": "exec sh -c 'while :; do :; done' froog-spin"})
		var started struct{ ID string }
		job.want(t, 201, "").json(t, &started)
		var ps struct {
			Live      bool `json:"live"`
			Processes []struct {
				PID        int     `json:"pid"`
				CPUPercent float64 `json:"cpu_percent"`
				Command    string  `json:"command"`
			} `json:"processes"`
		}
		// The list is the busiest 100 of the host's processes (the local
		// driver's sandbox is the host): a job sampled as it starts has
		// no CPU yet, and under make test's load more than 100 others may
		// come before it. It is asked again until it has spun.
		ro := e.key("ro2", "sandbox.read")
		found := false
		wait.Until(10*time.Second, func() bool {
			e.do("GET", "/v1/sandboxes/box/processes", ro, nil).want(t, 200, "").json(t, &ps)
			if !ps.Live || len(ps.Processes) == 0 || len(ps.Processes) > 100 {
				t.Fatalf("processes %+v", ps)
			}
			for i, p := range ps.Processes {
				if i > 0 && p.CPUPercent > ps.Processes[i-1].CPUPercent {
					t.Errorf("not busiest first at %d: %+v", i, ps.Processes)
				}
				if p.Command == "sh -c while :; do :; done froog-spin" {
					found = true
				}
			}
			return found
		})
		if !found {
			t.Errorf("the spinning job is not listed: %+v", ps.Processes)
		}
		e.do("POST", "/v1/sandboxes/box/jobs/"+started.ID+"/stop", e.admin, nil).want(t, 200, "")

		e.do("GET", "/v1/sandboxes/box/metrics", e.key("x", "exec"), nil).want(t, 403, "api_key_action_forbidden")
		e.do("GET", "/v1/sandboxes/box/processes", e.key("y", "exec"), nil).want(t, 403, "api_key_action_forbidden")
		e.do("GET", "/v1/sandboxes/nobox/metrics", e.admin, nil).want(t, 404, "")
		e.do("GET", "/v1/sandboxes/nobox/processes", e.admin, nil).want(t, 404, "")

		e.do("POST", "/v1/sandboxes/box/stop", e.admin, nil).want(t, 202, "")
		e.waitState("box", "stopped")
		e.do("GET", "/v1/sandboxes/box/metrics", e.admin, nil).want(t, 409, "sandbox_stopped")
		e.do("GET", "/v1/sandboxes/box/processes", e.admin, nil).want(t, 409, "sandbox_stopped")

		// With the sample hostctl keeps at a stop: live false, its time,
		// while it is kept; then 409 again.
		sb, err := e.store.Sandbox(context.Background(), e.account.ID, "box")
		if err != nil {
			t.Fatal(err)
		}
		keep := func(at time.Time) {
			t.Helper()
			if _, err := e.store.UpdateSandbox(context.Background(), sb.ID, func(s *store.Sandbox, _ *store.AuditEvent) error {
				s.LastProcesses = &store.ProcessSample{At: at, Processes: json.RawMessage(`[{"pid":7,"command":"sleep 600"}]`)}
				return nil
			}, nil); err != nil {
				t.Fatal(err)
			}
		}
		at := e.now().Add(-time.Hour).UTC()
		keep(at)
		var last struct {
			Live      bool       `json:"live"`
			SampledAt *time.Time `json:"sampled_at"`
			Processes []struct {
				PID     int    `json:"pid"`
				Command string `json:"command"`
			} `json:"processes"`
		}
		e.do("GET", "/v1/sandboxes/box/processes", e.key("ro3", "sandbox.read"), nil).want(t, 200, "").json(t, &last)
		if last.Live || last.SampledAt == nil || !last.SampledAt.Equal(at) || len(last.Processes) != 1 || last.Processes[0].Command != "sleep 600" {
			t.Fatalf("a stopped sandbox's last sample: %+v", last)
		}
		e.do("GET", "/v1/sandboxes/box/processes", e.key("z", "exec"), nil).want(t, 403, "api_key_action_forbidden")
		keep(e.now().Add(-store.ProcessesKept - time.Minute))
		e.do("GET", "/v1/sandboxes/box/processes", e.admin, nil).want(t, 409, "sandbox_stopped")
	})
}
