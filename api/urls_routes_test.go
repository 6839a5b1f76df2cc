package api_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"froog.tech/froog/api"
	"froog.tech/froog/store"
)

type routesOut struct {
	URL    string
	Routes []store.PathRoute `json:"routes"`
}

// The owner sets a URL's routes on POST …/urls and PATCH …/urls/{port}:
// absent keeps them, null or [] takes them off; the answer, the list and
// the store say the same, in the order written; PATCH keeps the token.
func TestURLRoutes(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "box"}).want(t, 202, "")
		var u routesOut
		e.do("POST", "/v1/sandboxes/box/urls", e.admin, map[string]any{"port": 3000}).want(t, 201, "").json(t, &u)
		if u.Routes == nil || len(u.Routes) != 0 {
			t.Fatalf("a new URL: routes %v, want []", u.Routes)
		}
		want := []store.PathRoute{{Prefix: "/api/", Port: 8000}, {Prefix: "/api/v2/", Port: 8001}, {Prefix: "/ws/", Port: 9000}}
		e.do("POST", "/v1/sandboxes/box/urls", e.admin, map[string]any{"port": 3000, "routes": want}).want(t, 200, "").json(t, &u)
		if !slices.Equal(u.Routes, want) || !slices.Equal(storedURL(t, e, "box", 3000).Routes, want) {
			t.Fatalf("routes set: got %v, stored %v; want %v", u.Routes, storedURL(t, e, "box", 3000).Routes, want)
		}
		// Absent keeps them.
		e.do("POST", "/v1/sandboxes/box/urls", e.admin, map[string]any{"port": 3000, "title": "t"}).want(t, 200, "").json(t, &u)
		if !slices.Equal(u.Routes, want) {
			t.Fatalf("absent: got %v, want them kept", u.Routes)
		}
		var list []routesOut
		e.do("GET", "/v1/sandboxes/box/urls", e.admin, nil).want(t, 200, "").json(t, &list)
		if len(list) != 1 || !slices.Equal(list[0].Routes, want) {
			t.Fatalf("list: got %+v", list)
		}
		// PATCH changes them and keeps the link.
		var p routesOut
		e.do("PATCH", "/v1/sandboxes/box/urls/3000", e.admin, map[string]any{"routes": want[:1]}).want(t, 200, "").json(t, &p)
		if p.URL != u.URL || !slices.Equal(p.Routes, want[:1]) || !slices.Equal(storedURL(t, e, "box", 3000).Routes, want[:1]) {
			t.Fatalf("PATCH: link %q (was %q), routes %v", p.URL, u.URL, p.Routes)
		}
		e.do("PATCH", "/v1/sandboxes/box/urls/3000", e.admin, map[string]any{"routes": []any{map[string]any{"prefix": "/x/", "port": 3000}}}).want(t, 400, "invalid_value")
		e.do("PATCH", "/v1/sandboxes/box/urls/3000", e.admin, `{"routes": []}`).want(t, 200, "").json(t, &p)
		if len(p.Routes) != 0 || storedURL(t, e, "box", 3000).Routes != nil {
			t.Fatalf("PATCH []: got %v, stored %v", p.Routes, storedURL(t, e, "box", 3000).Routes)
		}
		e.do("POST", "/v1/sandboxes/box/urls", e.admin, map[string]any{"port": 3000, "routes": want}).want(t, 200, "")
		e.do("POST", "/v1/sandboxes/box/urls", e.admin, `{"port": 3000, "routes": null}`).want(t, 200, "").json(t, &u)
		if len(u.Routes) != 0 || storedURL(t, e, "box", 3000).Routes != nil {
			t.Fatalf("null: got %v, want none", u.Routes)
		}
	})
}

// Bad routes are a 400 that says what to write, on POST and PATCH alike,
// and change nothing.
func TestURLRoutesRefused(t *testing.T) {
	route := func(prefix string, port any) map[string]any { return map[string]any{"prefix": prefix, "port": port} }
	many := make([]any, 9)
	for i := range many {
		many[i] = route(fmt.Sprintf("/r%d/", i), 8000+i)
	}
	for _, tc := range []struct {
		name   string
		routes any
		says   string
	}{
		{"not a list", "/api/", "must be a list"},
		{"a list of strings", []string{"/api/"}, `{"prefix": "/api/", "port": 8000}`},
		{"no port", []any{map[string]any{"prefix": "/api/"}}, `{"prefix": "/api/", "port": 8000}`},
		{"no prefix", []any{map[string]any{"port": 8000}}, `{"prefix": "/api/", "port": 8000}`},
		{"an unknown member", []any{map[string]any{"prefix": "/api/", "port": 8000, "strip": true}}, `{"prefix": "/api/", "port": 8000}`},
		{"a port as a string", []any{route("/api/", "8000")}, `{"prefix": "/api/", "port": 8000}`},
		{"too many", many, "at most 8"},
		{"empty prefix", []any{route("", 8000)}, "start and end with /"},
		{"no leading /", []any{route("api/", 8000)}, "start and end with /"},
		{"no trailing /", []any{route("/api", 8000)}, "start and end with /"},
		{"too long", []any{route("/"+strings.Repeat("a", 127)+"/", 8000)}, "at most 128 bytes"},
		{"..", []any{route("/api/../", 8000)}, "plain path"},
		{".. in a name", []any{route("/a..b/", 8000)}, "plain path"},
		{"a . segment", []any{route("/api/./", 8000)}, "no . segment"},
		{"//", []any{route("//api/", 8000)}, "plain path"},
		{"%", []any{route("/%61pi/", 8000)}, "plain path"},
		{";", []any{route("/api;v=1/", 8000)}, "plain path"},
		{"?", []any{route("/api?/", 8000)}, "plain path"},
		{"#", []any{route("/api#/", 8000)}, "plain path"},
		{"a backslash", []any{route("/api\\/", 8000)}, "plain path"},
		{"a control byte", []any{route("/api\x01/", 8000)}, "printable ASCII"},
		{"a line's end", []any{route("/api\r\n/", 8000)}, "printable ASCII"},
		{"a space", []any{route("/a b/", 8000)}, "printable ASCII"},
		{"not ASCII", []any{route("/café/", 8000)}, "printable ASCII"},
		{"port 0", []any{route("/api/", 0)}, "from 1 to 65535"},
		{"port too high", []any{route("/api/", 65536)}, "from 1 to 65535"},
		{"the URL's own port", []any{route("/api/", 3000)}, "the URL's own port"},
		{"a prefix twice", []any{route("/api/", 8000), route("/api/", 8001)}, "appears twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, backends[0].open(t), api.Options{})
			e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "box"}).want(t, 202, "")
			kept := []store.PathRoute{{Prefix: "/kept/", Port: 7000}}
			e.do("POST", "/v1/sandboxes/box/urls", e.admin, map[string]any{"port": 3000, "title": "kept", "routes": kept}).want(t, 201, "")
			before := storedURL(t, e, "box", 3000)
			for _, req := range []struct {
				method, path string
				body         map[string]any
			}{
				{"POST", "/v1/sandboxes/box/urls", map[string]any{"port": 3000, "title": "changed", "routes": tc.routes}},
				{"PATCH", "/v1/sandboxes/box/urls/3000", map[string]any{"routes": tc.routes}},
			} {
				r := e.do(req.method, req.path, e.admin, req.body).want(t, 400, "invalid_value")
				var eb struct{ Error struct{ Message string } }
				json.Unmarshal(r.body, &eb)
				if !strings.Contains(eb.Error.Message, tc.says) || strings.ContainsAny(eb.Error.Message, "\r\n") {
					t.Errorf("%s: message %q: want it to say %q, on one line", req.method, eb.Error.Message, tc.says)
				}
			}
			after := storedURL(t, e, "box", 3000)
			if after.Title != "kept" || after.TokenHash != before.TokenHash || !slices.Equal(after.Routes, kept) || !after.UpdatedAt.Equal(before.UpdatedAt) {
				t.Errorf("a refused request changed the URL: before %+v, after %+v", before, after)
			}
		})
	}
}
