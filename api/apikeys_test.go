package api_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"froog.tech/froog/api"
	"froog.tech/froog/internal/testkit"
	"froog.tech/froog/store"
)

type keyJSON struct {
	ID               string            `json:"id"`
	Label            string            `json:"label"`
	Key              string            `json:"key"`
	Actions          []string          `json:"actions"`
	Sandboxes        []string          `json:"sandboxes"`
	Labels           map[string]string `json:"labels"`
	ExpiresAt        *time.Time        `json:"expires_at"`
	CreatedAt        time.Time         `json:"created_at"`
	RotatedAt        *time.Time        `json:"rotated_at"`
	LastUsedAt       *time.Time        `json:"last_used_at"`
	Requests30d      int               `json:"requests_30d"`
	SandboxesCreated []string          `json:"sandboxes_created"`
}

type keyListJSON struct {
	APIKeys []keyJSON `json:"api_keys"`
}

func (e *env) listKeys(t *testing.T, key string) map[string]keyJSON {
	t.Helper()
	var l keyListJSON
	e.do("GET", "/v1/api-keys", key, nil).want(t, 200, "").json(t, &l)
	out := map[string]keyJSON{}
	for _, k := range l.APIKeys {
		out[k.ID] = k
	}
	return out
}

func (e *env) createKey(t *testing.T, key string, body map[string]any) keyJSON {
	t.Helper()
	var k keyJSON
	e.do("POST", "/v1/api-keys", key, body).want(t, 201, "").json(t, &k)
	if !strings.HasPrefix(k.Key, api.KeyPrefix) || k.ID == "" {
		t.Fatalf("create: got %+v, want an id and a secret", k)
	}
	return k
}

func (e *env) auditActions(t *testing.T) []string {
	t.Helper()
	var a struct {
		Events []struct{ Action, Target, Actor string }
	}
	e.do("GET", "/v1/audit", e.admin, nil).want(t, 200, "").json(t, &a)
	var out []string
	for _, ev := range a.Events {
		out = append(out, ev.Action+" "+ev.Target)
	}
	return out
}

// The docs' API keys: create (scope, 90 days by default, the secret
// once), use, list (scope, expiry, last use, requests in 30 days,
// sandboxes it created), revoke (401 at the next request, sandboxes
// stay), each audited.
func TestAPIKeysLifecycle(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		before := e.now()
		k := e.createKey(t, e.admin, map[string]any{"label": "ci-bot", "preset": "ci", "labels": map[string]string{"team": "a"}})
		if k.Label != "ci-bot" || !slices.Contains(k.Actions, "sandbox.create") || slices.Contains(k.Actions, "account.admin") || k.Labels["team"] != "a" {
			t.Fatalf("create: %+v", k)
		}
		if k.ExpiresAt == nil || k.ExpiresAt.Before(before.AddDate(0, 0, 90)) || k.ExpiresAt.After(e.now().AddDate(0, 0, 90)) {
			t.Fatalf("expires_at %v, want 90 days from now by default", k.ExpiresAt)
		}
		e.do("POST", "/v1/sandboxes", k.Key, map[string]any{"name": "made-by-ci"}).want(t, 202, "")
		e.do("GET", "/v1/sandboxes", k.Key, nil).want(t, 200, "")
		e.do("GET", "/v1/sandboxes", k.Key, nil).want(t, 200, "")

		got, ok := e.listKeys(t, e.admin)[k.ID]
		if !ok {
			t.Fatalf("the new key is not listed")
		}
		if got.Key != "" {
			t.Fatal("a listed key shows its secret")
		}
		if got.Requests30d != 3 || got.LastUsedAt == nil || fmt.Sprint(got.SandboxesCreated) != "[made-by-ci]" || !got.ExpiresAt.Equal(*k.ExpiresAt) {
			t.Fatalf("listed: %+v; want 3 requests, a last use, sandboxes_created [made-by-ci]", got)
		}

		e.do("DELETE", "/v1/api-keys/"+k.ID, e.admin, nil).want(t, 200, "")
		e.do("GET", "/v1/sandboxes", k.Key, nil).want(t, 401, "unauthorized")
		e.do("DELETE", "/v1/api-keys/"+k.ID, e.admin, nil).want(t, 404, "not_found")
		if _, ok := e.listKeys(t, e.admin)[k.ID]; ok {
			t.Fatal("a revoked key is still listed")
		}
		e.do("GET", "/v1/sandboxes/made-by-ci", e.admin, nil).want(t, 200, "") // it stays
		want := []string{"api_key.revoke " + k.ID, "sandbox.create made-by-ci", "api_key.create " + k.ID}
		if got := e.auditActions(t); !slices.Equal(got, want) {
			t.Fatalf("audit: got %v, want %v", got, want)
		}
	})
}

// Rotating: a new secret, the old one 401 at once; id, scope and expiry
// stay; an expired key is 409 api_key_expired and keeps its secret.
func TestAPIKeysRotate(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		k := e.createKey(t, e.admin, map[string]any{"label": "box-agent", "sandboxes": []string{"box"}, "ttl_days": 7})
		var r keyJSON
		e.do("POST", "/v1/api-keys/"+k.ID+"/rotate", e.admin, nil).want(t, 200, "").json(t, &r)
		if r.ID != k.ID || r.Key == k.Key || !strings.HasPrefix(r.Key, api.KeyPrefix) || !r.ExpiresAt.Equal(*k.ExpiresAt) ||
			!slices.Equal(r.Actions, k.Actions) || !slices.Equal(r.Sandboxes, []string{"box"}) || r.RotatedAt == nil {
			t.Fatalf("rotate: got %+v, want the same id, scope and expiry as %+v with a new secret", r, k)
		}
		e.do("GET", "/v1/sandboxes", k.Key, nil).want(t, 401, "unauthorized")
		e.do("GET", "/v1/sandboxes", r.Key, nil).want(t, 200, "")
		if got := e.auditActions(t); len(got) == 0 || got[0] != "api_key.rotate "+k.ID {
			t.Fatalf("audit: got %v, want api_key.rotate first", got)
		}

		expired := e.keyWith("old", func(k *store.APIKey) { exp := e.now().Add(-time.Hour); k.ExpiresAt = &exp }, "*")
		id := ""
		for _, l := range e.listKeys(t, e.admin) {
			if l.Label == "old" {
				id = l.ID
			}
		}
		e.do("POST", "/v1/api-keys/"+id+"/rotate", e.admin, nil).want(t, 409, "api_key_expired")
		e.do("GET", "/v1/sandboxes", expired, nil).want(t, 401, "api_key_expired") // and nothing changed
		e.do("POST", "/v1/api-keys/key_nope/rotate", e.admin, nil).want(t, 404, "not_found")
		e.do("POST", "/v1/api-keys/"+k.ID+"/rotate", e.admin, `{"x":1}`).want(t, 400, "")
	})
}

// A key that can create keys can't create one with more actions, more
// sandboxes, fewer labels or a later expiry than its own, nor rotate one
// (it would hold the new secret); a key limited to some sandboxes sees,
// revokes and rotates no keys, and a key without account.admin touches
// none.
func TestAPIKeysScope(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		soon := e.now().Add(10 * 24 * time.Hour)
		narrow := e.key("narrow", "account.admin", "sandbox.read")
		boxes := e.keyWith("boxes", func(k *store.APIKey) { k.Sandboxes = []string{"a", "b"} }, "*")
		team := e.keyWith("team", func(k *store.APIKey) { k.Labels = map[string]string{"team": "a"} }, "*")
		short := e.keyWith("short", func(k *store.APIKey) { k.ExpiresAt = &soon }, "*")
		reader := e.key("reader", "sandbox.read", "account.read")
		tests := []struct {
			name   string
			parent string
			body   map[string]any
			status int
			code   string
		}{
			{"fewer actions", narrow, map[string]any{"actions": []string{"sandbox.read"}}, 201, ""},
			{"more actions", narrow, map[string]any{"preset": "ci"}, 403, "api_key_action_forbidden"},
			{"full access from a narrow key", narrow, map[string]any{}, 403, "api_key_action_forbidden"},
			{"some of its sandboxes", boxes, map[string]any{"sandboxes": []string{"a"}}, 201, ""},
			{"another sandbox", boxes, map[string]any{"sandboxes": []string{"a", "c"}}, 403, "api_key_sandbox_forbidden"},
			{"every sandbox", boxes, map[string]any{}, 403, "api_key_sandbox_forbidden"},
			{"its labels and more", team, map[string]any{"labels": map[string]string{"team": "a", "env": "x"}}, 201, ""},
			{"no labels", team, map[string]any{}, 403, "api_key_label_forbidden"},
			{"another value", team, map[string]any{"labels": map[string]string{"team": "b"}}, 403, "api_key_label_forbidden"},
			{"sooner", short, map[string]any{"ttl_days": 5}, 201, ""},
			{"the default 90 days, cut to its own", short, map[string]any{}, 201, ""},
			{"later", short, map[string]any{"ttl_days": 11}, 403, "api_key_expiry_forbidden"},
			{"never", short, map[string]any{"never_expires": true}, 403, "api_key_expiry_forbidden"},
			{"no account.admin", reader, map[string]any{"actions": []string{"sandbox.read"}}, 403, "api_key_action_forbidden"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				e.do("POST", "/v1/api-keys", tt.parent, tt.body).want(t, tt.status, tt.code)
			})
		}

		if k := e.createKey(t, short, map[string]any{}); k.ExpiresAt == nil || !k.ExpiresAt.Equal(soon) {
			t.Fatalf("a key made by one expiring at %v without ttl_days expires at %v, want the same", soon, k.ExpiresAt)
		}
		full := e.createKey(t, e.admin, map[string]any{"label": "full"})
		for _, tt := range []struct {
			name, key, code string
		}{
			{"narrow", narrow, "api_key_action_forbidden"},
			{"short", short, "api_key_expiry_forbidden"},
			{"boxes", boxes, "api_key_sandbox_forbidden"},
			{"team", team, "api_key_sandbox_forbidden"},
		} {
			t.Run("rotate by "+tt.name, func(t *testing.T) {
				e.do("POST", "/v1/api-keys/"+full.ID+"/rotate", tt.key, nil).want(t, 403, tt.code)
			})
		}
		e.do("GET", "/v1/sandboxes", full.Key, nil).want(t, 200, "") // none of them rotated it
		for _, key := range []string{boxes, team} {
			e.do("GET", "/v1/api-keys", key, nil).want(t, 403, "api_key_sandbox_forbidden")
			e.do("DELETE", "/v1/api-keys/"+full.ID, key, nil).want(t, 403, "api_key_sandbox_forbidden")
		}
		e.do("GET", "/v1/api-keys", reader, nil).want(t, 403, "api_key_action_forbidden")
		e.do("DELETE", "/v1/api-keys/"+full.ID, reader, nil).want(t, 403, "api_key_action_forbidden")
		// A narrower key may revoke a broader one: that takes power away.
		e.do("DELETE", "/v1/api-keys/"+full.ID, narrow, nil).want(t, 200, "")
		e.do("GET", "/v1/sandboxes", full.Key, nil).want(t, 401, "unauthorized")
	})
}

// Bad input gets a clear 400 and makes no key.
func TestAPIKeysBadInput(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		tests := []struct {
			name string
			body any
		}{
			{"preset and actions", map[string]any{"preset": "ci", "actions": []string{"exec"}}},
			{"unknown preset", map[string]any{"preset": "root"}},
			{"unknown action", map[string]any{"actions": []string{"exec", "fly"}}},
			{"no actions", map[string]any{"actions": []string{}}},
			{"ttl 0", map[string]any{"ttl_days": 0}},
			{"ttl 366", map[string]any{"ttl_days": 366}},
			{"ttl and never", map[string]any{"ttl_days": 30, "never_expires": true}},
			{"bad sandbox", map[string]any{"sandboxes": []string{"Not A Name"}}},
			{"bad label", map[string]any{"labels": map[string]string{"bad key": "x"}}},
			{"long label", map[string]any{"label": strings.Repeat("x", 101)}},
			{"control characters", map[string]any{"label": "a\nb"}},
			{"unknown field", map[string]any{"scopes": "all"}},
			{"not JSON", "{"},
		}
		before := len(e.listKeys(t, e.admin))
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				r := e.do("POST", "/v1/api-keys", e.admin, tt.body).want(t, 400, "")
				if !strings.Contains(string(r.body), `"message"`) {
					t.Fatalf("no message: %s", r.body)
				}
			})
		}
		if after := len(e.listKeys(t, e.admin)); after != before {
			t.Fatalf("bad requests made %d keys", after-before)
		}
		// never_expires and full access, as the docs allow.
		if k := e.createKey(t, e.admin, map[string]any{"never_expires": true}); k.ExpiresAt != nil || !slices.Equal(k.Actions, []string{"*"}) {
			t.Fatalf("never_expires, no scope: %+v", k)
		}
	})
}

// useCountingStore counts RecordAPIKeyUse calls (a fake wrapper: the
// store under it is real).
type useCountingStore struct {
	store.Store
	writes atomic.Int64
}

func (s *useCountingStore) RecordAPIKeyUse(ctx context.Context, id string, at time.Time, n int) error {
	s.writes.Add(1)
	return s.Store.RecordAPIKeyUse(ctx, id, at, n)
}

// A key's uses cost no store write per request: the first is written at
// once, the rest at most once a minute (or when keys are listed), and
// none is lost.
func TestAPIKeysUseIsBatched(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			clock := testkit.NewFakeClock(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
			st := &useCountingStore{Store: b.open(t)}
			e := newEnv(t, st, api.Options{Now: clock.Now})
			k := e.key("busy", "sandbox.read")
			for range 50 {
				clock.Advance(time.Second / 2)
				e.do("GET", "/v1/sandboxes", k, nil).want(t, 200, "")
			}
			if n := st.writes.Load(); n != 1 {
				t.Fatalf("50 requests in 25 s made %d use writes, want 1", n)
			}
			clock.Advance(time.Minute)
			e.do("GET", "/v1/sandboxes", k, nil).want(t, 200, "")
			if n := st.writes.Load(); n != 2 {
				t.Fatalf("a request a minute later: %d use writes, want 2", n)
			}
			var got keyJSON
			for _, l := range e.listKeys(t, e.admin) {
				if l.Label == "busy" {
					got = l
				}
			}
			if got.Requests30d != 51 || got.LastUsedAt == nil || !got.LastUsedAt.Equal(clock.Now()) {
				t.Fatalf("listed: %+v, want 51 requests, last at %v", got, clock.Now())
			}
		})
	}
}

// A signed file link made by a key stops once that key is rotated (a
// link made with the new secret works) or revoked.
func TestAPIKeysTakeTheirLinks(t *testing.T) {
	forEachFilesStore(t, api.Options{}, func(t *testing.T, e *filesEnv) {
		e.running("box")
		const base = "/v1/sandboxes/box/files"
		e.raw("PUT", base+"/content?path=out.txt", e.admin, strings.NewReader("the result")).want(t, 200, "")
		k := e.createKey(t, e.admin, map[string]any{"label": "linker", "actions": []string{"file.read", "sandbox.read"}})
		link := func(secret string) string {
			var l linkJSON
			e.do("POST", base+"/download-url", secret, map[string]any{"path": "out.txt"}).want(t, 200, "").json(t, &l)
			return l.URL
		}
		before := link(k.Key)
		e.raw("GET", before, "", nil).want(t, 200, "")
		var r keyJSON
		e.do("POST", "/v1/api-keys/"+k.ID+"/rotate", e.admin, nil).want(t, 200, "").json(t, &r)
		e.raw("GET", before, "", nil).want(t, 403, "link_revoked")
		after := link(r.Key)
		e.raw("GET", after, "", nil).want(t, 200, "")
		e.do("DELETE", "/v1/api-keys/"+k.ID, e.admin, nil).want(t, 200, "")
		e.raw("GET", after, "", nil).want(t, 403, "link_revoked")
	})
}
