package storetest

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"froog.tech/froog/store"
)

func putURL(s Backend, sbID string, port int, host string, public bool, at time.Time) (store.URL, error) {
	return s.PutURL(ctx, sbID, port, func(old *store.URL, _ *store.AuditEvent) (store.URL, error) {
		u := store.URL{Hostname: host, Public: public, CreatedAt: at, UpdatedAt: at}
		if old != nil {
			u = *old
			u.Hostname, u.Public, u.UpdatedAt = host, public, at
		}
		if !public {
			u.TokenHash = "hash-" + host
		}
		return u, nil
	}, nil)
}

func testURLs(t *testing.T, o func() Backend) {
	s := open(t, o)
	a := account(t, s, 10)
	sb := sandbox(t, s, a.ID, "box", nil, now)
	u, err := putURL(s, sb.ID, 3000, "box-3000-abc123", false, now)
	if err != nil || u.ID == "" || u.AccountID != a.ID || u.Port != 3000 {
		t.Fatalf("PutURL: got %+v, %v", u, err)
	}
	u2, err := putURL(s, sb.ID, 3000, "acme-demo", false, now)
	if err != nil || u2.ID != u.ID || u2.Hostname != "acme-demo" {
		t.Fatalf("PutURL rename: got %+v, %v", u2, err)
	}
	other := sandbox(t, s, a.ID, "other", nil, now)
	_, err = putURL(s, other.ID, 8080, "acme-demo", false, now)
	wantErr(t, "PutURL(taken host name)", err, store.ErrConflict)
	// The old name is free again.
	if _, err := putURL(s, other.ID, 8080, "box-3000-abc123", false, now); err != nil {
		t.Fatalf("PutURL(freed name): %v", err)
	}
	tok, err := s.CreateURLToken(ctx, store.URLToken{URLID: u.ID, Hash: "v1", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}, nil)
	if err != nil {
		t.Fatalf("CreateURLToken: %v", err)
	}
	if all, err := s.AllURLs(ctx); err != nil || len(all) != 2 {
		t.Fatalf("AllURLs: %d, %v; want 2", len(all), err)
	}
	if all, err := s.AllSandboxes(ctx); err != nil || !slices.ContainsFunc(all, func(x store.Sandbox) bool { return x.ID == sb.ID }) {
		t.Fatalf("AllSandboxes: %+v, %v; want it to hold %s", all, err, sb.ID)
	}
	if all, err := s.AllURLTokens(ctx, now); err != nil || len(all) != 1 || all[0].ID != tok.ID {
		t.Fatalf("AllURLTokens: %+v, %v", all, err)
	}
	if all, _ := s.AllURLTokens(ctx, now.Add(2*time.Hour)); len(all) != 0 {
		t.Fatalf("AllURLTokens lists an expired token: %+v", all)
	}
	// Renaming a private URL, or hosting it again private, keeps them.
	if _, err := putURL(s, sb.ID, 3000, "acme-demo2", false, now); err != nil {
		t.Fatalf("PutURL rename private: %v", err)
	}
	if _, err := putURL(s, sb.ID, 3000, "acme-demo", false, now); err != nil {
		t.Fatalf("PutURL rename back: %v", err)
	}
	if list, _ := s.URLTokens(ctx, u.ID, now); len(list) != 1 {
		t.Fatalf("tokens after a private rename: got %d, want 1", len(list))
	}
	// Making it public deletes its viewer tokens.
	if _, err := putURL(s, sb.ID, 3000, "acme-demo", true, now); err != nil {
		t.Fatalf("PutURL public: %v", err)
	}
	if list, _ := s.URLTokens(ctx, u.ID, now); len(list) != 0 {
		t.Fatalf("tokens after going public: %v", list)
	}
	_, err = s.CreateURLToken(ctx, store.URLToken{URLID: u.ID, Hash: "v2", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}, nil)
	wantErr(t, "CreateURLToken(public)", err, store.ErrURLPublic)
	list, err := s.URLs(ctx, sb.ID)
	if err != nil || len(list) != 1 || !list[0].Public {
		t.Fatalf("URLs: got %+v, %v", list, err)
	}
	// show_ports and capture are kept with the URL, and read back as
	// written.
	if _, err := s.PutURL(ctx, sb.ID, 3000, func(old *store.URL, _ *store.AuditEvent) (store.URL, error) {
		u := *old
		u.ShowPorts, u.Capture = true, true
		return u, nil
	}, nil); err != nil {
		t.Fatalf("PutURL show_ports: %v", err)
	}
	if got, err := s.URL(ctx, sb.ID, 3000); err != nil || !got.ShowPorts || !got.Capture {
		t.Fatalf("URL after show_ports and capture: got %+v, %v", got, err)
	}
	// The policy is kept with the URL, and read back as written: IPv4
	// and IPv6 prefixes, the limit, the origins.
	allow := []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("2001:db8::/32"), netip.MustParsePrefix("198.51.100.7/32")}
	limit := &store.RateLimit{PerSecond: 0.5, Burst: 20}
	frame := []string{"https://app.example", "'self'"}
	if _, err := s.PutURL(ctx, sb.ID, 3000, func(old *store.URL, _ *store.AuditEvent) (store.URL, error) {
		u := *old
		u.AllowIPs, u.RateLimit, u.FrameAncestors = allow, limit, frame
		return u, nil
	}, nil); err != nil {
		t.Fatalf("PutURL policy: %v", err)
	}
	got, err := s.URL(ctx, sb.ID, 3000)
	if err != nil || !slices.Equal(got.AllowIPs, allow) || got.RateLimit == nil || *got.RateLimit != *limit || !slices.Equal(got.FrameAncestors, frame) {
		t.Fatalf("URL after policy: got %+v, %v; want allow %v, limit %+v, frame %v", got, err, allow, *limit, frame)
	}
	if all, err := s.AllURLs(ctx); err != nil || !slices.ContainsFunc(all, func(x store.URL) bool { return x.ID == got.ID && slices.Equal(x.AllowIPs, allow) }) {
		t.Fatalf("AllURLs after policy: %+v, %v; want %s with its allow_ips", all, err, got.ID)
	}
	// Taken off, it is gone.
	if _, err := s.PutURL(ctx, sb.ID, 3000, func(old *store.URL, _ *store.AuditEvent) (store.URL, error) {
		u := *old
		u.AllowIPs, u.RateLimit, u.FrameAncestors = nil, nil, nil
		return u, nil
	}, nil); err != nil {
		t.Fatalf("PutURL no policy: %v", err)
	}
	if got, err := s.URL(ctx, sb.ID, 3000); err != nil || got.AllowIPs != nil || got.RateLimit != nil || got.FrameAncestors != nil {
		t.Fatalf("URL after the policy was taken off: got %+v, %v", got, err)
	}
	// Routes are kept with the URL, in order, and taken off again.
	routes := []store.PathRoute{{Prefix: "/api/", Port: 8000}, {Prefix: "/api/v2/", Port: 8001}}
	if _, err := s.PutURL(ctx, sb.ID, 3000, func(old *store.URL, _ *store.AuditEvent) (store.URL, error) {
		u := *old
		u.Routes = routes
		return u, nil
	}, nil); err != nil {
		t.Fatalf("PutURL routes: %v", err)
	}
	if got, err := s.URL(ctx, sb.ID, 3000); err != nil || !slices.Equal(got.Routes, routes) {
		t.Fatalf("URL after routes: got %+v, %v; want routes %v", got, err, routes)
	}
	if all, err := s.AllURLs(ctx); err != nil || !slices.ContainsFunc(all, func(x store.URL) bool { return x.Port == 3000 && slices.Equal(x.Routes, routes) }) {
		t.Fatalf("AllURLs after routes: %+v, %v; want port 3000 with its routes", all, err)
	}
	if _, err := s.PutURL(ctx, sb.ID, 3000, func(old *store.URL, _ *store.AuditEvent) (store.URL, error) {
		u := *old
		u.Routes = nil
		return u, nil
	}, nil); err != nil {
		t.Fatalf("PutURL no routes: %v", err)
	}
	if got, err := s.URL(ctx, sb.ID, 3000); err != nil || got.Routes != nil {
		t.Fatalf("URL after the routes were taken off: got %+v, %v", got, err)
	}
	// A failing fn writes nothing.
	boom := errors.New("boom")
	_, err = s.PutURL(ctx, sb.ID, 4000, func(*store.URL, *store.AuditEvent) (store.URL, error) { return store.URL{}, boom }, nil)
	wantErr(t, "PutURL(fn fails)", err, boom)
	if _, err := s.URL(ctx, sb.ID, 4000); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("URL after failed put: %v", err)
	}
	if err := s.DeleteURL(ctx, sb.ID, 3000, nil); err != nil {
		t.Fatalf("DeleteURL: %v", err)
	}
	wantErr(t, "DeleteURL twice", s.DeleteURL(ctx, sb.ID, 3000, nil), store.ErrNotFound)
	_, err = putURL(s, "sbx_missing", 1, "x-1-abcdef", true, now)
	wantErr(t, "PutURL(no sandbox)", err, store.ErrNotFound)

	// Deleting the sandbox removes its URLs.
	if err := s.DeleteSandbox(ctx, other.ID, now, nil); err != nil {
		t.Fatal(err)
	}
	if list, _ := s.URLs(ctx, other.ID); len(list) != 0 {
		t.Fatalf("URLs of a deleted sandbox: %v", list)
	}
}

func testURLLimits(t *testing.T, o func() Backend) {
	s := open(t, o)
	a, err := s.CreateAccount(ctx, store.Account{MaxSandboxes: 10, URLNamesPerDay: 3})
	if err != nil {
		t.Fatal(err)
	}
	sb := sandbox(t, s, a.ID, "box", nil, now)
	for i := 0; i < 3; i++ {
		if _, err := putURL(s, sb.ID, 3000+i, fmt.Sprint("n", i), true, now); err != nil {
			t.Fatalf("name %d: %v", i, err)
		}
	}
	_, err = putURL(s, sb.ID, 4000, "n3", true, now)
	var le *store.LimitError
	if !errors.As(err, &le) || le.Limit != "url_names_per_day" {
		t.Fatalf("4th name in a day: got %v, want url_names_per_day", err)
	}
	// Changing a URL without a new name is free; the next day has room.
	if _, err := putURL(s, sb.ID, 3000, "n0", false, now); err != nil {
		t.Fatalf("same name again: %v", err)
	}
	if _, err := putURL(s, sb.ID, 4000, "n3", true, now.Add(24*time.Hour)); err != nil {
		t.Fatalf("next day: %v", err)
	}

	// A name taken again on the same day counts once.
	c, _ := s.CreateAccount(ctx, store.Account{MaxSandboxes: 10, URLNamesPerDay: 2})
	sb3 := sandbox(t, s, c.ID, "again", nil, now)
	for _, name := range []string{"r0", "r1", "r0", "r1"} {
		if _, err := putURL(s, sb3.ID, 3000, name, false, now); err != nil {
			t.Fatalf("rename to %s: %v", name, err)
		}
	}
	_, err = putURL(s, sb3.ID, 3000, "r2", false, now)
	if !errors.As(err, &le) || le.Limit != "url_names_per_day" {
		t.Fatalf("3rd name in a day after renaming back and forth: got %v, want url_names_per_day", err)
	}

	b, _ := s.CreateAccount(ctx, store.Account{MaxSandboxes: 10, URLNamesPerDay: 1000})
	sb2 := sandbox(t, s, b.ID, "many", nil, now)
	for i := 0; i < store.MaxURLsPerSandbox; i++ {
		if _, err := putURL(s, sb2.ID, 1000+i, fmt.Sprint("m", i), true, now); err != nil {
			t.Fatalf("url %d: %v", i, err)
		}
	}
	_, err = putURL(s, sb2.ID, 9999, "m-over", true, now)
	if !errors.As(err, &le) || le.Limit != "urls_per_sandbox" {
		t.Fatalf("51st url: got %v, want urls_per_sandbox", err)
	}
}

func testURLTokens(t *testing.T, o func() Backend) {
	s := open(t, o)
	a := account(t, s, 10)
	sb := sandbox(t, s, a.ID, "box", nil, now)
	u, err := putURL(s, sb.ID, 3000, "box-3000-tok", false, now)
	if err != nil {
		t.Fatal(err)
	}
	mk := func(hash string, ttl time.Duration) store.URLToken {
		t.Helper()
		tok, err := s.CreateURLToken(ctx, store.URLToken{URLID: u.ID, Hash: hash, Label: hash, CreatedAt: now, ExpiresAt: now.Add(ttl)}, nil)
		if err != nil {
			t.Fatalf("CreateURLToken %s: %v", hash, err)
		}
		return tok
	}
	t1 := mk("a", time.Hour)
	mk("b", time.Minute)
	list, err := s.URLTokens(ctx, u.ID, now.Add(2*time.Minute))
	if err != nil || len(list) != 1 || list[0].ID != t1.ID {
		t.Fatalf("live tokens after one expired: got %+v, %v", list, err)
	}
	if err := s.RevokeURLToken(ctx, u.ID, t1.ID, now, nil); err != nil {
		t.Fatalf("RevokeURLToken: %v", err)
	}
	wantErr(t, "revoke twice", s.RevokeURLToken(ctx, u.ID, t1.ID, now, nil), store.ErrNotFound)
	wantErr(t, "revoke under another url", s.RevokeURLToken(ctx, "url_other", t1.ID, now, nil), store.ErrNotFound)
	if list, _ := s.URLTokens(ctx, u.ID, now); len(list) != 1 || list[0].Hash != "b" {
		t.Fatalf("live tokens after revoke: %+v", list)
	}
	for i := 0; i < store.MaxLiveTokensPerURL-1; i++ {
		mk(fmt.Sprint("x", i), time.Hour)
	}
	_, err = s.CreateURLToken(ctx, store.URLToken{URLID: u.ID, Hash: "over", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}, nil)
	wantErr(t, "101st live token", err, store.ErrLimit)
	_, err = s.CreateURLToken(ctx, store.URLToken{URLID: "url_missing", Hash: "m", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}, nil)
	wantErr(t, "token for a missing url", err, store.ErrNotFound)
}
