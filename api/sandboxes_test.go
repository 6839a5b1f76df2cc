package api_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"froog.tech/froog/store"
)

type sandboxJSON struct {
	ID, Name, State, Size, OS string
	DesiredState              string            `json:"desired_state"`
	Labels                    map[string]string `json:"labels"`
	TTLSecs                   int64             `json:"ttl_secs"`
	AutoStart                 bool              `json:"auto_start"`
	MaxLifetimeSecs           int64             `json:"max_lifetime_secs"`
	DeleteAfterSecs           int64             `json:"delete_after_secs"`
	StopID                    string            `json:"stop_id"`
}

func TestSandboxLifecycle(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		var sb sandboxJSON
		r := e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "ci-1", "size": "small", "labels": map[string]string{"team": "web"}, "auto_start": true, "max_lifetime_secs": 7200, "delete_after_secs": 86400})
		r.want(t, 202, "").json(t, &sb)
		if sb.Name != "ci-1" || sb.Size != "small" || sb.OS != "ubuntu-24.04" || sb.TTLSecs != 3600 || sb.State != "creating" ||
			sb.DesiredState != "running" || !sb.AutoStart || sb.Labels["team"] != "web" || sb.MaxLifetimeSecs != 7200 {
			t.Fatalf("created: %+v", sb)
		}
		e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "ci-1"}).want(t, 409, "conflict")
		e.do("GET", "/v1/sandboxes/ci-1", e.admin, nil).want(t, 200, "").json(t, &sb)
		e.do("GET", "/v1/sandboxes/nope", e.admin, nil).want(t, 404, "not_found")

		// A generated name when none is given.
		var gen sandboxJSON
		e.do("POST", "/v1/sandboxes", e.admin, nil).want(t, 202, "").json(t, &gen)
		if !strings.HasPrefix(gen.Name, "sandbox-") {
			t.Fatalf("generated name %q", gen.Name)
		}

		sb = sandboxJSON{}
		e.do("PATCH", "/v1/sandboxes/ci-1", e.admin, map[string]any{"name": "ci-2", "ttl_secs": 0, "labels": map[string]any{"team": nil, "tier": "gold"}}).want(t, 200, "").json(t, &sb)
		if sb.Name != "ci-2" || sb.TTLSecs != 0 || sb.Labels["tier"] != "gold" || sb.Labels["team"] != "" {
			t.Fatalf("patched: %+v", sb)
		}
		e.do("PATCH", "/v1/sandboxes/ci-2", e.admin, map[string]any{"name": gen.Name}).want(t, 409, "conflict")

		var st struct{ ID, StopID, Status, Sandbox string }
		e.do("POST", "/v1/sandboxes/ci-2/stop", e.admin, nil).want(t, 202, "").json(t, &st)
		if st.Status != "pending" || st.Sandbox != "ci-2" || !strings.HasPrefix(st.ID, "stop_") {
			t.Fatalf("stop: %+v", st)
		}
		var again struct{ ID string }
		e.do("POST", "/v1/sandboxes/ci-2/stop", e.admin, nil).want(t, 202, "").json(t, &again)
		if again.ID != st.ID {
			t.Fatalf("second stop %s, want the pending %s", again.ID, st.ID)
		}
		e.do("GET", "/v1/stops/"+st.ID, e.admin, nil).want(t, 200, "")
		e.do("GET", "/v1/stops/stop_nope", e.admin, nil).want(t, 404, "not_found")
		e.do("POST", "/v1/sandboxes/ci-2/start", e.admin, map[string]any{"ttl_secs": 60}).want(t, 202, "").json(t, &sb)
		if sb.DesiredState != "running" || sb.TTLSecs != 60 {
			t.Fatalf("started: %+v", sb)
		}
		e.do("POST", "/v1/sandboxes/ci-2/start", e.admin, map[string]any{"size": "large"}).want(t, 409, "conflict")

		e.do("DELETE", "/v1/sandboxes/ci-2", e.admin, nil).want(t, 202, "")
		e.do("GET", "/v1/sandboxes/ci-2", e.admin, nil).want(t, 404, "not_found")
		e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "ci-2"}).want(t, 202, "") // the name is free again

		var events struct {
			Events []struct{ Action, Target, Actor, IP string } `json:"events"`
		}
		e.do("GET", "/v1/audit", e.admin, nil).want(t, 200, "").json(t, &events)
		var got []string
		for _, ev := range events.Events {
			got = append(got, ev.Action+" "+ev.Target)
		}
		want := "[sandbox.create ci-2 sandbox.delete ci-2 sandbox.start ci-2 sandbox.stop ci-2 sandbox.update ci-1 sandbox.create " + gen.Name + " sandbox.create ci-1]"
		if fmt.Sprint(got) != want {
			t.Fatalf("audit:\ngot  %v\nwant %v", got, want)
		}
		if events.Events[0].IP != "127.0.0.1" || !strings.HasPrefix(events.Events[0].Actor, "key_") {
			t.Fatalf("audit actor/ip: %+v", events.Events[0])
		}
	})
}

func TestSandboxListFiltersAndCursor(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		for i := 0; i < 5; i++ {
			team := []string{"web", "api"}[i%2]
			e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": fmt.Sprint("ci-", i), "labels": map[string]string{"team": team}, "auto_start": false}).want(t, 202, "")
		}
		names := func(path string) ([]string, string) {
			t.Helper()
			var list []sandboxJSON
			r := e.do("GET", path, e.admin, nil).want(t, 200, "")
			r.json(t, &list)
			var out []string
			for _, sb := range list {
				out = append(out, sb.Name)
			}
			return out, r.header.Get("X-Next-Cursor")
		}
		tests := []struct{ path, want string }{
			{"/v1/sandboxes", "[ci-0 ci-1 ci-2 ci-3 ci-4]"},
			{"/v1/sandboxes?label=team=web", "[ci-0 ci-2 ci-4]"},
			{"/v1/sandboxes?label=team", "[ci-0 ci-1 ci-2 ci-3 ci-4]"},
			{"/v1/sandboxes?label=team=web&label=team=api", "[]"},
			{"/v1/sandboxes?name=ci-3", "[ci-3]"},
			{"/v1/sandboxes?name_prefix=ci-&state=creating,stopped", "[ci-0 ci-1 ci-2 ci-3 ci-4]"},
			{"/v1/sandboxes?state=running", "[]"},
		}
		for _, tt := range tests {
			if got, _ := names(tt.path); fmt.Sprint(got) != tt.want {
				t.Errorf("%s: got %v, want %v", tt.path, got, tt.want)
			}
		}
		var all []string
		path := "/v1/sandboxes?limit=2"
		for i := 0; i < 10; i++ {
			page, next := names(path)
			all = append(all, page...)
			if next == "" {
				break
			}
			path = "/v1/sandboxes?limit=2&cursor=" + next
		}
		if fmt.Sprint(all) != "[ci-0 ci-1 ci-2 ci-3 ci-4]" {
			t.Fatalf("paging: got %v", all)
		}
	})
}

// Every handler rejects bad input with 400 and a specific code, and writes
// nothing.
func TestMalformedInput(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "box"}).want(t, 202, "")
		e.do("POST", "/v1/sandboxes/box/urls", e.admin, map[string]any{"port": 3000}).want(t, 201, "")
		big := `{"name":"` + strings.Repeat("a", 4<<20) + `"}`
		tests := []struct {
			method, path, body, code string
		}{
			{"POST", "/v1/sandboxes", `{"name":`, "invalid_json"},
			{"POST", "/v1/sandboxes", `[1,2]`, "invalid_json"},
			{"POST", "/v1/sandboxes", `{"name":"a"} {"name":"b"}`, "invalid_json"},
			{"POST", "/v1/sandboxes", `{"nmae":"x"}`, "unknown_field"},
			{"POST", "/v1/sandboxes", `{"name":42}`, "invalid_type"},
			{"POST", "/v1/sandboxes", `{"ttl_secs":"1h"}`, "invalid_type"},
			{"POST", "/v1/sandboxes", `{"labels":["a"]}`, "invalid_type"},
			{"POST", "/v1/sandboxes", `{"name":"Box"}`, "invalid_value"},
			{"POST", "/v1/sandboxes", `{"name":"self"}`, "invalid_value"},
			{"POST", "/v1/sandboxes", `{"name":"-box"}`, "invalid_value"},
			{"POST", "/v1/sandboxes", `{"name":"` + strings.Repeat("a", 41) + `"}`, "invalid_value"},
			{"POST", "/v1/sandboxes", `{"size":"huge"}`, "invalid_value"},
			{"POST", "/v1/sandboxes", `{"os":"windows"}`, "invalid_value"},
			{"POST", "/v1/sandboxes", `{"ttl_secs":-1}`, "invalid_value"},
			{"POST", "/v1/sandboxes", `{"ttl_secs":2592001}`, "invalid_value"},
			{"POST", "/v1/sandboxes", `{"max_lifetime_secs":2592001}`, "invalid_value"},
			{"POST", "/v1/sandboxes", `{"delete_after_secs":31536001}`, "invalid_value"},
			{"POST", "/v1/sandboxes", `{"labels":{"-x":"y"}}`, "invalid_value"},
			{"POST", "/v1/sandboxes", `{"labels":{"x":"a\nb"}}`, "invalid_value"},
			{"POST", "/v1/sandboxes", `{"env":{"1X":"y"}}`, "invalid_value"},
			{"POST", "/v1/sandboxes", `{"env":{"":"y"}}`, "invalid_value"},
			{"POST", "/v1/sandboxes", `{"env":{"A-B":"y"}}`, "invalid_value"},
			{"POST", "/v1/sandboxes", `{"env":{"` + strings.Repeat("A", 129) + `":"y"}}`, "invalid_value"},
			{"POST", "/v1/sandboxes", `{"env":` + manyVars(51) + `}`, "invalid_value"},
			{"POST", "/v1/sandboxes", `{"env":{"A":"` + strings.Repeat("v", 16<<10) + `"}}`, "invalid_value"},
			{"POST", "/v1/sandboxes", `{"env":{"A":5}}`, "invalid_type"},
			{"POST", "/v1/sandboxes", `{"environment":"default"}`, "invalid_value"},
			{"POST", "/v1/sandboxes", `{"environment":{"repos":[]}}`, "invalid_value"},
			{"POST", "/v1/sandboxes", `{"snapshots":"off"}`, "invalid_value"},
			{"POST", "/v1/sandboxes", `{"snapshots":0}`, "invalid_value"},
			{"POST", "/v1/sandboxes", `{"setup":7}`, "invalid_type"},
			{"POST", "/v1/sandboxes", `{"count":0}`, "invalid_value"},
			{"POST", "/v1/sandboxes", `{"count":101}`, "invalid_value"},
			{"POST", "/v1/sandboxes", `{"count":"3"}`, "invalid_type"},
			{"POST", "/v1/sandboxes", `{"name":"` + strings.Repeat("a", 38) + `","count":10}`, "invalid_value"},
			{"POST", "/v1/sandboxes", big, "request_too_large"},
			{"GET", "/v1/sandboxes?limit=0", "", "invalid_query"},
			{"GET", "/v1/sandboxes?limit=201", "", "invalid_query"},
			{"GET", "/v1/sandboxes?bogus=1", "", "invalid_query"},
			{"GET", "/v1/sandboxes?state=sleeping", "", "invalid_query"},
			{"GET", "/v1/sandboxes?cursor=yesterday", "", "invalid_query"},
			{"GET", "/v1/sandboxes?label==x", "", "invalid_query"},
			{"PATCH", "/v1/sandboxes/box", ``, "invalid_json"},
			{"PATCH", "/v1/sandboxes/box", `{"name":"BAD"}`, "invalid_value"},
			{"PATCH", "/v1/sandboxes/box", `{"labels":{"a":5}}`, "invalid_type"},
			{"PATCH", "/v1/sandboxes/box", `{"state":"running"}`, "unknown_field"},
			{"PATCH", "/v1/sandboxes/box", `{"ttl_secs":99999999}`, "invalid_value"},
			{"POST", "/v1/sandboxes/box/start", `{"size":"huge"}`, "invalid_value"},
			{"POST", "/v1/sandboxes/box/start", `{"environment":1}`, "invalid_value"},
			{"POST", "/v1/sandboxes/box/start", `{"env":{"A=B":"c"}}`, "invalid_value"},
			{"POST", "/v1/sandboxes/box/start", `{"env":{"A":"` + strings.Repeat("v", 16<<10) + `"}}`, "invalid_value"},
			{"PATCH", "/v1/sandboxes/box", `{"env":{"1A":"x"}}`, "invalid_value"},
			{"PATCH", "/v1/sandboxes/box", `{"env":{"1A":null}}`, "invalid_value"},
			{"PATCH", "/v1/sandboxes/box", `{"env":{"A":"a\u0000b"}}`, "invalid_value"},
			{"PATCH", "/v1/sandboxes/box", `{"env":{"A":1}}`, "invalid_type"},
			{"PATCH", "/v1/sandboxes/box", `{"env":["A"]}`, "invalid_type"},
			{"POST", "/v1/sandboxes/box/stop", `{"now":true}`, "unknown_field"},
			{"POST", "/v1/sandboxes/box/touch", `{"at":"2026-12-01T10:00:00Z"}`, "unknown_field"},
			{"POST", "/v1/sandboxes/box/touch", `{`, "invalid_json"},
			{"POST", "/v1/sandboxes/box/touch", `[]`, "invalid_json"},
			{"POST", "/v1/sandboxes/box/touch", `"now"`, "invalid_json"},
			{"POST", "/v1/sandboxes/box/touch", `{} {}`, "invalid_json"},
			{"POST", "/v1/sandboxes/Box/touch", ``, "invalid_value"},
			{"POST", "/v1/sandboxes/self/touch", ``, "invalid_value"},
			{"POST", "/v1/sandboxes/box/touch", `{"n":"` + strings.Repeat("a", 1<<20) + `"}`, "request_too_large"},
			{"POST", "/v1/sandboxes/box/fork", ``, "invalid_json"},
			{"POST", "/v1/sandboxes/box/fork", `{}`, "invalid_value"},
			{"POST", "/v1/sandboxes/box/fork", `{"name":"Box-2"}`, "invalid_value"},
			{"POST", "/v1/sandboxes/box/fork", `{"name":"box-2","size":"huge"}`, "invalid_value"},
			{"POST", "/v1/sandboxes/box/fork", `{"name":"box-2","ttl_secs":-5}`, "invalid_value"},
			{"POST", "/v1/sandboxes/box/fork", `{"name":"box-2","env":{"a b":"c"}}`, "invalid_value"},
			{"POST", "/v1/sandboxes/box/fork", `{"name":"box-2","count":0}`, "invalid_value"},
			{"POST", "/v1/sandboxes/box/fork", `{"name":"box-2","count":101}`, "invalid_value"},
			{"POST", "/v1/sandboxes/box/fork", `{"name":"box-2","count":"3"}`, "invalid_type"},
			{"POST", "/v1/sandboxes/box/fork", `{"name":"box-2","count":1.5}`, "invalid_type"},
			{"POST", "/v1/sandboxes/box/fork", `{"name":"` + strings.Repeat("a", 38) + `","count":10}`, "invalid_value"},
			{"POST", "/v1/sandboxes/box/fork", `{"name":"box-2","snapshots":"no"}`, "invalid_value"},
			{"POST", "/v1/sandboxes/box/fork", `{"name":"box-2","environment":false}`, "unknown_field"},
			{"POST", "/v1/sandboxes/box/fork", `{"name":"box-2","snapshot":5}`, "invalid_type"},
			{"POST", "/v1/sandboxes/box/snapshots", `{"label":"Web Stack"}`, "invalid_value"},
			{"POST", "/v1/sandboxes/box/snapshots", `{"label":"latest"}`, "invalid_value"},
			{"POST", "/v1/sandboxes/box/snapshots", `{"label":"snap_0123"}`, "invalid_value"},
			{"POST", "/v1/sandboxes/box/snapshots", `{"label":"` + strings.Repeat("l", 64) + `"}`, "invalid_value"},
			{"POST", "/v1/sandboxes/box/snapshots", `{"label":7}`, "invalid_type"},
			{"POST", "/v1/sandboxes/box/snapshots", `{"name":"x"}`, "unknown_field"},
			{"POST", "/v1/sandboxes/box/restore", ``, "invalid_json"},
			{"POST", "/v1/sandboxes/box/restore", `{}`, "invalid_value"},
			{"POST", "/v1/sandboxes/box/restore", `{"snapshot":""}`, "invalid_value"},
			{"POST", "/v1/sandboxes/box/restore", `{"snapshot":1}`, "invalid_type"},
			{"GET", "/v1/sandboxes/box/snapshots?all=1", "", "invalid_query"},
			{"GET", "/v1/snapshots?limit=1", "", "invalid_query"},
			{"GET", "/v1/saved-snapshots?x=1", "", "invalid_query"},
			{"POST", "/v1/sandboxes/box/fork", `{"name":"box-2","os":"debian"}`, "unknown_field"},
			{"POST", "/v1/sandboxes/box/fork", `{"name":2}`, "invalid_type"},
			{"POST", "/v1/sandboxes/box/urls", `{}`, "invalid_value"},
			{"POST", "/v1/sandboxes/box/urls", `{"port":0}`, "invalid_value"},
			{"POST", "/v1/sandboxes/box/urls", `{"port":65536}`, "invalid_value"},
			{"POST", "/v1/sandboxes/box/urls", `{"port":"3000"}`, "invalid_type"},
			{"POST", "/v1/sandboxes/box/urls", `{"port":3001,"subdomain":"ab"}`, "invalid_value"},
			{"POST", "/v1/sandboxes/box/urls", `{"port":3001,"subdomain":"Acme"}`, "invalid_value"},
			{"POST", "/v1/sandboxes/box/urls", `{"port":3001,"subdomain":"acme-"}`, "invalid_value"},
			{"POST", "/v1/sandboxes/box/urls", `{"port":3001,"title":"` + strings.Repeat("t", 101) + `"}`, "invalid_value"},
			{"POST", "/v1/sandboxes/box/urls", `{"port":3001,"public":"yes"}`, "invalid_type"},
			{"DELETE", "/v1/sandboxes/box/urls/http", ``, "invalid_value"},
			{"POST", "/v1/sandboxes/box/urls/3000/tokens", `{"ttl_secs":59}`, "invalid_value"},
			{"POST", "/v1/sandboxes/box/urls/3000/tokens", `{"ttl_secs":2592001}`, "invalid_value"},
			{"POST", "/v1/sandboxes/box/urls/3000/tokens", `{"label":"` + strings.Repeat("l", 101) + `"}`, "invalid_value"},
			{"POST", "/v1/sandboxes/box/urls/3000/tokens", `{"ttl":60}`, "unknown_field"},
			{"GET", "/v1/audit?limit=-1", "", "invalid_query"},
			{"GET", "/v1/audit?cursor=abc", "", "invalid_query"},
			{"GET", "/v1/audit?since=1", "", "invalid_query"},
		}
		before := snapshot(t, e)
		for _, tt := range tests {
			name := tt.method + " " + tt.path + " " + tt.body
			if len(name) > 80 {
				name = name[:80]
			}
			t.Run(name, func(t *testing.T) {
				e.do(tt.method, tt.path, e.admin, tt.body).want(t, 400, tt.code)
			})
		}
		if after := snapshot(t, e); after != before {
			t.Fatalf("rejected requests changed the store:\nbefore %s\nafter  %s", before, after)
		}
	})
}

// manyVars is a JSON object of n variables.
func manyVars(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(`"V%d":"x"`, i)
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// snapshot is what the API shows of the account, to compare before and after.
func snapshot(t *testing.T, e *env) string {
	t.Helper()
	var out []string
	for _, p := range []string{"/v1/sandboxes", "/v1/sandboxes/box/urls", "/v1/sandboxes/box/urls/3000/tokens", "/v1/audit"} {
		r := e.do("GET", p, e.admin, nil)
		var v any
		json.Unmarshal(r.body, &v)
		b, _ := json.Marshal(v)
		out = append(out, string(b))
	}
	return strings.Join(out, "\n")
}

// A fork: the source's settings, env on top, fork_of for hostctl, one
// audit event, and a retry with the same key makes nothing more.
func TestFork(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		e.do("POST", "/v1/sandboxes", e.admin, `{"name":"src","size":"large","ttl_secs":600,"labels":{"team":"a"},"env":{"A":"1","B":"2"},"auto_start":true}`).want(t, 202, "")
		e.do("POST", "/v1/sandboxes/nope/fork", e.admin, `{"name":"x"}`).want(t, 404, "not_found")
		e.do("POST", "/v1/sandboxes/src/fork", e.admin, `{"name":"src"}`).want(t, 409, "conflict")
		body := `{"name":"src-2","env":{"B":"3"}}`
		first := e.do("POST", "/v1/sandboxes/src/fork", e.admin, body, "Idempotency-Key", "f-1").want(t, 202, "")
		again := e.do("POST", "/v1/sandboxes/src/fork", e.admin, body, "Idempotency-Key", "f-1").want(t, 202, "")
		if again.header.Get("Idempotent-Replayed") != "true" || string(again.body) != string(first.body) {
			t.Fatal("the retry was not a replay")
		}
		// The same key and body on create is another request.
		e.do("POST", "/v1/sandboxes", e.admin, body, "Idempotency-Key", "f-1").want(t, 422, "idempotency_key_reused")
		var got sandboxJSON
		e.do("GET", "/v1/sandboxes/src-2", e.admin, nil).want(t, 200, "").json(t, &got)
		src, _ := e.store.Sandbox(context.Background(), e.account.ID, "src")
		fork, _ := e.store.Sandbox(context.Background(), e.account.ID, "src-2")
		if fork.ForkOf != src.ID || fork.Size != "large" || fork.TTLSecs != 600 || fork.Labels["team"] != "a" || !fork.AutoStart ||
			strings.Join(fork.EnvNames, ",") != "A,B" || len(fork.EnvSealed) == 0 || fork.DesiredState != store.StateRunning {
			t.Fatalf("fork: %+v", fork)
		}
		var audit struct {
			Events []struct {
				Action, Target string
				Detail         map[string]string
			} `json:"events"`
		}
		e.do("GET", "/v1/audit", e.admin, nil).want(t, 200, "").json(t, &audit)
		if a := audit.Events[0]; a.Action != "sandbox.fork" || a.Target != "src-2" || a.Detail["from"] != "src" {
			t.Fatalf("audit: %+v", audit.Events[0])
		}
	})
}

func TestIdempotencyKey(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		body := `{"name":"ci-9"}`
		first := e.do("POST", "/v1/sandboxes", e.admin, body, "Idempotency-Key", "k-1").want(t, 202, "")
		again := e.do("POST", "/v1/sandboxes", e.admin, body, "Idempotency-Key", "k-1").want(t, 202, "")
		if again.header.Get("Idempotent-Replayed") != "true" || string(again.body) != string(first.body) {
			t.Fatalf("replay: header %q, body %s vs %s", again.header.Get("Idempotent-Replayed"), again.body, first.body)
		}
		e.do("POST", "/v1/sandboxes", e.admin, `{"name":"ci-10"}`, "Idempotency-Key", "k-1").want(t, 422, "idempotency_key_reused")
		// Errors are not kept: a retry after one runs again.
		e.do("POST", "/v1/sandboxes", e.admin, body, "Idempotency-Key", "k-2").want(t, 409, "conflict")
		e.do("DELETE", "/v1/sandboxes/ci-9", e.admin, nil).want(t, 202, "")
		e.do("POST", "/v1/sandboxes", e.admin, body, "Idempotency-Key", "k-2").want(t, 202, "")
		// A first request still running.
		sum := sha256.Sum256([]byte(body))
		if _, err := e.store.BeginIdempotent(context.Background(), store.Idempotency{AccountID: e.account.ID, Key: "k-3", RequestHash: hex.EncodeToString(sum[:]), CreatedAt: e.now()}); err != nil {
			t.Fatal(err)
		}
		e.do("POST", "/v1/sandboxes", e.admin, body, "Idempotency-Key", "k-3").want(t, 409, "idempotency_key_in_use")
		e.do("POST", "/v1/sandboxes", e.admin, body, "Idempotency-Key", strings.Repeat("k", 256)).want(t, 400, "invalid_header")
		var list []sandboxJSON
		e.do("GET", "/v1/sandboxes", e.admin, nil).want(t, 200, "").json(t, &list)
		if len(list) != 1 {
			t.Fatalf("%d sandboxes, want 1", len(list))
		}
	})
}

// TestIdempotencyKeyOtherKey: an Idempotency-Key's answer is replayed
// only to a key that reaches what it made: the key that sent it, or one
// that reaches every sandbox, or a limited one whose scope holds every
// sandbox made (the fork's copies included). Any other key gets 422
// idempotency_key_reused (the docs' answer to a different request) and learns nothing of the answer; nothing is
// made again.
func TestIdempotencyKeyOtherKey(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		acts := []string{"sandbox.create", "sandbox.fork", "sandbox.read"}
		byName := e.keyWith("by-name", func(k *store.APIKey) { k.Sandboxes = []string{"src", "one"} }, acts...)
		byLabel := e.keyWith("by-label", func(k *store.APIKey) { k.Labels = map[string]string{"team": "a"} }, acts...)
		other := e.keyWith("other", func(k *store.APIKey) { k.Labels = map[string]string{"team": "b"} }, acts...)
		owner2 := e.key("owner-2", "*")
		e.do("POST", "/v1/sandboxes", e.admin, `{"name":"src","labels":{"team":"a"}}`).want(t, 202, "")

		// The owner's create: the other owner key gets it again, no
		// limited key does (one is limited to its name, but did not make it).
		first := e.do("POST", "/v1/sandboxes", e.admin, `{"name":"one"}`, "Idempotency-Key", "i-1").want(t, 202, "")
		again := e.do("POST", "/v1/sandboxes", owner2, `{"name":"one"}`, "Idempotency-Key", "i-1").want(t, 202, "")
		if string(again.body) != string(first.body) || again.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("the other owner key's replay: %s vs %s", again.body, first.body)
		}
		var differs struct{ Error struct{ Message string } }
		e.do("POST", "/v1/sandboxes", e.admin, `{"name":"two"}`, "Idempotency-Key", "i-1").want(t, 422, "idempotency_key_reused").json(t, &differs)
		for name, k := range map[string]string{"label": byLabel, "other": other} {
			r := e.do("POST", "/v1/sandboxes", k, `{"name":"one"}`, "Idempotency-Key", "i-1").want(t, 422, "idempotency_key_reused")
			var got struct{ Error struct{ Message string } }
			r.json(t, &got)
			if strings.Contains(string(r.body), "sbx_") || r.header.Get("Idempotent-Replayed") != "" || got.Error.Message != differs.Error.Message {
				t.Fatalf("the %s key got the answer, or another refusal than a different request's (%q): %s", name, differs.Error.Message, r.body)
			}
		}
		// The name key reaches "one" by name: it may have the answer.
		e.do("POST", "/v1/sandboxes", byName, `{"name":"one"}`, "Idempotency-Key", "i-1").want(t, 202, "")

		// A label key's fork with count: replayed to it and to the owner,
		// not to a key of another label nor to the name key (which reaches
		// src but not the copies).
		fork := e.do("POST", "/v1/sandboxes/src/fork", byLabel, `{"name":"try","count":2}`, "Idempotency-Key", "i-2").want(t, 202, "")
		for _, k := range []string{byLabel, e.admin} {
			r := e.do("POST", "/v1/sandboxes/src/fork", k, `{"name":"try","count":2}`, "Idempotency-Key", "i-2").want(t, 202, "")
			if string(r.body) != string(fork.body) {
				t.Fatalf("fork replay: %s vs %s", r.body, fork.body)
			}
		}
		e.do("POST", "/v1/sandboxes/src/fork", byName, `{"name":"try","count":2}`, "Idempotency-Key", "i-2").want(t, 422, "idempotency_key_reused")
		// A copy gone: the label key, which made it, still gets its answer.
		e.do("DELETE", "/v1/sandboxes/try-1", e.admin, nil).want(t, 202, "")
		e.do("POST", "/v1/sandboxes/src/fork", byLabel, `{"name":"try","count":2}`, "Idempotency-Key", "i-2").want(t, 202, "")
		var list []sandboxJSON
		e.do("GET", "/v1/sandboxes", e.admin, nil).want(t, 200, "").json(t, &list)
		if len(list) != 3 { // src, one, try-2
			t.Fatalf("%d sandboxes, want 3: %+v", len(list), list)
		}
	})
}

func TestRunningLimit(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		for i := 0; i < 5; i++ {
			e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": fmt.Sprint("b", i)}).want(t, 202, "")
		}
		e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "b5"}).want(t, 429, "limit_reached")
		e.do("POST", "/v1/sandboxes/b0/stop", e.admin, nil).want(t, 202, "")
		e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "b5"}).want(t, 202, "")
		e.do("POST", "/v1/sandboxes/b0/start", e.admin, nil).want(t, 429, "limit_reached")
	})
}

func TestMethodAndPathErrors(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		r := e.do("PUT", "/v1/sandboxes", e.admin, nil).want(t, http.StatusMethodNotAllowed, "method_not_allowed")
		var b struct {
			Error struct {
				RequestID string `json:"request_id"`
			} `json:"error"`
		}
		r.json(t, &b)
		if id := r.header.Get("X-Request-Id"); id == "" || id != b.Error.RequestID {
			t.Fatalf("X-Request-Id %q, error.request_id %q", id, b.Error.RequestID)
		}
		e.do("GET", "/v1/nothing", e.admin, nil).want(t, 404, "not_found")
		e.do("GET", "/v1/sandboxes/Bad_Name", e.admin, nil).want(t, 400, "invalid_value")
		// A 405 says what the path allows (RFC 9110, 15.5.6).
		for _, tt := range []struct{ method, path, allow string }{
			{"PUT", "/v1/sandboxes", "GET, POST"},
			{"POST", "/v1/sandboxes/box", "DELETE, GET, PATCH"},
			{"DELETE", "/v1/api-keys", "GET, POST"},
			{"GET", "/v1/wall", "POST"},
			{"PATCH", "/v1/sandboxes/box/files", "DELETE, GET"},
			{"POST", "/v1/openapi.json", "GET"},
		} {
			r := e.do(tt.method, tt.path, e.admin, nil).want(t, http.StatusMethodNotAllowed, "method_not_allowed")
			if got := r.header.Get("Allow"); got != tt.allow {
				t.Errorf("%s %s: Allow %q, want %q", tt.method, tt.path, got, tt.allow)
			}
		}
	})
}
