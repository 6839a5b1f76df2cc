package api_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"froog.tech/froog/api"
	"froog.tech/froog/store"
)

type snapJSON struct {
	ID, Name, Label, Reason, Sandbox, Status string
	Saved                                    bool
	SourceDeleted                            bool `json:"source_deleted"`
}

// ran makes the store say the sandbox has run on a host (hostctl's part).
func (e *env) ran(name string) store.Sandbox {
	e.t.Helper()
	sb, err := e.store.Sandbox(context.Background(), e.account.ID, name)
	if err != nil {
		e.t.Fatal(err)
	}
	sb, err = e.store.UpdateSandbox(context.Background(), sb.ID, func(s *store.Sandbox, _ *store.AuditEvent) error {
		s.HostID, s.State = "host_test", store.StateRunning
		return nil
	}, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return sb
}

// taken makes the store say hostctl took the snapshot.
func (e *env) taken(id string) {
	e.t.Helper()
	now := e.now()
	if _, err := e.store.UpdateSnapshot(context.Background(), id, func(s *store.Snapshot) error {
		s.Status, s.ReadyAt, s.Bytes = store.SnapshotAvailable, &now, 1<<30
		return nil
	}, nil); err != nil {
		e.t.Fatal(err)
	}
}

func TestSnapshotRoutes(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "box"}).want(t, 202, "")
		e.do("POST", "/v1/sandboxes/box/snapshots", e.admin, map[string]any{"label": "web-stack"}).want(t, 409, "conflict") // never ran: no disk
		box := e.ran("box")

		var sn snapJSON
		e.do("POST", "/v1/sandboxes/box/snapshots", e.admin, map[string]any{"label": "web-stack"}).want(t, 202, "").json(t, &sn)
		if !sn.Saved || sn.Name != "web-stack" || sn.Status != "creating" || sn.Sandbox != "box" {
			t.Fatalf("saved: %+v", sn)
		}
		got, err := e.store.Snapshot(context.Background(), e.account.ID, sn.ID)
		if err != nil || got.HostID != "host_test" || got.SandboxID != box.ID {
			t.Fatalf("the intent in the store: %+v %v", got, err)
		}
		// Not available yet: no restore, no fork from it.
		e.do("POST", "/v1/sandboxes/box/restore", e.admin, map[string]any{"snapshot": "web-stack"}).want(t, 409, "snapshot_not_available")
		e.do("POST", "/v1/sandboxes/box/fork", e.admin, map[string]any{"name": "copy", "snapshot": "web-stack"}).want(t, 409, "snapshot_not_available")
		e.do("POST", "/v1/sandboxes/box/restore", e.admin, map[string]any{"snapshot": "latest"}).want(t, 404, "not_found")
		e.taken(sn.ID)

		for _, ref := range []string{sn.ID, "web-stack", "latest"} {
			var one snapJSON
			e.do("GET", "/v1/sandboxes/box/snapshots/"+ref, e.admin, nil).want(t, 200, "").json(t, &one)
			if one.ID != sn.ID || one.Status != "available" {
				t.Fatalf("GET %s: %+v", ref, one)
			}
		}
		e.do("GET", "/v1/sandboxes/box/snapshots/nope", e.admin, nil).want(t, 404, "not_found")
		e.do("GET", "/v1/sandboxes/box/snapshots/snap_0000000000000000", e.admin, nil).want(t, 404, "not_found")

		// Restore writes intent once; hostctl clears it.
		var sb struct {
			RestoreFrom string `json:"restore_from"`
		}
		e.do("POST", "/v1/sandboxes/box/restore", e.admin, map[string]any{"snapshot": "web-stack"}).want(t, 202, "").json(t, &sb)
		if sb.RestoreFrom != sn.ID {
			t.Fatalf("restore_from %q, want %s", sb.RestoreFrom, sn.ID)
		}
		e.do("POST", "/v1/sandboxes/box/restore", e.admin, map[string]any{"snapshot": sn.ID}).want(t, 409, "conflict")

		// A fork of the snapshot with count: box-copy-1 … 3, each from it.
		var copies []struct{ Name, State string }
		e.do("POST", "/v1/sandboxes/box/fork", e.admin, map[string]any{"name": "copy", "snapshot": "web-stack", "count": 3}).want(t, 202, "").json(t, &copies)
		if len(copies) != 3 || copies[0].Name != "copy-1" || copies[2].Name != "copy-3" {
			t.Fatalf("copies: %+v", copies)
		}
		for _, c := range copies {
			f, err := e.store.Sandbox(context.Background(), e.account.ID, c.Name)
			if err != nil || f.ForkOf != box.ID || f.ForkSnapshot != sn.ID || f.DesiredState != store.StateRunning {
				t.Fatalf("copy %s: %+v %v", c.Name, f, err)
			}
		}
		// All or none: one more copy passes the 5 at once, so none is made.
		e.do("POST", "/v1/sandboxes/box/fork", e.admin, map[string]any{"name": "more", "count": 2}).want(t, 429, "limit_reached")
		for _, n := range []string{"more-1", "more-2"} {
			e.do("GET", "/v1/sandboxes/"+n, e.admin, nil).want(t, 404, "not_found")
		}
		var audit struct {
			Events []struct {
				Action, Target string
				Detail         map[string]string
			}
		}
		e.do("GET", "/v1/audit?limit=10", e.admin, nil).want(t, 200, "").json(t, &audit)
		actions := map[string]int{}
		for _, ev := range audit.Events {
			actions[ev.Action]++
		}
		if actions["snapshot.save"] != 1 || actions["sandbox.restore"] != 1 || actions["sandbox.fork"] != 4 || actions["sandbox.delete"] != 1 {
			t.Fatalf("audit: %v", actions) // 3 copies, and more-1 made and deleted again
		}

		// A new sandbox from the saved snapshot (a template): its disk,
		// OS and size; the request's settings.
		e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "tpl", "from": "nope"}).want(t, 404, "not_found")
		e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "tpl", "from": "web-stack", "os": "debian-13"}).want(t, 400, "invalid_value")
		var tpl struct{ Size, OS string }
		e.do("DELETE", "/v1/sandboxes/copy-3", e.admin, nil).want(t, 202, "")
		e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "tpl", "from": "web-stack", "ttl_secs": 60}).want(t, 202, "").json(t, &tpl)
		f, err := e.store.Sandbox(context.Background(), e.account.ID, "tpl")
		if err != nil || f.ForkSnapshot != sn.ID || f.ForkOf != box.ID || f.TTLSecs != 60 || tpl.OS != box.OS || tpl.Size != box.Size {
			t.Fatalf("from a saved snapshot: %+v %+v %v", tpl, f, err)
		}

		// Lists: the sandbox's, the account's saved ones and every one.
		auto, err := e.store.CreateSnapshot(context.Background(), store.Snapshot{AccountID: e.account.ID, SandboxID: box.ID, Sandbox: "box", HostID: "host_test",
			Reason: store.SnapshotHourly, Status: store.SnapshotAvailable, CreatedAt: e.now().Add(time.Second)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var list []snapJSON
		e.do("GET", "/v1/sandboxes/box/snapshots", e.admin, nil).want(t, 200, "").json(t, &list)
		if len(list) != 2 || list[0].ID != auto.ID || list[0].Reason != "hourly" || list[1].ID != sn.ID {
			t.Fatalf("the sandbox's: %+v", list)
		}
		e.do("GET", "/v1/saved-snapshots", e.admin, nil).want(t, 200, "").json(t, &list)
		if len(list) != 1 || list[0].ID != sn.ID {
			t.Fatalf("saved: %+v", list)
		}
		e.do("GET", "/v1/snapshots", e.admin, nil).want(t, 200, "").json(t, &list)
		if len(list) != 2 {
			t.Fatalf("every one: %+v", list)
		}

		// Scopes: read-only reads and cannot save; a key for another
		// sandbox sees none of box's.
		ro := e.key("ro", "snapshot.read")
		e.do("GET", "/v1/saved-snapshots/web-stack", ro, nil).want(t, 200, "")
		e.do("POST", "/v1/sandboxes/box/snapshots", ro, nil).want(t, 403, "api_key_action_forbidden")
		other := e.keyWith("other", func(k *store.APIKey) { k.Sandboxes = []string{"copy-1"} }, "snapshot.read")
		e.do("GET", "/v1/saved-snapshots", other, nil).want(t, 200, "").json(t, &list)
		if len(list) != 0 {
			t.Fatalf("a key for copy-1 sees %+v", list)
		}
		e.do("GET", "/v1/saved-snapshots/web-stack", other, nil).want(t, 404, "not_found")

		// Deleting: the automatic ones at once, then the saved one by name.
		var del struct{ Deleted, Kept int }
		e.do("DELETE", "/v1/sandboxes/box/snapshots", e.admin, nil).want(t, 200, "").json(t, &del)
		if del.Deleted != 1 || del.Kept != 0 {
			t.Fatalf("delete automatic: %+v", del)
		}
		e.do("DELETE", "/v1/saved-snapshots/web-stack", e.admin, nil).want(t, 200, "")
		e.do("GET", "/v1/saved-snapshots/web-stack", e.admin, nil).want(t, 404, "not_found")
		e.do("DELETE", "/v1/sandboxes/box/snapshots/"+sn.ID, e.admin, nil).want(t, 404, "not_found")
		e.do("GET", "/v1/sandboxes/box/snapshots", e.admin, nil).want(t, 200, "").json(t, &list)
		if len(list) != 0 {
			t.Fatalf("after deleting: %+v", list)
		}
		if got, _ := e.store.Snapshot(context.Background(), e.account.ID, sn.ID); got.DeletedAt == nil {
			t.Fatal("the deleted snapshot is not marked for hostctl")
		}
	})
}

// TestSnapshotsOff: a sandbox made with snapshots: false takes no saved
// snapshot, restore or fork from one (409 snapshots_off).
func TestSnapshotsOff(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "box", "snapshots": false}).want(t, 202, "")
		e.ran("box")
		e.do("POST", "/v1/sandboxes/box/snapshots", e.admin, nil).want(t, 409, "snapshots_off")
		e.do("POST", "/v1/sandboxes/box/restore", e.admin, map[string]any{"snapshot": "latest"}).want(t, 409, "snapshots_off")
		e.do("POST", "/v1/sandboxes/box/fork", e.admin, map[string]any{"name": "copy", "snapshot": "latest"}).want(t, 409, "snapshots_off")
	})
}

// TestForkCountIdempotent: a fork with count and an Idempotency-Key,
// sent twice, makes its copies once and answers the same both times.
func TestForkCountIdempotent(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "src"}).want(t, 202, "")
		body := map[string]any{"name": "try", "count": 2}
		first := e.do("POST", "/v1/sandboxes/src/fork", e.admin, body, "Idempotency-Key", "k1").want(t, 202, "")
		again := e.do("POST", "/v1/sandboxes/src/fork", e.admin, body, "Idempotency-Key", "k1").want(t, 202, "")
		if string(first.body) != string(again.body) || again.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("replay: %s / %s (%v)", first.body, again.body, again.header)
		}
		var list []struct{ Name string }
		e.do("GET", "/v1/sandboxes", e.admin, nil).want(t, 200, "").json(t, &list)
		if len(list) != 3 {
			t.Fatalf("sandboxes after a replayed fork: %+v", list)
		}
		e.do("POST", "/v1/sandboxes/src/fork", e.admin, map[string]any{"name": "try", "count": 3}, "Idempotency-Key", "k1").want(t, 422, "")
	})
}

// TestSavedSnapshotScopes: a key limited to some sandboxes, by name or by
// label, cannot save under a name held by a saved snapshot of a sandbox
// it cannot reach (a deleted one's included): 403, and nothing written.
// To it such a snapshot is missing on every saved-snapshot route (read,
// delete, start from, by name or id): the same 404 as a name nobody
// holds. Its own names it saves, and saves again, as before.
func TestSavedSnapshotScopes(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		for _, n := range []string{"b1", "a1", "gone"} {
			e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": n}).want(t, 202, "")
			e.ran(n)
		}
		e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "l1", "labels": map[string]string{"team": "a"}}).want(t, 202, "")
		e.ran("l1")
		var tpl, old snapJSON
		e.do("POST", "/v1/sandboxes/b1/snapshots", e.admin, map[string]any{"label": "tpl"}).want(t, 202, "").json(t, &tpl)
		e.taken(tpl.ID)
		e.do("POST", "/v1/sandboxes/gone/snapshots", e.admin, map[string]any{"label": "old"}).want(t, 202, "").json(t, &old)
		e.taken(old.ID)
		e.do("DELETE", "/v1/sandboxes/gone", e.admin, nil).want(t, 202, "")
		acts := []string{"snapshot.read", "snapshot.write", "sandbox.create"}
		for _, k := range []struct {
			name, box, key string
		}{
			{"by name", "a1", e.keyWith("a1", func(k *store.APIKey) { k.Sandboxes = []string{"a1"} }, acts...)},
			{"by label", "l1", e.keyWith("team-a", func(k *store.APIKey) { k.Labels = map[string]string{"team": "a"} }, acts...)},
		} {
			for _, label := range []string{"tpl", "old"} {
				var r struct{ Error struct{ Message string } }
				e.do("POST", "/v1/sandboxes/"+k.box+"/snapshots", k.key, map[string]any{"label": label}).want(t, 403, "api_key_sandbox_forbidden").json(t, &r)
				if strings.Contains(r.Error.Message, "b1") || strings.Contains(r.Error.Message, "gone") {
					t.Fatalf("%s: the refusal names the other sandbox: %s", k.name, r.Error.Message)
				}
			}
			list, err := e.store.ListSnapshots(context.Background(), store.SnapshotFilter{AccountID: e.account.ID, SandboxID: e.ran(k.box).ID})
			if err != nil || len(list) != 0 {
				t.Fatalf("%s: a refused save wrote %+v %v", k.name, list, err)
			}
			var missing struct{ Error struct{ Message string } }
			e.do("GET", "/v1/saved-snapshots/nothing", k.key, nil).want(t, 404, "not_found").json(t, &missing)
			for _, c := range []struct{ method, path, ref string }{
				{"GET", "/v1/saved-snapshots/", "tpl"}, {"GET", "/v1/saved-snapshots/", tpl.ID},
				{"DELETE", "/v1/saved-snapshots/", "tpl"}, {"DELETE", "/v1/saved-snapshots/", tpl.ID},
				{"GET", "/v1/saved-snapshots/", "old"}, {"POST", "/v1/sandboxes", "tpl"}, {"POST", "/v1/sandboxes", old.ID},
			} {
				var r response
				if c.method == "POST" {
					r = e.do("POST", c.path, k.key, map[string]any{"name": k.box + "-x", "from": c.ref})
				} else {
					r = e.do(c.method, c.path+c.ref, k.key, nil)
				}
				var got struct{ Error struct{ Message string } }
				r.want(t, 404, "not_found").json(t, &got)
				if want := strings.ReplaceAll(missing.Error.Message, "nothing", c.ref); got.Error.Message != want {
					t.Fatalf("%s %s %s: %q, want %q", k.name, c.method, c.ref, got.Error.Message, want)
				}
			}
			own := k.box + "-own"
			for range 2 {
				var sn snapJSON
				e.do("POST", "/v1/sandboxes/"+k.box+"/snapshots", k.key, map[string]any{"label": own}).want(t, 202, "").json(t, &sn)
				e.taken(sn.ID)
			}
			e.do("GET", "/v1/saved-snapshots/"+own, k.key, nil).want(t, 200, "")
		}
		if got, err := e.store.Snapshot(context.Background(), e.account.ID, tpl.ID); err != nil || got.DeletedAt != nil {
			t.Fatalf("b1's tpl: %+v %v", got, err)
		}
		// The owner's key may replace any: its save is taken.
		e.do("POST", "/v1/sandboxes/a1/snapshots", e.admin, map[string]any{"label": "tpl"}).want(t, 202, "")
	})
}

// fakeRivalStore is a store in which, the moment the API writes a saved
// snapshot, another sandbox's copy under the same name asked a moment
// earlier appears (a save by another key that raced this one).
type fakeRivalStore struct {
	store.Store
	mu    sync.Mutex
	rival *store.Snapshot
}

func (s *fakeRivalStore) CreateSnapshot(ctx context.Context, sn store.Snapshot, ev *store.AuditEvent) (store.Snapshot, error) {
	s.mu.Lock()
	rival := s.rival
	s.rival = nil
	s.mu.Unlock()
	if rival != nil && sn.Saved {
		rival.Label, rival.CreatedAt = sn.Label, sn.CreatedAt.Add(-time.Millisecond)
		if _, err := s.Store.CreateSnapshot(ctx, *rival, nil); err != nil {
			return store.Snapshot{}, err
		}
	}
	return s.Store.CreateSnapshot(ctx, sn, ev)
}

// TestSavedSnapshotRace: when another sandbox's copy under the name was
// asked just before a limited key's save (after its check), the limited
// key's copy gives way at once (403, marked deleted, the deletion in the
// audit log), so hostctl never lets it replace the other.
func TestSavedSnapshotRace(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			st := &fakeRivalStore{Store: b.open(t)}
			e := newEnv(t, st, api.Options{})
			for _, n := range []string{"b1", "a1"} {
				e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": n}).want(t, 202, "")
				e.ran(n)
			}
			b1, _ := e.store.Sandbox(context.Background(), e.account.ID, "b1")
			st.mu.Lock()
			st.rival = &store.Snapshot{AccountID: e.account.ID, SandboxID: b1.ID, Sandbox: "b1", HostID: b1.HostID, Saved: true, Status: store.SnapshotCreating}
			st.mu.Unlock()
			a1 := e.keyWith("a1", func(k *store.APIKey) { k.Sandboxes = []string{"a1"} }, "snapshot.read", "snapshot.write")
			e.do("POST", "/v1/sandboxes/a1/snapshots", a1, map[string]any{"label": "tpl"}).want(t, 403, "api_key_sandbox_forbidden")
			list, err := e.store.ListSnapshots(context.Background(), store.SnapshotFilter{AccountID: e.account.ID, SavedOnly: true, Label: "tpl"})
			if err != nil || len(list) != 1 || list[0].SandboxID != b1.ID {
				t.Fatalf("tpl after the race: %+v %v, want only b1's", list, err)
			}
		})
	}
}
