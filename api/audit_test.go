package api_test

import (
	"testing"

	"froog.tech/froog/store"
)

// The audit log is the account's: a key limited to some sandboxes, by
// name or by label, gets an empty list (the docs: "a key limited to some
// sandboxes gets an empty list"), even with account.admin and even for
// the events of its own sandboxes. Events name sandboxes by name, which
// can be reused and relabelled, so they can't be filtered safely.
func TestAuditScope(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "a1", "labels": map[string]string{"team": "a"}}).want(t, 202, "")
		e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "b1", "labels": map[string]string{"team": "b"}}).want(t, 202, "")
		e.do("POST", "/v1/sandboxes/a1/urls", e.admin, map[string]any{"port": 3000}).want(t, 201, "")

		teamA := e.keyWith("team-a", func(k *store.APIKey) { k.Labels = map[string]string{"team": "a"} }, "*")
		e.do("POST", "/v1/sandboxes", teamA, map[string]any{"name": "a2"}).want(t, 202, "")

		tests := []struct {
			name, key, query string
			events           bool
		}{
			{"full key", e.admin, "", true},
			{"full key, one", e.admin, "?limit=1", true},
			{"account.admin only", e.key("auditor", "account.admin"), "", true},
			{"label key", teamA, "", false},
			{"label key, cursor", teamA, "?limit=1&cursor=1000", false},
			{"label key, account.admin", e.keyWith("team-a-admin", func(k *store.APIKey) { k.Labels = map[string]string{"team": "a"} }, "account.admin"), "", false},
			{"two labels", e.keyWith("two", func(k *store.APIKey) { k.Labels = map[string]string{"team": "a", "env": "x"} }, "*"), "", false},
			{"sandbox key", e.keyWith("box", func(k *store.APIKey) { k.Sandboxes = []string{"a1"} }, "*"), "", false},
			{"sandbox and label key", e.keyWith("both", func(k *store.APIKey) {
				k.Sandboxes, k.Labels = []string{"a1"}, map[string]string{"team": "a"}
			}, "*"), "", false},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				var got struct {
					Events []struct {
						Action, Target string
					}
					NextCursor *string `json:"next_cursor"`
				}
				e.do("GET", "/v1/audit"+tt.query, tt.key, nil).want(t, 200, "").json(t, &got)
				if got.Events == nil {
					t.Fatal("events is null, want a list")
				}
				if tt.events != (len(got.Events) > 0) {
					t.Fatalf("got %d events %+v, want events %t", len(got.Events), got.Events, tt.events)
				}
				if !tt.events && got.NextCursor != nil {
					t.Fatalf("got next_cursor %q for an empty list", *got.NextCursor)
				}
			})
		}
	})
}
