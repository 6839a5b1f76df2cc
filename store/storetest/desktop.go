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
