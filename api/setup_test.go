package api_test

import (
	"context"
	"testing"

	"froog.tech/froog/store"
)

// TestSetupStatusShown: a sandbox shows the setup_status and setup_error
// hostctl recorded for its last start, and none when it recorded none.
func TestSetupStatusShown(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		var sb struct {
			ID          string  `json:"id"`
			SetupStatus string  `json:"setup_status"`
			SetupError  *string `json:"setup_error"`
		}
		e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "box"}).want(t, 202, "").json(t, &sb)
		if sb.SetupStatus != "none" || sb.SetupError != nil {
			t.Fatalf("new sandbox: setup_status %q, setup_error %v; want none and no error", sb.SetupStatus, sb.SetupError)
		}
		for _, tc := range []struct{ status, err string }{
			{store.SetupRunning, ""},
			{store.SetupFailed, "the setup script failed (exit 3)"},
			{store.SetupDone, ""},
		} {
			if _, err := e.store.UpdateSandbox(context.Background(), sb.ID, func(s *store.Sandbox, _ *store.AuditEvent) error {
				s.SetupStatus, s.SetupError, s.SetupJob = tc.status, tc.err, "job_0123456789abcdef"
				return nil
			}, nil); err != nil {
				t.Fatal(err)
			}
			sb.SetupError = nil
			e.do("GET", "/v1/sandboxes/box", e.admin, nil).want(t, 200, "").json(t, &sb)
			got := ""
			if sb.SetupError != nil {
				got = *sb.SetupError
			}
			if sb.SetupStatus != tc.status || got != tc.err {
				t.Fatalf("setup_status %q, setup_error %q; want %q, %q", sb.SetupStatus, got, tc.status, tc.err)
			}
		}
	})
}
