package storetest

import (
	"testing"
	"time"

	"froog.tech/froog/store"
)

// testDesktopLinks: a link is found by its token's hash only; a new link
// drops the sandbox's expired ones; a deleted sandbox gets none.
func testDesktopLinks(t *testing.T, o func() Backend) {
	s := open(t, o)
	a := account(t, s, 5)
	sb := sandbox(t, s, a.ID, "desk", nil, now)
	old, err := s.CreateDesktopLink(ctx, store.DesktopLink{SandboxID: sb.ID, Hash: store.HashSecret("dt_old"), Kind: "desktop", CreatedAt: now, ExpiresAt: now.Add(10 * time.Minute)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.DesktopLink(ctx, store.HashSecret("dt_old"))
	if err != nil || got.ID != old.ID || got.Kind != "desktop" || !got.ExpiresAt.Equal(old.ExpiresAt) {
		t.Fatalf("DesktopLink: %+v, %v", got, err)
	}
	wantErr(t, "an unknown hash", func() error { _, err := s.DesktopLink(ctx, store.HashSecret("dt_none")); return err }(), store.ErrNotFound)
	testDesktopLinkRun(t, s, sb)
	later := now.Add(11 * time.Minute)
	if _, err := s.CreateDesktopLink(ctx, store.DesktopLink{SandboxID: sb.ID, Hash: store.HashSecret("dt_new"), Kind: "browser", ViewOnly: true, CreatedAt: later, ExpiresAt: later.Add(10 * time.Minute)}, nil); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "an expired link after a new one", func() error { _, err := s.DesktopLink(ctx, store.HashSecret("dt_old")); return err }(), store.ErrNotFound)
	if got, err := s.DesktopLink(ctx, store.HashSecret("dt_new")); err != nil || !got.ViewOnly || got.Kind != "browser" {
		t.Fatalf("the new link: %+v, %v", got, err)
	}
	if err := s.DeleteSandbox(ctx, sb.ID, later, nil); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "a deleted sandbox's link", func() error { _, err := s.DesktopLink(ctx, store.HashSecret("dt_new")); return err }(), store.ErrNotFound)
	// A wall's link names the account, not a sandbox.
	wall, err := s.CreateDesktopLink(ctx, store.DesktopLink{AccountID: a.ID, Hash: store.HashSecret("dt_wall"), Kind: "wall", CreatedAt: later, ExpiresAt: later.Add(time.Minute)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.DesktopLink(ctx, store.HashSecret("dt_wall")); err != nil || got.AccountID != a.ID || got.SandboxID != "" || got.ID != wall.ID {
		t.Fatalf("the wall's link: %+v, %v", got, err)
	}
	wantErr(t, "a wall link for no account", func() error {
		_, err := s.CreateDesktopLink(ctx, store.DesktopLink{AccountID: "acct_none", Hash: store.HashSecret("dt_w2"), Kind: "wall", CreatedAt: later, ExpiresAt: later}, nil)
		return err
	}(), store.ErrNotFound)
	wantErr(t, "a link to a deleted sandbox", func() error {
		_, err := s.CreateDesktopLink(ctx, store.DesktopLink{SandboxID: sb.ID, Hash: store.HashSecret("dt_x"), CreatedAt: later, ExpiresAt: later}, nil)
		return err
	}(), store.ErrNotFound)
}

// testDesktopLinkRun: a link keeps its run and key; locking it view-only
// sticks and leaves the rest as it was.
func testDesktopLinkRun(t *testing.T, s store.Store, sb store.Sandbox) {
	t.Helper()
	run := now.Add(-time.Hour).Add(123456 * time.Microsecond)
	l, err := s.CreateDesktopLink(ctx, store.DesktopLink{SandboxID: sb.ID, Hash: store.HashSecret("dt_run"), Kind: "desktop", Run: run, KeyID: "key_1",
		CreatedAt: now, ExpiresAt: now.Add(10 * time.Minute)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.DesktopLink(ctx, l.Hash)
	if err != nil || !got.Run.Equal(run) || got.KeyID != "key_1" || got.ViewOnly {
		t.Fatalf("the link with a run: %+v, %v; want run %v, key_1, with input", got, err, run)
	}
	for range 2 { // a second lock changes nothing
		locked, err := s.LockDesktopLinkViewOnly(ctx, l.Hash)
		if err != nil || !locked.ViewOnly || locked.ID != l.ID || !locked.Run.Equal(run) || locked.KeyID != "key_1" || !locked.ExpiresAt.Equal(l.ExpiresAt) {
			t.Fatalf("LockDesktopLinkViewOnly: %+v, %v", locked, err)
		}
	}
	if got, err := s.DesktopLink(ctx, l.Hash); err != nil || !got.ViewOnly {
		t.Fatalf("the link after its lock: %+v, %v; want view-only", got, err)
	}
	wantErr(t, "locking an unknown hash", func() error { _, err := s.LockDesktopLinkViewOnly(ctx, store.HashSecret("dt_none")); return err }(), store.ErrNotFound)
}
