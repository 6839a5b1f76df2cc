package api_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"froog.tech/froog/store"
)

var desktopLink = regexp.MustCompile(`^https://(desktop|browser)--([0-9a-f]{16})\.froog\.test:8443/(\?[a-z=&01]+)?#dt_[A-Za-z0-9_-]{43}$`)

func TestDesktopLinks(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		var sb struct{ ID string }
		e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "box"}).want(t, 202, "").json(t, &sb)
		// Not running yet: no link (it would open nothing).
		for _, p := range []string{"desktop", "desktop?viewonly=1", "browser"} {
			e.do("POST", "/v1/sandboxes/box/"+p, e.admin, nil).want(t, 409, "conflict")
		}
		run := markRunning(t, e, sb.ID)
		var link struct {
			URL       string
			ExpiresAt time.Time `json:"expires_at"`
		}
		e.do("POST", "/v1/sandboxes/box/desktop?theme=light", e.admin, nil).want(t, 201, "").json(t, &link)
		m := desktopLink.FindStringSubmatch(link.URL)
		if m == nil || m[1] != "desktop" || "sbx_"+m[2] != sb.ID || m[3] != "?theme=light" {
			t.Fatalf("desktop link %q for %s", link.URL, sb.ID)
		}
		if d := time.Until(link.ExpiresAt); d < 9*time.Minute || d > 10*time.Minute {
			t.Fatalf("expires in %v", d)
		}
		// The store keeps the token's hash, and what the link may do.
		token := link.URL[strings.Index(link.URL, "#")+1:]
		l, err := e.store.DesktopLink(context.Background(), store.HashSecret(token))
		if err != nil || l.Kind != "desktop" || l.ViewOnly || l.SandboxID != sb.ID {
			t.Fatalf("stored link %+v, %v", l, err)
		}
		// It belongs to this run, made by this key.
		admin, _ := e.store.APIKeyByHash(context.Background(), store.HashSecret(e.admin))
		if !l.Run.Equal(run) || l.KeyID == "" || l.KeyID != admin.ID {
			t.Fatalf("stored link's run %v and key %q, want %v and %q", l.Run, l.KeyID, run, admin.ID)
		}
		// A view-only link says so, in the link and in the store.
		e.do("POST", "/v1/sandboxes/box/desktop?viewonly=1", e.admin, nil).want(t, 201, "").json(t, &link)
		token = link.URL[strings.Index(link.URL, "#")+1:]
		if l, _ := e.store.DesktopLink(context.Background(), store.HashSecret(token)); !l.ViewOnly || !strings.Contains(link.URL, "?viewonly=1#") {
			t.Fatalf("view-only link %q: %+v", link.URL, l)
		}
		// The browser view: its own host, and a profile outside the system.
		e.do("POST", "/v1/sandboxes/box/browser", e.admin, map[string]any{"profile": "/home/user/work-profile"}).want(t, 201, "").json(t, &link)
		token = link.URL[strings.Index(link.URL, "#")+1:]
		if l, _ := e.store.DesktopLink(context.Background(), store.HashSecret(token)); l.Kind != "browser" || l.Profile != "/home/user/work-profile" || !strings.HasPrefix(link.URL, "https://browser--") {
			t.Fatalf("browser link %q: %+v", link.URL, l)
		}
		// Bad input changes nothing.
		for _, tt := range []struct {
			path string
			body any
		}{
			{"/v1/sandboxes/box/desktop?theme=blue", nil},
			{"/v1/sandboxes/box/desktop?viewonly=yes", nil},
			{"/v1/sandboxes/box/desktop?token=x", nil},
			{"/v1/sandboxes/box/browser", map[string]any{"profile": "relative/path"}},
			{"/v1/sandboxes/box/browser", map[string]any{"profile": "/"}},
			{"/v1/sandboxes/box/browser", map[string]any{"profile": "/etc/chromium"}},
			{"/v1/sandboxes/box/browser", map[string]any{"profile": "/usr"}},
			{"/v1/sandboxes/box/browser", map[string]any{"profile": "/proc/self"}},
			{"/v1/sandboxes/box/browser", map[string]any{"profile": "/lib64/x"}},
			{"/v1/sandboxes/box/browser", map[string]any{"profile": "/var/lib/x"}},
			{"/v1/sandboxes/box/browser", map[string]any{"profile": "/home/user/../../etc"}},
			{"/v1/sandboxes/box/browser", map[string]any{"profile": "/home//user"}},
			{"/v1/sandboxes/box/browser", map[string]any{"profile": "/home/" + strings.Repeat("p", 250)}},
			{"/v1/sandboxes/box/browser", map[string]any{"profile": "/home/user/\x00"}},
			{"/v1/sandboxes/box/browser", map[string]any{"profile": 7}},
			{"/v1/sandboxes/box/browser", map[string]any{"profile": "/home/user", "extra": 1}},
		} {
			r := e.do("POST", tt.path, e.admin, tt.body)
			if r.status != 400 {
				t.Errorf("%s %v: %d %s", tt.path, tt.body, r.status, r.body)
			}
		}
		e.do("POST", "/v1/sandboxes/nobox/desktop", e.admin, nil).want(t, 404, "not_found")
		// Stopped: no link, of either view.
		e.do("POST", "/v1/sandboxes/box/stop", e.admin, nil).want(t, 202, "")
		for _, p := range []string{"desktop", "browser"} {
			e.do("POST", "/v1/sandboxes/box/"+p, e.admin, nil).want(t, 409, "conflict")
		}
		markRunning(t, e, sb.ID)
		// The desktop action is needed.
		reader := e.key("reader", "sandbox.read")
		e.do("POST", "/v1/sandboxes/box/desktop", reader, nil).want(t, 403, "")
		viewer := e.key("viewer", "desktop")
		e.do("POST", "/v1/sandboxes/box/desktop", viewer, nil).want(t, 201, "")
		// Audited, never with the token.
		var audit struct {
			Events []struct{ Action, Target string }
		}
		e.do("GET", "/v1/audit", e.admin, nil).want(t, 200, "").json(t, &audit)
		n := 0
		for _, ev := range audit.Events {
			if ev.Action == "desktop.link" && ev.Target == "box" {
				n++
			}
		}
		if n != 3 {
			t.Fatalf("%d desktop.link events, want 3", n)
		}
		if strings.Contains(e.logs.String(), "dt_") {
			t.Fatal("a desktop token in the log")
		}
	})
}

// markRunning says in the store, as a host controller would, that the
// sandbox runs from now on; it returns the run's start.
func markRunning(t *testing.T, e *env, id string) time.Time {
	t.Helper()
	at := e.now()
	_, err := e.store.UpdateSandbox(context.Background(), id, func(sb *store.Sandbox, _ *store.AuditEvent) error {
		sb.State, sb.DesiredState, sb.StartedAt = store.StateRunning, store.StateRunning, &at
		return nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return at
}

func TestWallLink(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		var link struct{ URL string }
		e.do("POST", "/v1/wall", e.admin, nil).want(t, 201, "").json(t, &link)
		m := regexp.MustCompile(`^https://wall--([0-9a-f]{16})\.froog\.test:8443/#(dt_[A-Za-z0-9_-]{43})$`).FindStringSubmatch(link.URL)
		if m == nil || "acct_"+m[1] != e.account.ID {
			t.Fatalf("wall link %q for %s", link.URL, e.account.ID)
		}
		l, err := e.store.DesktopLink(context.Background(), store.HashSecret(m[2]))
		admin, _ := e.store.APIKeyByHash(context.Background(), store.HashSecret(e.admin))
		if err != nil || l.Kind != "wall" || l.AccountID != e.account.ID || l.SandboxID != "" || l.KeyID != admin.ID || admin.ID == "" {
			t.Fatalf("stored: %+v, %v", l, err)
		}
		e.do("POST", "/v1/wall?x=1", e.admin, nil).want(t, 400, "")
		e.do("POST", "/v1/wall", e.key("reader", "sandbox.read"), nil).want(t, 403, "")
		limited := e.keyWith("one-box", func(k *store.APIKey) { k.Sandboxes = []string{"box"} }, "desktop")
		e.do("POST", "/v1/wall", limited, nil).want(t, 403, "forbidden")
	})
}

// TestViewLinkQuery: desktop and browser take theme in the query, as the
// docs put it, and both refuse a query parameter they do not know.
func TestViewLinkQuery(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		var sb struct{ ID string }
		e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "box"}).want(t, 202, "").json(t, &sb)
		markRunning(t, e, sb.ID)
		for _, tt := range []struct {
			path   string
			body   any
			status int
			query  string // the link's query, before the #
		}{
			{"desktop?theme=light", nil, 201, "?theme=light"},
			{"browser?theme=light", nil, 201, "?theme=light"},
			{"browser?theme=dark", map[string]any{"profile": "/home/user/p"}, 201, "?theme=dark"},
			{"browser", nil, 201, ""},
			{"desktop?theme=blue", nil, 400, ""},
			{"browser?theme=blue", nil, 400, ""},
			{"desktop?nope=1", nil, 400, ""},
			{"browser?nope=1", nil, 400, ""},
			{"browser?token=x", nil, 400, ""},
			// theme is not a body field: the document has it in the query.
			{"browser", map[string]any{"theme": "light"}, 400, ""},
		} {
			r := e.do("POST", "/v1/sandboxes/box/"+tt.path, e.admin, tt.body)
			if r.status != tt.status {
				t.Errorf("POST %s %v: got %d, want %d: %s", tt.path, tt.body, r.status, tt.status, r.body)
				continue
			}
			if tt.status != 201 {
				continue
			}
			var link struct{ URL string }
			r.json(t, &link)
			m := desktopLink.FindStringSubmatch(link.URL)
			if m == nil || m[3] != tt.query {
				t.Errorf("POST %s: link %q, want its query %q", tt.path, link.URL, tt.query)
			}
		}
	})
}
