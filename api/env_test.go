package api_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"froog.tech/froog/internal/wait"
	"froog.tech/froog/store"
)

// A sandbox's env is shown by name only, and its values are in no answer,
// no audit event, no log line, no store record and no change on the feed.
func TestEnvSealed(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		const secret = "s3cr3t-value-for-env"
		var sb map[string]any
		e.do("POST", "/v1/sandboxes", e.admin, `{"name":"box","env":{"API_KEY":"`+secret+`","B":"1"}}`).want(t, 202, "").json(t, &sb)
		if names, _ := json.Marshal(sb["env_names"]); string(names) != `["API_KEY","B"]` {
			t.Fatalf("create: env_names %s", names)
		}
		patched := e.do("PATCH", "/v1/sandboxes/box", e.admin, `{"env":{"B":null,"C":"`+secret+`-2"}}`).want(t, 200, "")
		patched.json(t, &sb)
		if names, _ := json.Marshal(sb["env_names"]); string(names) != `["API_KEY","C"]` {
			t.Fatalf("patch: env_names %s", names)
		}
		e.do("POST", "/v1/sandboxes/box/fork", e.admin, `{"name":"copy","env":{"D":"`+secret+`-3"}}`).want(t, 202, "")
		e.stopped("box")
		e.do("POST", "/v1/sandboxes/box/start", e.admin, `{"env":{"E":"`+secret+`-4"}}`).want(t, 202, "")
		var fork map[string]any
		e.do("GET", "/v1/sandboxes/copy", e.admin, nil).want(t, 200, "").json(t, &fork)
		if names, _ := json.Marshal(fork["env_names"]); string(names) != `["API_KEY","C","D"]` {
			t.Fatalf("fork: env_names %s", names)
		}

		seen := append([]string{snapshot(t, e), string(patched.body), e.logs.String()}, feedChanges(t, e)...)
		ctx := context.Background()
		for _, name := range []string{"box", "copy"} {
			rec, _ := e.store.Sandbox(ctx, e.account.ID, name)
			b, _ := json.Marshal(rec)
			seen = append(seen, string(b))
			if len(rec.EnvSealed) == 0 {
				t.Fatalf("%s: no sealed env", name)
			}
		}
		for _, s := range seen {
			if strings.Contains(s, secret) {
				t.Fatalf("a value in the clear: %.300s", s)
			}
		}
		// A sealed env moved to another sandbox does not open.
		box, _ := e.store.Sandbox(ctx, e.account.ID, "box")
		cp, _ := e.store.Sandbox(ctx, e.account.ID, "copy")
		if _, err := e.store.UpdateSandbox(ctx, cp.ID, func(sb *store.Sandbox, _ *store.AuditEvent) error {
			sb.EnvSealed = box.EnvSealed
			return nil
		}, nil); err != nil {
			t.Fatal(err)
		}
		e.do("PATCH", "/v1/sandboxes/copy", e.admin, `{"env":{"X":"1"}}`).want(t, 500, "internal")
	})
}

// The sandbox's env reaches exec and jobs, under the request's own.
func TestEnvReachesCommands(t *testing.T) {
	forEachLiveStore(t, func(t *testing.T, e *liveEnv) {
		e.do("POST", "/v1/sandboxes", e.admin, `{"name":"box","environment":false,"snapshots":false,"env":{"A":"own a","B":"own b","Q":"it's"}}`).want(t, 202, "")
		e.waitState("box", "running")
		var res struct{ Stdout string }
		e.do("POST", "/v1/sandboxes/box/exec", e.admin, map[string]any{"command": `printf '%s|%s|%s' "$A" "$B" "$Q"`, "env": map[string]string{"B": "req b"}}).want(t, 200, "").json(t, &res)
		if res.Stdout != "own a|req b|it's" {
			t.Fatalf("exec: got %q, want %q", res.Stdout, "own a|req b|it's")
		}
		e.do("PATCH", "/v1/sandboxes/box", e.admin, `{"env":{"A":null,"C":"new"}}`).want(t, 200, "")
		var j struct{ ID string }
		e.do("POST", "/v1/sandboxes/box/jobs", e.admin, map[string]any{"command": `printf '%s|%s' "${A-unset}" "$C"`}).want(t, 201, "").json(t, &j)
		var got jobJSON
		if !wait.Until(10*time.Second, func() bool { got = e.job("box", j.ID, 0); return got.Done }) {
			t.Fatalf("job never ended: %+v", got)
		}
		if got.Output != "unset|new" {
			t.Fatalf("job: got %q, want %q", got.Output, "unset|new")
		}
	})
}
