package desktop

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"froog.tech/froog/names"
	"froog.tech/froog/store"
)

// A link belongs to one run of one sandbox: made before a stop, it opens
// nothing after the next start (issue #24, item 2).
func TestExchangeRefusesAnotherRunsLink(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{names.ViewDesktop, names.ViewBrowser} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, View{Kind: kind, ID: sbxA}, 0)
			cases := []struct {
				name   string
				run    time.Time
				status int
			}{
				{"this run", started, 200},
				{"the run before", started.Add(-time.Hour), 503},
				{"no run", time.Time{}, 503},
			}
			for _, c := range cases {
				tok := "dt_" + strings.Repeat("r", 20) + fmt.Sprint(time.Now().UnixNano())
				h.links.add(tok, Link{SandboxID: sbxA, Kind: kind, Run: c.run, ExpiresAt: h.clock().Add(10 * time.Minute)})
				res, cookie := h.exchange(tok, false)
				if res.StatusCode != c.status || (cookie != nil) != (c.status == 200) {
					t.Errorf("%s: got %d (cookie %v), want %d", c.name, res.StatusCode, cookie != nil, c.status)
				}
			}
		})
	}
}

// The first view-only exchange decides: the link stays view-only for its
// whole life, whatever a later exchange asks (issue #24, item 4).
func TestViewOnlyExchangeSticks(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{names.ViewDesktop, names.ViewBrowser} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, View{Kind: kind, ID: sbxA}, 0)
			tok := h.link(false)
			_, first := h.exchange(tok, true)
			if first == nil {
				t.Fatal("the view-only exchange set no cookie")
			}
			if st := h.state(first); !st.ViewOnly || !st.Locked {
				t.Errorf("the view-only exchange: view_only %v locked %v, want both", st.ViewOnly, st.Locked)
			}
			_, again := h.exchange(tok, false)
			if again == nil {
				t.Fatal("the second exchange set no cookie")
			}
			if st := h.state(again); !st.ViewOnly || !st.Locked {
				t.Errorf("the same token again without view-only: view_only %v locked %v, want both", st.ViewOnly, st.Locked)
			}
			if l, _ := h.links.DesktopLink(context.Background(), HashToken(tok)); !l.ViewOnly {
				t.Error("the link is not view-only in the store")
			}
			// A link first exchanged with input keeps input.
			other := h.link(false)
			h.exchange(other, false)
			if _, c := h.exchange(other, false); c == nil || h.state(c).ViewOnly {
				t.Error("a link exchanged with input lost it")
			}
		})
	}
}

// A session makes new connections until its link's expiry, not for 24
// h; a connection open then goes on (issue #24, item 5).
func TestSessionEndsWithItsLink(t *testing.T) {
	t.Parallel()
	h := newHarness(t, viewA, 0)
	tok := h.link(false)
	res, c := h.exchange(tok, false)
	if c == nil {
		t.Fatalf("exchange: %d", res.StatusCode)
	}
	l, _ := h.links.DesktopLink(context.Background(), HashToken(tok))
	if st := h.state(c); !st.ExpiresAt.Equal(l.ExpiresAt.Truncate(time.Second)) {
		t.Errorf("session expires_at %v, want the link's %v", st.ExpiresAt, l.ExpiresAt)
	}
	if max := int(l.ExpiresAt.Sub(h.clock()) / time.Second); c.MaxAge <= 0 || c.MaxAge > max {
		t.Errorf("cookie Max-Age %d, want 1 to %d", c.MaxAge, max)
	}
	h.advance(9 * time.Minute)
	if res, body := h.get(PathSession, c); res.StatusCode != 200 {
		t.Fatalf("within the link's 10 minutes: %d %s", res.StatusCode, body)
	}
	h.advance(2 * time.Minute)
	if res, body := h.get(PathSession, c); res.StatusCode == 200 || !strings.Contains(body, CodeNoSession) {
		t.Errorf("past the link's 10 minutes: %d %s, want %s", res.StatusCode, body, CodeNoSession)
	}
	if _, wres, err := h.dialWS(c, ""); err == nil || wres == nil || wres.StatusCode == http.StatusSwitchingProtocols {
		t.Errorf("a websocket past the link's 10 minutes: %v", err)
	}
}

// The wall's Use and Open mint links with input only while the wall's
// link is young; View goes on. The links minted carry the sandbox's run
// and the wall link's key (issue #24, item 5).
func TestWallUseEndsWithItsLink(t *testing.T) {
	t.Parallel()
	var now atomic.Int64 // the server's clock, Unix ns
	now.Store(time.Now().UnixNano())
	h := newWallHarness(t, Options{Now: func() time.Time { return time.Unix(0, now.Load()) }})
	since := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	h.accounts.set(acctA, WallSandbox{ID: sbxA, Name: "alpha", Since: since})
	var (
		mu  sync.Mutex
		got []LinkRequest
	)
	h.linker.req = func(r LinkRequest) { mu.Lock(); got = append(got, r); mu.Unlock() }
	tok := "dt_" + strings.Repeat("w", 20) + fmt.Sprint(time.Now().UnixNano())
	h.links.setKey(store.APIKey{ID: "key_wall"})
	h.links.add(tok, Link{AccountID: acctA, Kind: names.ViewWall, KeyID: "key_wall", ExpiresAt: time.Unix(0, now.Load()).Add(10 * time.Minute)})
	_, c := h.session(acctA, tok)
	if c == nil {
		t.Fatal("no wall session")
	}
	host := h.host(names.ViewWall, acctA)
	live := func(mode string) int {
		res := h.do("POST", host, PathWallLive, strings.NewReader(`{"sandbox_id":"`+sbxA+`","mode":"`+mode+`"}`), c,
			map[string]string{"Origin": "https://" + host, "Content-Type": "application/json"})
		defer res.Body.Close()
		var out struct{ URL string }
		json.NewDecoder(res.Body).Decode(&out)
		return res.StatusCode
	}
	for _, mode := range []string{"view", "use", "open"} {
		if st := live(mode); st != 200 {
			t.Errorf("%s within the wall link's 10 minutes: %d", mode, st)
		}
	}
	mu.Lock()
	if len(got) != 3 {
		t.Errorf("%d links minted, want 3", len(got))
	}
	for _, r := range got {
		if r.AccountID != acctA || r.SandboxID != sbxA || !r.Run.Equal(since) || r.KeyID != "key_wall" {
			t.Errorf("link request %+v, want account %s, sandbox %s, run %v, key key_wall", r, acctA, sbxA, since)
		}
	}
	mu.Unlock()
	now.Add(int64(11 * time.Minute))
	if st := live("view"); st != 200 {
		t.Errorf("view past the wall link's 10 minutes: %d, want 200", st)
	}
	for _, mode := range []string{"use", "open"} {
		if st := live(mode); st == 200 {
			t.Errorf("%s past the wall link's 10 minutes: %d, want a refusal", mode, st)
		}
	}
}

// What a key made stops with it: a link whose key was revoked, rotated
// or expired since it was made exchanges for nothing, and a session made
// from such a link makes no new connection (issue #24: "signed file
// links and desktop sessions made by a key stop with it").
func TestLinksEndWithTheirKey(t *testing.T) {
	t.Parallel()
	ends := map[string]func(k *store.APIKey, at time.Time){
		"revoked": func(k *store.APIKey, at time.Time) { k.RevokedAt = &at },
		"rotated": func(k *store.APIKey, at time.Time) { k.RotatedAt = &at },
		"expired": func(k *store.APIKey, at time.Time) { exp := at.Add(-time.Second); k.ExpiresAt = &exp },
		"gone":    nil,
	}
	for _, kind := range []string{names.ViewDesktop, names.ViewBrowser} {
		for name, end := range ends {
			t.Run(kind+"/"+name, func(t *testing.T) {
				t.Parallel()
				h := newHarness(t, View{Kind: kind, ID: sbxA}, 0)
				made := h.clock()
				key := store.APIKey{ID: "key_" + name, CreatedAt: made.Add(-time.Hour)}
				h.links.setKey(key)
				link := func() string {
					tok := "dt_" + strings.Repeat("k", 20) + fmt.Sprint(time.Now().UnixNano())
					h.links.add(tok, Link{SandboxID: sbxA, Kind: kind, Run: started, KeyID: key.ID, CreatedAt: made, ExpiresAt: made.Add(10 * time.Minute)})
					return tok
				}
				before, fresh := link(), link()
				_, cookie := h.exchange(before, false)
				if cookie == nil {
					t.Fatal("a link of a live key exchanged for no session")
				}
				if got := sessionStatus(t, h, cookie); got != 200 {
					t.Fatalf("the session of a live key: got %d, want 200", got)
				}
				if end == nil {
					h.links.mu.Lock()
					delete(h.links.keys, key.ID)
					h.links.mu.Unlock()
				} else {
					end(&key, made.Add(time.Second))
					h.links.setKey(key)
				}
				if res, c := h.exchange(fresh, false); res.StatusCode == 200 || c != nil {
					t.Errorf("a link of a key %s since: got %d (cookie %v), want a refusal", name, res.StatusCode, c != nil)
				}
				if got := sessionStatus(t, h, cookie); got == 200 {
					t.Errorf("the session of a key %s since: got 200, want a refusal", name)
				}
			})
		}
	}
}

// sessionStatus is what GET /session answers with cookie: the check each
// new connection of the session passes.
func sessionStatus(t *testing.T, h *harness, cookie *http.Cookie) int {
	req, _ := http.NewRequest("GET", h.ts.URL+PathSession, nil)
	req.AddCookie(cookie)
	res, err := h.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}
