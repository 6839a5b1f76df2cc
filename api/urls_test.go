package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"froog.tech/froog/store"
)

type urlJSON struct {
	Port   int
	URL    string
	Host   string
	Public bool
	Title  string
}

var defaultHost = regexp.MustCompile(`^https://box-3000-[a-z0-9]{6}\.froog\.test:8443/\?_token=pt_[A-Za-z0-9_-]{43}$`)

func TestURLs(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "box"}).want(t, 202, "")
		var u urlJSON
		e.do("POST", "/v1/sandboxes/box/urls", e.admin, map[string]any{"port": 3000, "title": "API docs"}).want(t, 201, "").json(t, &u)
		if !defaultHost.MatchString(u.URL) || u.Public || u.Title != "API docs" {
			t.Fatalf("private url: %+v", u)
		}
		token := strings.SplitN(u.URL, "=", 2)[1]
		// The store keeps a hash, never the token.
		stored := storedURL(t, e, "box", 3000)
		if stored.TokenHash != store.HashSecret(token) || strings.Contains(string(stored.TokenSealed), token) {
			t.Fatalf("stored token: hash %s", stored.TokenHash)
		}
		// Listing shows the link again, with its token, to a key that can host.
		var list []urlJSON
		e.do("GET", "/v1/sandboxes/box/urls", e.admin, nil).want(t, 200, "").json(t, &list)
		if len(list) != 1 || list[0].URL != u.URL {
			t.Fatalf("list: %+v, want %s", list, u.URL)
		}
		reader := e.key("reader", "sandbox.read")
		e.do("GET", "/v1/sandboxes/box/urls", reader, nil).want(t, 200, "").json(t, &list)
		if strings.Contains(list[0].URL, "_token") {
			t.Fatalf("a read-only key saw the token: %s", list[0].URL)
		}

		// Hosting again without public replaces the token; the title stays.
		var u2 urlJSON
		e.do("POST", "/v1/sandboxes/box/urls", e.admin, map[string]any{"port": 3000}).want(t, 200, "").json(t, &u2)
		if u2.URL == u.URL || u2.Host != u.Host || u2.Title != "API docs" {
			t.Fatalf("re-host: %+v (was %+v)", u2, u)
		}

		// Viewer tokens.
		var tok struct{ ID, Token, URL, Label, ExpiresAt string }
		e.do("POST", "/v1/sandboxes/box/urls/3000/tokens", e.admin, map[string]any{"ttl_secs": 7200, "label": "alice"}).want(t, 201, "").json(t, &tok)
		if !strings.HasPrefix(tok.Token, "pvt_") || !strings.HasSuffix(tok.URL, "?_token="+tok.Token) || tok.Label != "alice" || !strings.HasPrefix(tok.ID, "utk_") {
			t.Fatalf("viewer token: %+v", tok)
		}
		var toks []map[string]any
		e.do("GET", "/v1/sandboxes/box/urls/3000/tokens", e.admin, nil).want(t, 200, "").json(t, &toks)
		if len(toks) != 1 || toks[0]["id"] != tok.ID || toks[0]["token"] != nil {
			t.Fatalf("token list (secrets must not be listed): %+v", toks)
		}
		e.do("DELETE", "/v1/sandboxes/box/urls/3000/tokens/"+tok.ID, e.admin, nil).want(t, 200, "")
		e.do("DELETE", "/v1/sandboxes/box/urls/3000/tokens/"+tok.ID, e.admin, nil).want(t, 404, "not_found")
		e.do("GET", "/v1/sandboxes/box/urls/3000/tokens", e.admin, nil).want(t, 200, "").json(t, &toks)
		if len(toks) != 0 {
			t.Fatalf("revoked token still listed: %+v", toks)
		}

		// Public: no token, viewer tokens gone, none can be made.
		e.do("POST", "/v1/sandboxes/box/urls/3000/tokens", e.admin, nil).want(t, 201, "")
		var pub urlJSON
		e.do("POST", "/v1/sandboxes/box/urls", e.admin, map[string]any{"port": 3000, "public": true, "title": ""}).want(t, 200, "").json(t, &pub)
		if !pub.Public || strings.Contains(pub.URL, "_token") || pub.Title != "" {
			t.Fatalf("public url: %+v", pub)
		}
		e.do("GET", "/v1/sandboxes/box/urls/3000/tokens", e.admin, nil).want(t, 200, "").json(t, &toks)
		if len(toks) != 0 {
			t.Fatalf("tokens after going public: %+v", toks)
		}
		e.do("POST", "/v1/sandboxes/box/urls/3000/tokens", e.admin, nil).want(t, 409, "url_public")

		// Subdomains.
		e.do("POST", "/v1/sandboxes/box/urls", e.admin, map[string]any{"port": 3000, "subdomain": "acme-demo", "public": true}).want(t, 200, "").json(t, &pub)
		if pub.Host != "acme-demo.froog.test" || pub.URL != "https://acme-demo.froog.test:8443/" {
			t.Fatalf("subdomain: %+v", pub)
		}
		e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "other"}).want(t, 202, "")
		e.do("POST", "/v1/sandboxes/other/urls", e.admin, map[string]any{"port": 80, "subdomain": "acme-demo"}).want(t, 409, "subdomain_taken")
		e.do("POST", "/v1/sandboxes/other/urls", e.admin, map[string]any{"port": 80, "subdomain": "desktop"}).want(t, 409, "subdomain_taken")
		// The old default name is free again for anyone.
		old, _ := url.Parse(u.URL)
		label := strings.SplitN(old.Hostname(), ".", 2)[0]
		e.do("POST", "/v1/sandboxes/other/urls", e.admin, map[string]any{"port": 80, "subdomain": label}).want(t, 201, "")

		e.do("DELETE", "/v1/sandboxes/box/urls/3000", e.admin, nil).want(t, 200, "")
		e.do("DELETE", "/v1/sandboxes/box/urls/3000", e.admin, nil).want(t, 404, "not_found")
		e.do("GET", "/v1/sandboxes/box/urls/3000/tokens", e.admin, nil).want(t, 404, "not_found")

		var events struct {
			Events []struct {
				Action string
				Detail map[string]string
			} `json:"events"`
		}
		e.do("GET", "/v1/audit?limit=200", e.admin, nil).want(t, 200, "").json(t, &events)
		counts := map[string]int{}
		for _, ev := range events.Events {
			counts[ev.Action]++
			for _, v := range ev.Detail {
				if strings.Contains(v, "pt_") || strings.Contains(v, "pvt_") {
					t.Fatalf("a token in the audit log: %+v", ev)
				}
			}
		}
		if counts["url.create"] != 2 || counts["url.update"] != 3 || counts["url.delete"] != 1 || counts["url_token.create"] != 2 || counts["url_token.revoke"] != 1 {
			t.Fatalf("audit counts: %v", counts)
		}
	})
}

func storedURL(t *testing.T, e *env, name string, port int) store.URL {
	t.Helper()
	ctx := context.Background()
	sb, err := e.store.Sandbox(ctx, e.account.ID, name)
	if err != nil {
		t.Fatal(err)
	}
	u, err := e.store.URL(ctx, sb.ID, port)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestURLNamesPerDay(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		for i := 0; i < 3; i++ {
			e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": fmt.Sprint("b", i)}).want(t, 202, "")
		}
		n := 0
		for sb := 0; sb < 3 && n < 20; sb++ {
			for p := 0; p < 10 && n < 20; p++ {
				e.do("POST", fmt.Sprintf("/v1/sandboxes/b%d/urls", sb), e.admin, map[string]any{"port": 3000 + p}).want(t, 201, "")
				n++
			}
		}
		e.do("POST", "/v1/sandboxes/b2/urls", e.admin, map[string]any{"port": 9000}).want(t, 429, "limit_reached")
		// Re-hosting an existing URL takes no new name.
		e.do("POST", "/v1/sandboxes/b0/urls", e.admin, map[string]any{"port": 3000, "public": true}).want(t, 200, "")
		e.do("POST", "/v1/sandboxes/b0/urls", e.admin, map[string]any{"port": 3000, "subdomain": "fresh-name"}).want(t, 429, "limit_reached")
	})
}

func TestURLTokenLimitAndExpiry(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "box"}).want(t, 202, "")
		e.do("POST", "/v1/sandboxes/box/urls", e.admin, map[string]any{"port": 3000}).want(t, 201, "")
		for i := 0; i < 100; i++ {
			e.do("POST", "/v1/sandboxes/box/urls/3000/tokens", e.admin, map[string]any{"label": fmt.Sprint(i)}).want(t, 201, "")
		}
		e.do("POST", "/v1/sandboxes/box/urls/3000/tokens", e.admin, nil).want(t, 429, "limit_reached")
		var toks []struct {
			ExpiresAt string `json:"expires_at"`
		}
		e.do("GET", "/v1/sandboxes/box/urls/3000/tokens", e.admin, nil).want(t, 200, "").json(t, &toks)
		if len(toks) != 100 {
			t.Fatalf("%d live tokens, want 100", len(toks))
		}
		raw := e.do("GET", "/v1/sandboxes/box/urls/3000/tokens", e.admin, nil).body
		var one []map[string]any
		json.Unmarshal(raw, &one)
		if one[0]["expires_at"] == nil {
			t.Fatalf("token without expires_at: %s", raw[:200])
		}
	})
}

// show_ports is off by default, kept when absent, and refused when it is
// not a boolean (the URL unchanged).
func TestURLShowPorts(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "box"}).want(t, 202, "")
		var u struct {
			ShowPorts *bool `json:"show_ports"`
		}
		e.do("POST", "/v1/sandboxes/box/urls", e.admin, map[string]any{"port": 3000, "public": true}).want(t, 201, "").json(t, &u)
		if u.ShowPorts == nil || *u.ShowPorts {
			t.Fatalf("a new URL: show_ports %v, want false", u.ShowPorts)
		}
		e.do("POST", "/v1/sandboxes/box/urls", e.admin, map[string]any{"port": 3000, "public": true, "show_ports": true}).want(t, 200, "").json(t, &u)
		if !*u.ShowPorts || !storedURL(t, e, "box", 3000).ShowPorts {
			t.Fatalf("show_ports true: got %v", *u.ShowPorts)
		}
		e.do("POST", "/v1/sandboxes/box/urls", e.admin, map[string]any{"port": 3000, "public": true}).want(t, 200, "").json(t, &u)
		if !*u.ShowPorts {
			t.Fatal("show_ports absent turned it off")
		}
		e.do("POST", "/v1/sandboxes/box/urls", e.admin, map[string]any{"port": 3000, "show_ports": "yes"}).want(t, 400, "")
		if !storedURL(t, e, "box", 3000).Public {
			t.Fatal("a refused request changed the URL")
		}
		e.do("POST", "/v1/sandboxes/box/urls", e.admin, map[string]any{"port": 3000, "public": true, "show_ports": false}).want(t, 200, "").json(t, &u)
		if *u.ShowPorts || storedURL(t, e, "box", 3000).ShowPorts {
			t.Fatal("show_ports false did not turn it off")
		}
	})
}
