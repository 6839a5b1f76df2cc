package edge

import (
	"net/url"
	"path"
	"strings"
	"testing"

	"froog.tech/froog/store"
)

func TestInboxAmbiguous(t *testing.T) {
	t.Parallel()
	in := &store.Inbox{Method: "POST", PathPrefix: "/inbox/"}
	for _, tt := range []struct {
		method, path string
		want         bool
	}{
		{"POST", "/inbox/hook", false},
		{"POST", "/inbox/a/../b", false}, // resolved, still in the inbox
		{"POST", "/static/../app.js", false},
		{"POST", "/inbox%20x/", false},
		{"POST", "/inbox/../admin", true},
		{"POST", "/inbox/%2e%2e/admin", true},
		{"POST", "/inbox/..%2fadmin", true},
		{"POST", "/inbox/..;/admin", true},
		{"POST", "/x/../inbox/hook", true},
		{"POST", "/%69nbox/hook", true},
		{"POST", "//inbox/hook", true},
		{"GET", "/x/../inbox/hook", false}, // not the inbox's method: the app's as ever
	} {
		if got := inboxAmbiguous(in, tt.method, tt.path); got != tt.want {
			t.Errorf("%s %s: got %v, want %v", tt.method, tt.path, got, tt.want)
		}
	}
	if inboxAmbiguous(nil, "POST", "/x/../inbox/") {
		t.Error("a URL without an inbox refused an unclean path")
	}
}

func TestInboxAmbiguousAllocs(t *testing.T) {
	// Not parallel: testing.AllocsPerRun refuses to run beside others.
	in := &store.Inbox{Method: "POST", PathPrefix: "/inbox/"}
	if n := testing.AllocsPerRun(100, func() { inboxAmbiguous(in, "POST", "/inbox/github/push") }); n != 0 {
		t.Errorf("a plain path: %v allocations, want 0", n)
	}
}

// A path the inbox takes or leaves as its prefix says, byte for byte,
// is taken or left alike by an app that reads it decoded and resolved
// as Go's net/url and path do.
func FuzzInboxAmbiguous(f *testing.F) {
	for _, s := range []string{"/inbox/hook", "/inbox/../admin", "/x/../inbox/h", "/%69nbox/h", "//inbox/h", "/inbox/..;/x",
		"/inbox/..%2fx", "/inbox\\..\\x", "/inbox/.", "/inbox", "/inbox/a/../b"} {
		f.Add(s)
	}
	in := &store.Inbox{PathPrefix: "/inbox/"}
	f.Fuzz(func(t *testing.T, p string) {
		if !strings.HasPrefix(p, "/") || inboxAmbiguous(in, "POST", p) {
			return
		}
		dec, err := url.PathUnescape(p)
		if err != nil {
			return
		}
		dec = strings.ReplaceAll(dec, "\\", "/")
		app := path.Clean(dec)
		under := strings.HasPrefix(app, "/inbox/") || app == "/inbox" && (strings.HasSuffix(dec, "/") || strings.HasSuffix(dec, "/.") || strings.HasSuffix(dec, "/.."))
		if raw := strings.HasPrefix(p, "/inbox/"); raw != under {
			t.Errorf("%q passed as one reading: under the prefix as sent %v, as an app reads it (%q) %v", p, raw, app, under)
		}
	})
}
