package e2e_test

import (
	"fmt"
	"testing"
	"time"

	"froog.tech/froog/internal/wait"
)

// TestDiskExpiresThroughFroogd: froogd dev with its clock moved 14 days
// past a stop. The sandbox says when its disk goes, then that it went;
// its account's webhook gets sandbox.expired; a start and a fork of its
// current state are refused with snapshot_data_expired; a restore from
// its saved snapshot brings it back with the snapshot's files.
func TestDiskExpiresThroughFroogd(t *testing.T) {
	t.Parallel()
	rc := newHookReceiver(t)
	d := startDev(t, devOptions{clock: true, env: []string{rc.env()}})
	c := d.c
	var h struct{ ID, Secret string }
	c.call("POST", "/v1/webhooks", fmt.Sprintf(`{"url": %q, "events": ["sandbox.expired"]}`, rc.srv.URL+"/froog"), 201, &h)
	rc.tell(h.ID, h.Secret)

	c.call("POST", "/v1/sandboxes", `{"name": "old", "ttl_secs": 0}`, 202, nil)
	runsWithin(t, c, "old", 30*time.Second)
	write(t, c, "old", "kept")
	var sn snapshotJSON
	c.call("POST", "/v1/sandboxes/old/snapshots", `{"label": "keep"}`, 202, &sn)
	wait.For(t, 30*time.Second, "the saved snapshot", func() bool {
		c.call("GET", "/v1/saved-snapshots/keep", "", 200, &sn)
		return sn.Status == "available"
	})
	c.call("POST", "/v1/sandboxes/old/stop", "", 202, nil)
	var sb struct {
		State         string
		StoppedAt     *time.Time `json:"stopped_at"`
		DiskExpiresAt *time.Time `json:"disk_expires_at"`
		DiskExpiredAt *time.Time `json:"disk_expired_at"`
	}
	wait.For(t, 30*time.Second, "stopped", func() bool {
		c.call("GET", "/v1/sandboxes/old", "", 200, &sb)
		return sb.State == "stopped"
	})
	if sb.DiskExpiresAt == nil || !sb.DiskExpiresAt.Equal(sb.StoppedAt.Add(14*24*time.Hour)) {
		t.Fatalf("stopped at %v, its disk expires at %v: want 14 days later", sb.StoppedAt, sb.DiskExpiresAt)
	}

	d.advance(t, 14*24*time.Hour+time.Minute)
	wait.For(t, 30*time.Second, "the disk expired", func() bool {
		c.call("GET", "/v1/sandboxes/old", "", 200, &sb)
		return sb.DiskExpiredAt != nil
	})
	if sb.DiskExpiresAt != nil || sb.State != "stopped" {
		t.Fatalf("expired: %+v", sb)
	}
	wait.For(t, 30*time.Second, "sandbox.expired delivered", func() bool { return len(rc.of("sandbox.expired")) == 1 })
	if q := rc.of("sandbox.expired")[0]; !q.Verified || q.Body.Sandbox == nil || q.Body.Sandbox.Name != "old" || q.Body.Reason == "" {
		t.Fatalf("sandbox.expired: %+v", q)
	}
	c.call("POST", "/v1/sandboxes/old/start", "", 409, nil)
	c.call("POST", "/v1/sandboxes/old/fork", `{"name": "copy"}`, 409, nil)
	var errBody struct{ Error struct{ Code string } }
	c.call("POST", "/v1/sandboxes/old/start", "", 409, &errBody)
	if errBody.Error.Code != "snapshot_data_expired" {
		t.Fatalf("a start without a disk: %q, want snapshot_data_expired", errBody.Error.Code)
	}

	c.call("POST", "/v1/sandboxes/old/restore", `{"snapshot": "keep"}`, 202, nil)
	wait.For(t, 30*time.Second, "a disk again", func() bool {
		sb.DiskExpiredAt = nil // omitted once it has one
		c.call("GET", "/v1/sandboxes/old", "", 200, &sb)
		return sb.DiskExpiredAt == nil
	})
	if sb.DiskExpiresAt == nil || sb.StoppedAt == nil || !sb.DiskExpiresAt.Equal(sb.StoppedAt.Add(14*24*time.Hour)) {
		t.Fatalf("restored: its disk expires at %v, want 14 days after %v", sb.DiskExpiresAt, sb.StoppedAt)
	}
	c.call("POST", "/v1/sandboxes/old/start", "", 202, nil)
	runsWithin(t, c, "old", 30*time.Second)
	if got := cat(t, c, "old"); got != "kept" {
		t.Fatalf("after the restore f.txt is %q", got)
	}
}
