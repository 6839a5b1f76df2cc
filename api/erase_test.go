package api_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"froog.tech/froog/store"
)

// TestStopOfSnapshotsOff: a sandbox made with snapshots off and asked to
// stop is being erased: no start (asked or automatic) brings it back
// meanwhile, and once hostctl erased it (here the store writes hostctl
// makes), GET says it is gone and GET /v1/stops/{id} says completed, to
// the keys that reached it and no other.
func TestStopOfSnapshotsOff(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "off", "snapshots": false, "auto_start": true, "labels": map[string]string{"team": "a"}}).want(t, 202, "")
		sb := e.ran("off")
		var st struct{ ID, Status string }
		e.do("POST", "/v1/sandboxes/off/stop", e.admin, nil).want(t, 202, "").json(t, &st)
		if st.Status != "pending" {
			t.Fatalf("the stop: %+v", st)
		}
		e.do("POST", "/v1/sandboxes/off/start", e.admin, nil).want(t, 409, "conflict")
		if got, _ := e.store.SandboxByID(ctx, sb.ID); got.DesiredState != store.StateStopped {
			t.Fatalf("a refused start changed the intent: %s", got.DesiredState)
		}
		// Stopping again answers the same stop.
		var again struct{ ID string }
		e.do("POST", "/v1/sandboxes/off/stop", e.admin, nil).want(t, 202, "").json(t, &again)
		if again.ID != st.ID {
			t.Fatalf("a second stop %s, want %s", again.ID, st.ID)
		}

		// hostctl's erase: deleted, stop completed, record purged.
		now := e.now()
		if err := e.store.DeleteSandbox(ctx, sb.ID, now, nil); err != nil {
			t.Fatal(err)
		}
		if err := e.store.FinishStop(ctx, st.ID, store.StopCompleted, "", now); err != nil {
			t.Fatal(err)
		}
		if err := e.store.PurgeSandbox(ctx, sb.ID); err != nil {
			t.Fatal(err)
		}
		e.do("GET", "/v1/sandboxes/off", e.admin, nil).want(t, 404, "not_found")
		for _, tt := range []struct {
			name string
			key  string
			want int
		}{
			{"admin", e.admin, 200},
			{"named", e.keyWith("named", func(k *store.APIKey) { k.Sandboxes = []string{"off"} }, "sandbox.read"), 200},
			{"its label", e.keyWith("team-a", func(k *store.APIKey) { k.Labels = map[string]string{"team": "a"} }, "sandbox.read"), 200},
			{"another label", e.keyWith("team-b", func(k *store.APIKey) { k.Labels = map[string]string{"team": "b"} }, "sandbox.read"), 403},
			{"another name", e.keyWith("other", func(k *store.APIKey) { k.Sandboxes = []string{"other"} }, "sandbox.read"), 403},
		} {
			r := e.do("GET", "/v1/stops/"+st.ID, tt.key, nil).want(t, tt.want, "")
			if tt.want != 200 {
				continue
			}
			var got struct {
				Status, Sandbox string
				EndedAt         *string `json:"ended_at"`
			}
			r.json(t, &got)
			if got.Status != "completed" || got.Sandbox != "off" || got.EndedAt == nil {
				t.Fatalf("%s: the stop of an erased sandbox: %s", tt.name, r.body)
			}
		}
	})
}

// TestCreateCount: count on create makes NAME-1 … NAME-N, all or none,
// each with the request's settings (and its saved snapshot, with from),
// each audited; the same Idempotency-Key replays the answer.
func TestCreateCount(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		body := map[string]any{"name": "app", "count": 3, "env": map[string]string{"TENANT": "42"}, "labels": map[string]string{"k": "v"}, "ttl_secs": 60}
		var made []struct {
			Name     string
			EnvNames []string `json:"env_names"`
			Labels   map[string]string
		}
		first := e.do("POST", "/v1/sandboxes", e.admin, body, "Idempotency-Key", "c1").want(t, 202, "")
		first.json(t, &made)
		if len(made) != 3 {
			t.Fatalf("made: %s", first.body)
		}
		ids := map[string]bool{}
		for i, m := range made {
			if want := fmt.Sprintf("app-%d", i+1); m.Name != want || fmt.Sprint(m.EnvNames) != "[TENANT]" || m.Labels["k"] != "v" {
				t.Fatalf("copy %d: %+v", i, m)
			}
			sb, err := e.store.Sandbox(ctx, e.account.ID, m.Name)
			if err != nil || sb.TTLSecs != 60 || ids[sb.ID] {
				t.Fatalf("%s: %+v %v", m.Name, sb, err)
			}
			ids[sb.ID] = true
		}
		again := e.do("POST", "/v1/sandboxes", e.admin, body, "Idempotency-Key", "c1").want(t, 202, "")
		if string(again.body) != string(first.body) || again.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("replay: %s", again.body)
		}
		// A name taken: none of the copies is made.
		e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "app-2"}).want(t, 409, "conflict")
		e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "x-1"}).want(t, 202, "")
		e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "x", "count": 2}).want(t, 409, "conflict")
		e.do("GET", "/v1/sandboxes/x-2", e.admin, nil).want(t, 404, "not_found")

		// From a saved snapshot, with count.
		e.ran("app-1")
		var sn snapJSON
		e.do("POST", "/v1/sandboxes/app-1/snapshots", e.admin, map[string]any{"label": "web"}).want(t, 202, "").json(t, &sn)
		e.taken(sn.ID)
		for _, n := range []string{"app-2", "app-3", "x-1"} {
			e.do("DELETE", "/v1/sandboxes/"+n, e.admin, nil).want(t, 202, "")
		}
		e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "tpl", "from": "web", "count": 2}).want(t, 202, "").json(t, &made)
		for _, m := range made {
			sb, err := e.store.Sandbox(ctx, e.account.ID, m.Name)
			if err != nil || sb.ForkSnapshot != sn.ID {
				t.Fatalf("%s from web: %+v %v", m.Name, sb, err)
			}
		}
		var audit struct {
			Events []struct{ Action, Target string }
		}
		e.do("GET", "/v1/audit?limit=100", e.admin, nil).want(t, 200, "").json(t, &audit)
		created := map[string]bool{}
		for _, ev := range audit.Events {
			if ev.Action == "sandbox.create" {
				created[ev.Target] = true
			}
		}
		for _, n := range []string{"app-1", "app-2", "app-3", "x-1", "tpl-1", "tpl-2"} {
			if !created[n] {
				t.Errorf("no sandbox.create for %s: %v", n, created)
			}
		}
		if created["x-2"] {
			t.Error("a copy that was never made is in the audit log")
		}
	})
}

// TestSavedSnapshotAllowance: GET /v1/limits shows the docs'
// saved_snapshot_allowance: the 10 included, how many the account keeps
// (one per name, failed ones not), and those past the included ones.
func TestSavedSnapshotAllowance(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		type allowance struct {
			Included, Used, Extra int
			Price                 float64 `json:"price_per_extra_day_usd"`
		}
		get := func() allowance {
			var l struct {
				A allowance `json:"saved_snapshot_allowance"`
			}
			e.do("GET", "/v1/limits", e.admin, nil).want(t, 200, "").json(t, &l)
			return l.A
		}
		if got := get(); got != (allowance{Included: 10, Price: 0.056}) {
			t.Fatalf("with none: %+v", got)
		}
		e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "box"}).want(t, 202, "")
		box := e.ran("box")
		save := func(label, status string) {
			t.Helper()
			if _, err := e.store.CreateSnapshot(context.Background(), store.Snapshot{ID: store.NewID("snap"), AccountID: e.account.ID, SandboxID: box.ID,
				Sandbox: "box", HostID: box.HostID, Saved: true, Label: label, Status: status, CreatedAt: e.now()}, nil); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 11 {
			save(fmt.Sprintf("s%d", i), store.SnapshotAvailable)
		}
		save("s0", store.SnapshotCreating)   // saved again: still one
		save("broken", store.SnapshotFailed) // holds nothing
		save("", store.SnapshotAvailable)    // unnamed
		if got := get(); got != (allowance{Included: 10, Used: 12, Extra: 2, Price: 0.056}) {
			t.Fatalf("with 12 kept: %+v", got)
		}
	})
}

// TestFromSavedGetsItsEnv: a sandbox from a saved snapshot gets the
// source's own variables as they were when it was saved, unless its
// create sends its own; the snapshot keeps them sealed, bound to it.
func TestFromSavedGetsItsEnv(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "src", "env": map[string]string{"A": "secret-a", "B": "b"}}).want(t, 202, "")
		e.ran("src")
		var sn snapJSON
		e.do("POST", "/v1/sandboxes/src/snapshots", e.admin, map[string]any{"label": "web"}).want(t, 202, "").json(t, &sn)
		e.taken(sn.ID)
		// Changed after the save: the template keeps what it had.
		e.do("PATCH", "/v1/sandboxes/src", e.admin, map[string]any{"env": map[string]any{"A": nil, "C": "c"}}).want(t, 200, "")
		got, err := e.store.Snapshot(ctx, e.account.ID, sn.ID)
		if err != nil || len(got.EnvSealed) == 0 || strings.Contains(string(got.EnvSealed), "secret-a") {
			t.Fatalf("the snapshot's env: %q, %v", got.EnvSealed, err)
		}
		var sb struct {
			EnvNames []string `json:"env_names"`
		}
		e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "t1", "from": "web"}).want(t, 202, "").json(t, &sb)
		if fmt.Sprint(sb.EnvNames) != "[A B]" {
			t.Fatalf("from web: %v", sb.EnvNames)
		}
		e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "t2", "from": "web", "env": map[string]string{"D": "d"}}).want(t, 202, "").json(t, &sb)
		if fmt.Sprint(sb.EnvNames) != "[D]" {
			t.Fatalf("from web with its own env: %v", sb.EnvNames)
		}
		e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "t3", "from": "web", "env": map[string]string{}}).want(t, 202, "").json(t, &sb)
		if len(sb.EnvNames) != 0 {
			t.Fatalf("from web with env {}: %v", sb.EnvNames)
		}
		// Sealed to its snapshot: moved to another, it does not open.
		other, err := e.store.CreateSnapshot(ctx, store.Snapshot{ID: store.NewID("snap"), AccountID: e.account.ID, SandboxID: got.SandboxID, Sandbox: "src",
			HostID: got.HostID, Saved: true, Label: "moved", Status: store.SnapshotAvailable, EnvSealed: got.EnvSealed, CreatedAt: e.now()}, nil)
		if err != nil {
			t.Fatal(err)
		}
		e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "t4", "from": other.ID}).want(t, 500, "")
		for _, l := range strings.Split(e.logs.String(), "\n") {
			if strings.Contains(l, "secret-a") {
				t.Fatalf("a variable's value in a log line: %s", l)
			}
		}
	})
}
