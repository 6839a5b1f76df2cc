package api_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"froog.tech/froog/api"
	"froog.tech/froog/internal/testkit"
	"froog.tech/froog/store"
)

type limitsJSON struct {
	SandboxesAtOnce struct{ Max, Running int } `json:"sandboxes_at_once"`
	StartsPerMinute windowJSON                 `json:"starts_per_minute"`
	StartsPerHour   windowJSON                 `json:"starts_per_hour"`
	StartsPerDay    windowJSON                 `json:"starts_per_day"`
}

type windowJSON struct {
	Limit, Used, Remaining int
	WindowSecs             int `json:"window_secs"`
	RetryAfter             int `json:"retry_after"`
}

// The 21st start in a minute (create, start or fork) is refused with 429
// limit_reached, a Retry-After until the oldest start leaves the minute
// and that window's RateLimit-* headers; honoured, the start works. GET
// /v1/limits says the same.
func TestStartLimits(t *testing.T) {
	forEachStoreAt(t, time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), func(t *testing.T, e *env, clock *testkit.FakeClock) {
		e.do("POST", "/v1/sandboxes", e.admin, `{"name":"box"}`).want(t, 202, "")
		for i := 1; i < 20; i++ {
			clock.Advance(time.Second)
			e.stopped("box")
			e.do("POST", "/v1/sandboxes/box/start", e.admin, nil).want(t, 202, "")
		}
		e.stopped("box")
		var l limitsJSON
		e.do("GET", "/v1/limits", e.admin, nil).want(t, 200, "").json(t, &l)
		if l.StartsPerMinute != (windowJSON{Limit: 20, Used: 20, Remaining: 0, WindowSecs: 60, RetryAfter: 41}) ||
			l.StartsPerHour != (windowJSON{Limit: 100, Used: 20, Remaining: 80, WindowSecs: 3600}) ||
			l.StartsPerDay != (windowJSON{Limit: 500, Used: 20, Remaining: 480, WindowSecs: 86400}) ||
			l.SandboxesAtOnce.Max != 5 || l.SandboxesAtOnce.Running != 0 {
			t.Fatalf("limits after 20 starts: %+v", l)
		}

		// 19 s after the first start: 41 s to wait, whichever way the
		// start comes.
		for _, tt := range []struct{ method, path, body string }{
			{"POST", "/v1/sandboxes/box/start", ``},
			{"POST", "/v1/sandboxes", `{"name":"other"}`},
			{"POST", "/v1/sandboxes/box/fork", `{"name":"copy"}`},
		} {
			r := e.do(tt.method, tt.path, e.admin, tt.body).want(t, 429, "limit_reached")
			want := map[string]string{"Retry-After": "41", "RateLimit-Limit": "20", "RateLimit-Remaining": "0", "RateLimit-Reset": "41", "RateLimit-Policy": "20;w=60"}
			for h, v := range want {
				if got := r.header.Get(h); got != v {
					t.Errorf("%s %s: %s: got %q, want %q", tt.method, tt.path, h, got, v)
				}
			}
			var body struct{ Error struct{ Message string } }
			json.Unmarshal(r.body, &body)
			if !strings.Contains(body.Error.Message, "20 starts per minute") {
				t.Errorf("message %q does not name the limit", body.Error.Message)
			}
		}

		// Honour Retry-After: a second early is still refused, on time works.
		clock.Advance(40 * time.Second)
		if r := e.do("POST", "/v1/sandboxes/box/start", e.admin, nil).want(t, 429, "limit_reached"); r.header.Get("Retry-After") != "1" {
			t.Fatalf("a second early: Retry-After %q, want 1", r.header.Get("Retry-After"))
		}
		clock.Advance(time.Second)
		e.do("POST", "/v1/sandboxes/box/start", e.admin, nil).want(t, 202, "")
		e.do("GET", "/v1/limits", e.admin, nil).want(t, 200, "").json(t, &l)
		if l.StartsPerMinute.Used != 20 || l.StartsPerHour.Used != 21 || l.SandboxesAtOnce.Running != 1 {
			t.Fatalf("limits after the 21st start: %+v", l)
		}
	})
}

// stopped does what hostctl does once a sandbox has stopped.
func (e *env) stopped(name string) {
	e.t.Helper()
	sb, err := e.store.Sandbox(context.Background(), e.account.ID, name)
	if err != nil {
		e.t.Fatal(err)
	}
	_, err = e.store.UpdateSandbox(context.Background(), sb.ID, func(sb *store.Sandbox, _ *store.AuditEvent) error {
		sb.DesiredState, sb.State, sb.PendingStopID = store.StateStopped, store.StateStopped, ""
		return nil
	}, nil)
	if err != nil {
		e.t.Fatal(err)
	}
}

// Sandboxes at once refuse with 429 limit_reached too, with a nominal
// Retry-After (it frees when one stops) and headers without a policy.
func TestRunningLimitHeaders(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		for i := range 5 {
			e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "b" + strconv.Itoa(i)}).want(t, 202, "")
		}
		r := e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "b5"}).want(t, 429, "limit_reached")
		if r.header.Get("Retry-After") != "30" || r.header.Get("RateLimit-Limit") != "5" || r.header.Get("RateLimit-Remaining") != "0" || r.header.Get("RateLimit-Policy") != "" {
			t.Fatalf("headers: %v", r.header)
		}
		if !strings.Contains(string(r.body), "sandboxes at once (5)") {
			t.Fatalf("message: %s", r.body)
		}
	})
}

func TestLimitsAccess(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		e.do("GET", "/v1/limits", e.key("reader", "account.read"), nil).want(t, 200, "")
		e.do("GET", "/v1/limits", e.key("exec", "exec"), nil).want(t, 403, "api_key_action_forbidden")
		scoped := e.keyWith("scoped", func(k *store.APIKey) { k.Sandboxes = []string{"box"} }, "account.read")
		e.do("GET", "/v1/limits", scoped, nil).want(t, 403, "forbidden")
		e.do("GET", "/v1/limits?window=minute", e.admin, nil).want(t, 400, "invalid_query")
		e.do("GET", "/v1/limits", "", nil).want(t, 401, "unauthorized")
	})
}

// Fork needs sandbox.fork, not sandbox.create.
func TestForkAction(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		e.do("POST", "/v1/sandboxes", e.admin, `{"name":"src"}`).want(t, 202, "")
		e.do("POST", "/v1/sandboxes/src/fork", e.key("creator", "sandbox.create"), `{"name":"a"}`).want(t, 403, "api_key_action_forbidden")
		e.do("POST", "/v1/sandboxes/src/fork", e.key("forker", "sandbox.fork"), `{"name":"b"}`).want(t, 202, "")
		ci, _ := api.PresetActions("ci")
		e.do("POST", "/v1/sandboxes/src/fork", e.key("ci", ci...), `{"name":"c"}`).want(t, 202, "")
		fs, _ := api.PresetActions("full-sandbox")
		e.do("POST", "/v1/sandboxes/src/fork", e.key("fs", fs...), `{"name":"d"}`).want(t, 403, "api_key_action_forbidden")
	})
}

// environment: false and snapshots: false are accepted and recorded, and
// GET shows them with the docs' other fields.
func TestEnvironmentAndSnapshotsFields(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		tests := []struct {
			body             string
			environment, snp bool
		}{
			{`{"name":"a"}`, true, true},
			{`{"name":"b","environment":false,"snapshots":false}`, false, false},
			{`{"name":"c","environment":null,"snapshots":true}`, true, true},
			{`{"name":"d","snapshots":null}`, true, true},
		}
		for _, tt := range tests {
			e.do("POST", "/v1/sandboxes", e.admin, tt.body).want(t, 202, "")
			var got map[string]any
			name := strings.Split(tt.body, `"`)[3]
			e.do("GET", "/v1/sandboxes/"+name, e.admin, nil).want(t, 200, "").json(t, &got)
			if got["environment"] != tt.environment || got["snapshots"] != tt.snp || got["setup_status"] != "none" {
				t.Errorf("%s: got environment %v, snapshots %v, setup_status %v", tt.body, got["environment"], got["snapshots"], got["setup_status"])
			}
			for _, f := range []string{"warm_until", "updated_at", "env_names", "repo"} {
				if _, ok := got[f]; !ok {
					t.Errorf("%s: no %s in %v", tt.body, f, got)
				}
			}
		}
		sb, _ := e.store.Sandbox(context.Background(), e.account.ID, "b")
		if !sb.NoEnvironment || !sb.NoSnapshots {
			t.Fatalf("b: not recorded: %+v", sb)
		}
		// A sandbox with snapshots off has no fork at all, not even of its
		// current state (the docs: no fork or restore, 409 snapshots_off).
		e.stopped("c")
		e.stopped("d")
		e.do("POST", "/v1/sandboxes/b/fork", e.admin, `{"name":"b-2"}`).want(t, 409, "snapshots_off")
		e.do("POST", "/v1/sandboxes/b/fork", e.admin, `{"name":"b-2","snapshots":true}`).want(t, 409, "snapshots_off")
		e.do("POST", "/v1/sandboxes/b/fork", e.admin, `{"name":"b-2","count":2}`).want(t, 409, "snapshots_off")
		e.do("POST", "/v1/sandboxes/b/restore", e.admin, `{"snapshot":"latest"}`).want(t, 409, "snapshots_off")
		// A fork keeps environment: false, and its source's snapshots
		// setting unless it says otherwise: snapshots: false makes a copy
		// a stop erases.
		e.do("POST", "/v1/sandboxes", e.admin, `{"name":"e","environment":false}`).want(t, 202, "")
		e.do("POST", "/v1/sandboxes/e/fork", e.admin, `{"name":"e-2"}`).want(t, 202, "")
		e.do("POST", "/v1/sandboxes/a/fork", e.admin, `{"name":"a-2","snapshots":false}`).want(t, 202, "")
		for name, want := range map[string][2]bool{"b-2": {false, false}, "e-2": {true, false}, "a-2": {false, true}} {
			sb, err := e.store.Sandbox(context.Background(), e.account.ID, name)
			if name == "b-2" {
				if err == nil {
					t.Errorf("a refused fork made %s", name)
				}
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if sb.NoEnvironment != want[0] || sb.NoSnapshots != want[1] {
				t.Errorf("%s: no_environment %v, no_snapshots %v; want %v", name, sb.NoEnvironment, sb.NoSnapshots, want)
			}
		}
	})
}
