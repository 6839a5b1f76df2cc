package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"froog.tech/froog/api"
	"froog.tech/froog/store"
)

func TestAuth(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "mine", "labels": map[string]string{"team": "a"}}).want(t, 202, "")
		e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "theirs", "labels": map[string]string{"team": "b"}}).want(t, 202, "")

		expired := e.keyWith("old", func(k *store.APIKey) { past := time.Now().Add(-time.Minute); k.ExpiresAt = &past }, "*")
		revoked := e.keyWith("gone", func(k *store.APIKey) { now := time.Now(); k.RevokedAt = &now }, "*")
		reader := e.key("reader", "sandbox.read")
		boxKey := e.keyWith("box", func(k *store.APIKey) { k.Sandboxes = []string{"mine"} }, "*")
		team := e.keyWith("team-a", func(k *store.APIKey) { k.Labels = map[string]string{"team": "a"} }, api.Presets["ci"]...)

		tests := []struct {
			name, method, path, key string
			body                    any
			status                  int
			code                    string
		}{
			{"no key", "GET", "/v1/sandboxes", "", nil, 401, "unauthorized"},
			{"not bearer", "GET", "/v1/sandboxes", "Basic x", nil, 401, "unauthorized"},
			{"unknown key", "GET", "/v1/sandboxes", api.NewSecret(api.KeyPrefix), nil, 401, "unauthorized"},
			{"expired", "GET", "/v1/sandboxes", expired, nil, 401, "api_key_expired"},
			{"revoked", "GET", "/v1/sandboxes", revoked, nil, 401, "unauthorized"},
			{"read-only creates", "POST", "/v1/sandboxes", reader, map[string]any{"name": "x"}, 403, "api_key_action_forbidden"},
			{"read-only hosts", "POST", "/v1/sandboxes/mine/urls", reader, map[string]any{"port": 1}, 403, "api_key_action_forbidden"},
			{"read-only audit", "GET", "/v1/audit", reader, nil, 403, "api_key_action_forbidden"},
			{"read-only deletes", "DELETE", "/v1/sandboxes/mine", reader, nil, 403, "api_key_action_forbidden"},
			{"scoped reads own", "GET", "/v1/sandboxes/mine", boxKey, nil, 200, ""},
			{"scoped reads other", "GET", "/v1/sandboxes/theirs", boxKey, nil, 403, "api_key_sandbox_forbidden"},
			{"label key other", "GET", "/v1/sandboxes/theirs", team, nil, 403, "api_key_sandbox_forbidden"},
			{"label key own", "GET", "/v1/sandboxes/mine", team, nil, 200, ""},
			{"label key other value", "POST", "/v1/sandboxes", team, map[string]any{"name": "x", "labels": map[string]string{"team": "b"}}, 403, "api_key_label_forbidden"},
			{"label key changes its label", "PATCH", "/v1/sandboxes/mine", team, map[string]any{"labels": map[string]any{"team": nil}}, 403, "api_key_label_forbidden"},
			{"ci cannot delete others'", "DELETE", "/v1/sandboxes/mine", team, nil, 403, "api_key_action_forbidden"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				key := tt.key
				var r response
				if strings.HasPrefix(key, "Basic") {
					req, _ := http.NewRequest(tt.method, e.srv.URL+tt.path, nil)
					req.Header.Set("Authorization", key)
					res, err := http.DefaultClient.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					res.Body.Close()
					r = response{status: res.StatusCode}
					if r.status != tt.status {
						t.Fatalf("got %d, want %d", r.status, tt.status)
					}
					return
				}
				e.do(tt.method, tt.path, key, tt.body).want(t, tt.status, tt.code)
			})
		}

		// A label key's sandboxes carry its labels, it lists only those, and
		// it deletes the ones it created.
		var sb struct{ Labels map[string]string }
		e.do("POST", "/v1/sandboxes", team, map[string]any{"name": "made"}).want(t, 202, "").json(t, &sb)
		if sb.Labels["team"] != "a" {
			t.Fatalf("label key's sandbox labels: %v", sb.Labels)
		}
		names := func(key string) []string {
			var list []struct{ Name string }
			e.do("GET", "/v1/sandboxes", key, nil).want(t, 200, "").json(t, &list)
			var out []string
			for _, s := range list {
				out = append(out, s.Name)
			}
			slices.Sort(out)
			return out
		}
		if got := fmt.Sprint(names(team)); got != "[made mine]" {
			t.Fatalf("label key lists %s", got)
		}
		if got := fmt.Sprint(names(boxKey)); got != "[mine]" {
			t.Fatalf("scoped key lists %s", got)
		}
		e.do("DELETE", "/v1/sandboxes/made", team, nil).want(t, 202, "")

		// A key limited to sandboxes sees an empty audit log.
		var audit struct{ Events []any }
		e.do("GET", "/v1/audit", boxKey, nil).want(t, 200, "").json(t, &audit)
		if len(audit.Events) != 0 {
			t.Fatalf("scoped key saw %d audit events", len(audit.Events))
		}
	})
}

func TestPresets(t *testing.T) {
	for name, actions := range api.Presets {
		for _, a := range actions {
			if !slices.Contains(api.Actions, a) {
				t.Errorf("preset %s has unknown action %q", name, a)
			}
		}
	}
	ci, _ := api.PresetActions("ci")
	if !slices.Contains(ci, "sandbox.create") || slices.Contains(ci, "sandbox.delete") || !slices.Contains(ci, "sandbox.delete-own") {
		t.Fatalf("ci preset: %v", ci)
	}
	full, _ := api.PresetActions("full-sandbox")
	if slices.Contains(full, "sandbox.create") || slices.Contains(full, "sandbox.resume") || !slices.Contains(full, "host") {
		t.Fatalf("full-sandbox preset: %v", full)
	}
	if _, err := api.PresetActions("root"); err == nil {
		t.Fatal("unknown preset accepted")
	}
}

func TestRateLimit(t *testing.T) {
	for _, b := range backends[:1] {
		e := newEnv(t, b.open(t), api.Options{RateLimit: 5, RateWindow: time.Hour})
		for i := 0; i < 5; i++ {
			r := e.do("GET", "/v1/sandboxes", e.admin, nil).want(t, 200, "")
			if got := r.header.Get("RateLimit-Remaining"); got != fmt.Sprint(4-i) {
				t.Fatalf("request %d: RateLimit-Remaining %q", i, got)
			}
			if r.header.Get("RateLimit-Policy") != "5;w=3600" || r.header.Get("RateLimit-Limit") != "5" || r.header.Get("RateLimit-Reset") == "" {
				t.Fatalf("rate limit headers: %v", r.header)
			}
		}
		r := e.do("GET", "/v1/sandboxes", e.admin, nil).want(t, 429, "ip_rate_limited")
		if r.header.Get("Retry-After") == "" {
			t.Fatal("429 without Retry-After")
		}
		// Unauthenticated requests count too.
		e.do("GET", "/v1/sandboxes", "", nil).want(t, 429, "ip_rate_limited")
	}
}

// No secret reaches the logs.
func TestLogsHoldNoSecrets(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "box"}).want(t, 202, "")
		var u struct{ URL string }
		e.do("POST", "/v1/sandboxes/box/urls", e.admin, map[string]any{"port": 3000}).want(t, 201, "").json(t, &u)
		var tok struct{ Token string }
		e.do("POST", "/v1/sandboxes/box/urls/3000/tokens", e.admin, nil).want(t, 201, "").json(t, &tok)
		e.do("GET", "/v1/sandboxes?cursor=secret-looking", e.admin, nil)
		logs := e.logs.String()
		if !strings.Contains(logs, `"status":201`) {
			t.Fatalf("access log is missing: %s", logs)
		}
		for _, secret := range []string{e.admin, strings.SplitN(u.URL, "=", 2)[1], tok.Token, "secret-looking", "Bearer"} {
			if strings.Contains(logs, secret) {
				t.Fatalf("the log holds a secret %.12s…", secret)
			}
		}
	})
}

func TestOpenAPIMatchesRoutes(t *testing.T) {
	e := newEnv(t, backends[0].open(t), api.Options{})
	r := e.do("GET", "/v1/openapi.json", "", nil).want(t, 200, "")
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	r.json(t, &doc)
	if doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi %q, want 3.1.0", doc.OpenAPI)
	}
	documented := map[string]bool{}
	for path, ops := range doc.Paths {
		for method := range ops {
			if method == "parameters" {
				continue
			}
			documented[strings.ToUpper(method)+" "+path] = true
		}
	}
	served := map[string]bool{}
	for _, rt := range api.Routes() {
		served[rt] = true
		if !documented[rt] {
			t.Errorf("route %s is not in openapi.json", rt)
		}
	}
	for op := range documented {
		if !served[op] {
			t.Errorf("openapi.json describes %s, which is not served", op)
		}
		// and the server really routes it: no 405, no unknown-endpoint 404
		method, path, _ := strings.Cut(op, " ")
		path = strings.NewReplacer("{name}", "x", "{port}", "1", "{id}", "x").Replace(path)
		if r := e.do(method, path, e.admin, nil); r.status == 405 || strings.Contains(string(r.body), "no such endpoint") {
			t.Errorf("%s is not routed: %d %s", op, r.status, r.body)
		}
	}
}
