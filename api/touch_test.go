package api_test

import (
	"context"
	"testing"
	"time"

	"froog.tech/froog/api"
	"froog.tech/froog/internal/testkit"
	"froog.tech/froog/store"
)

// touchJSON is what a touch test reads of a sandbox.
type touchJSON struct {
	Name         string
	State        string
	DesiredState string     `json:"desired_state"`
	AutoStopAt   *time.Time `json:"auto_stop_at"`
	LastActiveAt *time.Time `json:"last_active_at"`
	UpdatedAt    time.Time  `json:"updated_at"`
}

// running makes the store say hostctl started name at at, with the
// auto-stop deadline its start sets (ttl_secs later).
func (e *env) running(name string, at time.Time) store.Sandbox {
	e.t.Helper()
	sb, err := e.store.Sandbox(context.Background(), e.account.ID, name)
	if err != nil {
		e.t.Fatal(err)
	}
	sb, err = e.store.UpdateSandbox(context.Background(), sb.ID, func(s *store.Sandbox, _ *store.AuditEvent) error {
		stop := at.Add(time.Duration(s.TTLSecs) * time.Second)
		s.HostID, s.State, s.StartedAt, s.AutoStopAt = "host_test", store.StateRunning, &at, &stop
		return nil
	}, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return sb
}

// POST …/touch records last_active_at at the API's clock and answers
// 200 with the sandbox, as GET and the list then show it. It is
// bookkeeping: the auto-stop deadline, the desired state and updated_at
// stay, a stopped sandbox (auto-start on) stays stopped, and nothing
// reaches the audit log. A sandbox nobody touched shows null; an unknown
// or deleted one is the usual 404.
func TestTouch(t *testing.T) {
	forEachStoreAt(t, time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), func(t *testing.T, e *env, clock *testkit.FakeClock) {
		e.do("POST", "/v1/sandboxes", e.admin, `{"name":"box","ttl_secs":3600}`).want(t, 202, "")
		e.do("POST", "/v1/sandboxes", e.admin, `{"name":"idle"}`).want(t, 202, "")
		e.running("box", clock.Now())
		var before touchJSON
		e.do("GET", "/v1/sandboxes/box", e.admin, nil).want(t, 200, "").json(t, &before)
		if before.LastActiveAt != nil || before.AutoStopAt == nil {
			t.Fatalf("before a touch: last_active_at %v (want null), auto_stop_at %v", before.LastActiveAt, before.AutoStopAt)
		}

		for i, body := range []any{nil, `{}`} { // no body, or an empty object
			clock.Advance(10 * time.Minute)
			want := store.Micro(clock.Now())
			var got touchJSON
			e.do("POST", "/v1/sandboxes/box/touch", e.admin, body).want(t, 200, "").json(t, &got)
			var shown touchJSON
			e.do("GET", "/v1/sandboxes/box", e.admin, nil).want(t, 200, "").json(t, &shown)
			var list []touchJSON
			e.do("GET", "/v1/sandboxes?name=box", e.admin, nil).want(t, 200, "").json(t, &list)
			if len(list) != 1 {
				t.Fatalf("list: %+v", list)
			}
			for where, sb := range map[string]touchJSON{"answer": got, "GET": shown, "list": list[0]} {
				if sb.LastActiveAt == nil || !sb.LastActiveAt.Equal(want) {
					t.Errorf("touch %d, %s: last_active_at %v, want %v (the API's clock)", i, where, sb.LastActiveAt, want)
				}
				if sb.AutoStopAt == nil || !sb.AutoStopAt.Equal(*before.AutoStopAt) || sb.DesiredState != "running" || !sb.UpdatedAt.Equal(before.UpdatedAt) {
					t.Errorf("touch %d, %s moved more than last_active_at: auto_stop_at %v (want %v), desired_state %s, updated_at %v (want %v)",
						i, where, sb.AutoStopAt, before.AutoStopAt, sb.DesiredState, sb.UpdatedAt, before.UpdatedAt)
				}
			}
		}
		var idle touchJSON
		e.do("GET", "/v1/sandboxes/idle", e.admin, nil).want(t, 200, "").json(t, &idle)
		if idle.LastActiveAt != nil {
			t.Fatalf("a sandbox nobody touched: last_active_at %v, want null", idle.LastActiveAt)
		}

		// A stopped sandbox with auto-start: touched, not started.
		e.do("PATCH", "/v1/sandboxes/idle", e.admin, `{"auto_start":true}`).want(t, 200, "")
		e.stopped("idle")
		var cold touchJSON
		e.do("POST", "/v1/sandboxes/idle/touch", e.admin, nil).want(t, 200, "").json(t, &cold)
		if cold.LastActiveAt == nil || cold.DesiredState != "stopped" || cold.State != "stopped" {
			t.Fatalf("touch of a stopped sandbox: %+v, want it touched and still stopped", cold)
		}

		e.do("POST", "/v1/sandboxes/nope/touch", e.admin, nil).want(t, 404, "not_found")
		e.do("DELETE", "/v1/sandboxes/idle", e.admin, nil).want(t, 202, "")
		e.do("POST", "/v1/sandboxes/idle/touch", e.admin, nil).want(t, 404, "not_found")

		var audit struct {
			Events []struct{ Action, Target string }
		}
		e.do("GET", "/v1/audit", e.admin, nil).want(t, 200, "").json(t, &audit)
		for _, ev := range audit.Events {
			if ev.Action != "sandbox.create" && ev.Action != "sandbox.update" && ev.Action != "sandbox.delete" {
				t.Errorf("audit event %s %s: a touch records none", ev.Action, ev.Target)
			}
		}
		if len(audit.Events) != 4 { // two creates, the PATCH, the delete
			t.Errorf("%d audit events, want 4: %+v", len(audit.Events), audit.Events)
		}
	})
}

// Touching needs sandbox.update (the docs' action for a change to a
// sandbox: full-sandbox and ci have it, read-only does not), and a key
// limited by name or label touches only the sandboxes it reaches. A
// refused touch writes nothing.
func TestTouchScopes(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		e.do("POST", "/v1/sandboxes", e.admin, `{"name":"mine","labels":{"team":"a"}}`).want(t, 202, "")
		e.do("POST", "/v1/sandboxes", e.admin, `{"name":"theirs","labels":{"team":"b"}}`).want(t, 202, "")
		readOnly, _ := api.PresetActions("read-only")
		fullSandbox, _ := api.PresetActions("full-sandbox")
		keys := map[string]string{
			"read-only":    e.key("read-only", readOnly...),
			"full-sandbox": e.key("full-sandbox", fullSandbox...),
			"update only":  e.key("update", "sandbox.update"),
			"by name":      e.keyWith("by-name", func(k *store.APIKey) { k.Sandboxes = []string{"mine"} }, "*"),
			"by label":     e.keyWith("by-label", func(k *store.APIKey) { k.Labels = map[string]string{"team": "a"} }, api.Presets["ci"]...),
		}
		tests := []struct {
			key, box string
			status   int
			code     string
		}{
			{"read-only", "mine", 403, "api_key_action_forbidden"},
			{"by name", "theirs", 403, "api_key_sandbox_forbidden"},
			{"by label", "theirs", 403, "api_key_sandbox_forbidden"},
			{"full-sandbox", "mine", 200, ""},
			{"update only", "mine", 200, ""},
			{"by name", "mine", 200, ""},
			{"by label", "mine", 200, ""},
		}
		lastActive := func(box string) *time.Time {
			t.Helper()
			sb, err := e.store.Sandbox(context.Background(), e.account.ID, box)
			if err != nil {
				t.Fatal(err)
			}
			return sb.LastActiveAt
		}
		for _, tt := range tests {
			t.Run(tt.key+" "+tt.box, func(t *testing.T) {
				was := lastActive(tt.box)
				e.do("POST", "/v1/sandboxes/"+tt.box+"/touch", keys[tt.key], nil).want(t, tt.status, tt.code)
				now := lastActive(tt.box)
				if same := now == nil && was == nil || now != nil && was != nil && now.Equal(*was); tt.status != 200 && !same {
					t.Fatalf("a refused touch wrote last_active_at %v (was %v)", now, was)
				}
				if tt.status == 200 && now == nil {
					t.Fatal("an allowed touch wrote no last_active_at")
				}
			})
		}
		if lastActive("theirs") != nil {
			t.Fatal("a sandbox no key could touch was touched")
		}
	})
}
