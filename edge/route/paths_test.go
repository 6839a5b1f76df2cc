package route

import (
	"net/url"
	"path"
	"regexp"
	"strings"
	"testing"
	"time"

	"froog.tech/froog/store"
)

func TestPortFor(t *testing.T) {
	t.Parallel()
	rt := NewRoute(&store.URL{Port: 3000, Routes: []store.PathRoute{
		{Prefix: "/api/", Port: 8000},
		{Prefix: "/api/v2/", Port: 8002},
		{Prefix: "/ws/", Port: 9000},
	}}, nil, time.Time{})
	for _, tc := range []struct {
		path string
		want int
	}{
		{"/", 3000},
		{"/index.html", 3000},
		{"/api/", 8000},
		{"/api/users/7", 8000},
		{"/api/users/a%20b", 8000},
		{"/api/v2/x", 8002}, // the longest prefix wins, whatever the order written
		{"/api/v2", 8000},
		{"/api", 3000}, // a prefix ends with '/': /api is not under /api/
		{"/apix/", 3000},
		{"/API/", 3000}, // byte for byte
		{"/%61pi/", 3000},
		{"/ws/socket", 9000},
		{"*", 3000},
		{"", 3000},
		// What an app resolves outside the prefix selects none; what it
		// resolves inside stays.
		{"/api/../x", 3000},
		{"/api/..", 3000},
		{"/api/./x", 8000},
		{"/api/x/../y", 8000},
		{"/api/x/../v2/y", 8000}, // as sent, not under /api/v2/
		{"/api/a\\b", 8000},
		{"/api/%2e%2e/x", 3000},
		{"/api/%2E./x", 3000},
		{"/api/..;/x", 3000},
		{"/api/..%2fx", 3000},
		{"/api/..%2Fx", 3000},
		{"/api/%5c..%5cx", 3000},
		{"/api/..\\x", 3000},
		{"/api/v2/../../x", 3000},
		// Dots that are not a segment of their own are a name.
		{"/api/.well-known/x", 8000},
		{"/api/a..b/", 8000},
		{"/api/.../", 8000},
		{"/api/x%", 8000},
		{"/api/x%2", 8000},
	} {
		if got := rt.PortFor(tc.path); got != tc.want {
			t.Errorf("PortFor(%q): got %d, want %d", tc.path, got, tc.want)
		}
	}
	if got := NewRoute(&store.URL{Port: 3000}, nil, time.Time{}).PortFor("/api/"); got != 3000 {
		t.Errorf("no routes: got %d, want 3000", got)
	}
	// What the API refuses is never a route, should the store hold it.
	bad := NewRoute(&store.URL{Port: 3000, Routes: []store.PathRoute{
		{Prefix: "/a/", Port: 3000}, {Prefix: "/b", Port: 8000}, {Prefix: "b/", Port: 8000},
		{Prefix: "/c/", Port: 0}, {Prefix: "/d/", Port: 70000}, {Prefix: "/e/../", Port: 8000}, {Prefix: "/f;x/", Port: 8000}, {Prefix: "", Port: 8000},
	}}, nil, time.Time{})
	if len(bad.paths) != 0 {
		t.Errorf("routes the API refuses: got %+v, want none", bad.paths)
	}
}

func TestAppPath(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ in, want string }{
		{"/", "/"},
		{"/inbox/hook", "/inbox/hook"},
		{"/inbox/", "/inbox/"},
		{"/inbox/../admin", "/admin"},
		{"/inbox/%2e%2E/admin", "/admin"},
		{"/inbox/.%2e%2fadmin", "/admin"},
		{"/inbox/..\\admin", "/admin"},
		{"/inbox/..;/admin", "/admin"},
		{"/inbox/a;v=1/b", "/inbox/a/b"},
		{"/x/../inbox/hook", "/inbox/hook"},
		{"//inbox/hook", "/inbox/hook"},
		{"/%69nbox/hook", "/inbox/hook"},
		{"/x%2f..%2Finbox/hook", "/inbox/hook"},
		{"/inbox/.", "/inbox/"},
		{"/inbox/x/..", "/inbox/"},
		{"/inbox/..", "/"},
		{"/../../etc", "/etc"},
		{"/a%zz/%4", "/a%zz/%4"},
	} {
		if got := AppPath(tt.in); got != tt.want {
			t.Errorf("AppPath(%q): got %q, want %q", tt.in, got, tt.want)
		}
	}
}

// The port is chosen on every request to a composite URL: a plain path,
// or one under no prefix, costs nothing (a path with escapes or dot
// segments under a prefix is decoded once).
func TestPortForAllocs(t *testing.T) {
	// Not parallel: testing.AllocsPerRun refuses to run beside others.
	rt := NewRoute(&store.URL{Port: 3000, Routes: []store.PathRoute{{Prefix: "/api/", Port: 8000}, {Prefix: "/api/v2/", Port: 8002}}}, nil, time.Time{})
	for _, p := range []string{"/api/v2/users/7", "/static/a%20b;x=1/%2e.txt"} {
		if n := testing.AllocsPerRun(100, func() { rt.PortFor(p) }); n != 0 {
			t.Errorf("PortFor(%q): %v allocations, want 0", p, n)
		}
	}
}

// A port is served while any route points at it, as a URL's own port or
// as another's path route: the edge keeps its idle connections.
func TestServesPathRoutes(t *testing.T) {
	t.Parallel()
	tb := newTable()
	serves := func(port int) bool { _, ok := tb.ports.get(Port{"sbx_1", port}); return ok }
	tb.putURL(&store.URL{ID: "u1", Hostname: "front", SandboxID: "sbx_1", Port: 3000, Routes: []store.PathRoute{{Prefix: "/api/", Port: 8000}}})
	tb.putURL(&store.URL{ID: "u2", Hostname: "api", SandboxID: "sbx_1", Port: 8000})
	if !serves(3000) || !serves(8000) {
		t.Fatalf("both URLs: serves 3000 %v, 8000 %v; want both", serves(3000), serves(8000))
	}
	tb.deleteURL("u2")
	if !serves(8000) {
		t.Fatal("8000 after its own URL went: want it still served by u1's /api/")
	}
	tb.putURL(&store.URL{ID: "u1", Hostname: "front", SandboxID: "sbx_1", Port: 3000, Routes: []store.PathRoute{{Prefix: "/api/", Port: 8001}}})
	if serves(8000) || !serves(8001) {
		t.Fatalf("a route changed to 8001: serves 8000 %v, 8001 %v", serves(8000), serves(8001))
	}
	tb.deleteURL("u1")
	if serves(3000) || serves(8001) {
		t.Fatal("every URL gone: a port still served")
	}
}

// A path routes to a prefix's port only when an app that decodes it,
// reads a backslash as a slash, drops ';' parameters and resolves dot
// segments still finds it under that prefix.
func FuzzPortFor(f *testing.F) {
	for _, s := range []string{"/api/x", "/api/../x", "/api/%2e%2e/x", "/api/..;/x", "/api/..%2fx", "/api/.well-known", "/api/v2/x", "/%61pi/", "/api/%252e%252e/x", "/api/x/../../y"} {
		f.Add(s)
	}
	routes := []store.PathRoute{{Prefix: "/api/", Port: 8000}, {Prefix: "/api/v2/", Port: 8002}}
	rt := NewRoute(&store.URL{Port: 3000, Routes: routes}, nil, time.Time{})
	params := regexp.MustCompile(`;[^/]*`)
	f.Fuzz(func(t *testing.T, p string) {
		got := rt.PortFor(p)
		if got == 3000 {
			return
		}
		var prefix string
		for _, r := range routes {
			if r.Port == got {
				prefix = r.Prefix
			}
		}
		if !strings.HasPrefix(p, prefix) {
			t.Fatalf("PortFor(%q) = %d, but the path is not under %s", p, got, prefix)
		}
		dec, err := url.PathUnescape(p)
		if err != nil {
			return // an app refuses it
		}
		dec = strings.ReplaceAll(dec, "\\", "/")
		if r := path.Clean(params.ReplaceAllString(dec, "")) + "/"; !strings.HasPrefix(r, prefix) {
			t.Fatalf("PortFor(%q) = %d, but an app resolves it to %s, outside %s", p, got, r, prefix)
		}
	})
}
