package api_test

import (
	"context"
	"testing"
	"time"

	"froog.tech/froog/store"
)

// TestDiskExpiry: a stopped sandbox says when its disk expires; once
// hostctl has deleted it, a start and a fork of its current state are
// refused with snapshot_data_expired and change nothing, while a fork of
// a saved snapshot and a restore still go.
func TestDiskExpiry(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "box"}).want(t, 202, "")
		e.ran("box")
		var sn snapJSON
		e.do("POST", "/v1/sandboxes/box/snapshots", e.admin, map[string]any{"label": "keep"}).want(t, 202, "").json(t, &sn)
		e.taken(sn.ID)
		var view struct {
			DiskExpiresAt *time.Time `json:"disk_expires_at"`
			DiskExpiredAt *time.Time `json:"disk_expired_at"`
			StoppedAt     *time.Time `json:"stopped_at"`
		}
		e.do("GET", "/v1/sandboxes/box", e.admin, nil).want(t, 200, "").json(t, &view)
		if view.DiskExpiresAt != nil {
			t.Fatalf("a running sandbox's disk expires at %v", view.DiskExpiresAt)
		}

		stopped := e.now().Add(-store.DiskKept - time.Hour)
		sb, err := e.store.Sandbox(context.Background(), e.account.ID, "box")
		if err != nil {
			t.Fatal(err)
		}
		set := func(fn func(*store.Sandbox)) {
			t.Helper()
			if _, err := e.store.UpdateSandbox(context.Background(), sb.ID, func(s *store.Sandbox, _ *store.AuditEvent) error { fn(s); return nil }, nil); err != nil {
				t.Fatal(err)
			}
		}
		set(func(s *store.Sandbox) {
			s.DesiredState, s.State, s.PendingStopID, s.StoppedAt = store.StateStopped, store.StateStopped, "", &stopped
		})
		e.do("GET", "/v1/sandboxes/box", e.admin, nil).want(t, 200, "").json(t, &view)
		if want := stopped.Add(store.DiskKept); view.DiskExpiresAt == nil || !view.DiskExpiresAt.Equal(want) || view.DiskExpiredAt != nil {
			t.Fatalf("stopped at %v: disk_expires_at %v (want %v), disk_expired_at %v", stopped, view.DiskExpiresAt, want, view.DiskExpiredAt)
		}

		expired := e.now().Add(-time.Hour)
		set(func(s *store.Sandbox) { s.DiskExpiredAt = &expired })
		e.do("GET", "/v1/sandboxes/box", e.admin, nil).want(t, 200, "").json(t, &view)
		if view.DiskExpiresAt != nil || view.DiskExpiredAt == nil || !view.DiskExpiredAt.Equal(expired) {
			t.Fatalf("expired: disk_expires_at %v, disk_expired_at %v", view.DiskExpiresAt, view.DiskExpiredAt)
		}
		e.do("POST", "/v1/sandboxes/box/start", e.admin, nil).want(t, 409, "snapshot_data_expired")
		e.do("POST", "/v1/sandboxes/box/start", e.admin, map[string]any{"ttl_secs": 60}).want(t, 409, "snapshot_data_expired")
		e.do("POST", "/v1/sandboxes/box/fork", e.admin, map[string]any{"name": "copy"}).want(t, 409, "snapshot_data_expired")
		if got, _ := e.store.Sandbox(context.Background(), e.account.ID, "box"); got.DesiredState != store.StateStopped || got.TTLSecs == 60 {
			t.Fatalf("a refused start changed the sandbox: %+v", got)
		}
		if _, err := e.store.Sandbox(context.Background(), e.account.ID, "copy"); err == nil {
			t.Fatal("a refused fork made its copy")
		}
		e.do("POST", "/v1/sandboxes/box/fork", e.admin, map[string]any{"name": "copy", "snapshot": "keep"}).want(t, 202, "")
		e.do("POST", "/v1/sandboxes/box/restore", e.admin, map[string]any{"snapshot": "keep"}).want(t, 202, "")
	})
}
