package api_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"froog.tech/froog/api"
	"froog.tech/froog/hostctl/local"
	"froog.tech/froog/internal/testdep"
	"froog.tech/froog/internal/testkit"
	"froog.tech/froog/internal/testkit/live"
	"froog.tech/froog/store"
)

// filesEnv is a live API (local driver) whose clock a test can move, and
// whose sandboxes' home folders it can see.
type filesEnv struct {
	*liveEnv
	drv    *local.Driver
	keyPEM []byte             // the control key, for an OpenSSH client
	clock  *testkit.FakeClock // real time plus what the test moved it
}

func forEachFilesStore(t *testing.T, o api.Options, fn func(t *testing.T, e *filesEnv)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			fn(t, liveWith(t, b.open(t), o))
		})
	}
}

// liveWith is a filesEnv on st (testkit/live).
func liveWith(t *testing.T, st store.Store, o api.Options) *filesEnv {
	rig := live.Start(t, st)
	clock := &testkit.FakeClock{}
	o.Sessions, o.Now = rig.Tunnel, clock.Now
	return &filesEnv{liveEnv: &liveEnv{env: newEnv(t, st, o), tun: rig.Tunnel}, drv: rig.Driver, keyPEM: rig.KeyPEM, clock: clock}
}

// home is the sandbox's home folder on this machine (local driver).
func (e *filesEnv) home(id string) string {
	return e.drv.Home(&store.Sandbox{ID: id})
}

// raw sends a body as it is, with the key (none when "").
func (e *env) raw(method, path, key string, body io.Reader) response {
	e.t.Helper()
	req, err := http.NewRequest(method, path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	if !strings.HasPrefix(path, "http") {
		req, _ = http.NewRequest(method, e.srv.URL+path, body)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return response{status: res.StatusCode, header: res.Header, body: b}
}

type fileJSON struct {
	Path, Name, Type, Mode, LinkTarget string
	Size                               int64
	Entries                            []fileJSON
	Truncated                          *bool
}

func TestFiles(t *testing.T) {
	forEachFilesStore(t, api.Options{}, func(t *testing.T, e *filesEnv) {
		id := e.running("box")
		home := e.home(id)
		const base = "/v1/sandboxes/box/files"

		// Upload: parents made, mode set, bytes kept.
		data := bytes.Repeat([]byte("froog\x00\xff"), 100000)
		var f fileJSON
		e.raw("PUT", base+"/content?path=app/src/bin.dat&mode=750", e.admin, bytes.NewReader(data)).want(t, 200, "").json(t, &f)
		if f.Path != home+"/app/src/bin.dat" || f.Size != int64(len(data)) || f.Mode != "750" || f.Type != "file" {
			t.Fatalf("upload: %+v", f)
		}
		if b, _ := os.ReadFile(filepath.Join(home, "app/src/bin.dat")); !bytes.Equal(b, data) {
			t.Fatal("the file in the sandbox is not what was uploaded")
		}
		if fi, _ := os.Stat(filepath.Join(home, "app/src/bin.dat")); fi.Mode().Perm() != 0o750 {
			t.Fatalf("mode %v, want 750", fi.Mode())
		}
		r := e.raw("GET", base+"/content?path=~/app/src/bin.dat", e.admin, nil).want(t, 200, "")
		if !bytes.Equal(r.body, data) || r.header.Get("Content-Type") != "application/octet-stream" || r.header.Get("X-Content-Type-Options") != "nosniff" ||
			!strings.HasPrefix(r.header.Get("Content-Disposition"), "attachment") {
			t.Fatalf("download: %d bytes, headers %v", len(r.body), r.header)
		}
		// An upload over a file keeps its mode, and replaces it whole.
		e.raw("PUT", base+"/content?path="+home+"/app/src/bin.dat", e.admin, strings.NewReader("short")).want(t, 200, "").json(t, &f)
		if f.Size != 5 || f.Mode != "750" {
			t.Fatalf("overwrite: %+v", f)
		}
		// Details and listings.
		e.raw("GET", base+"?path=app/src", e.admin, nil).want(t, 200, "").json(t, &f)
		if f.Type != "dir" || len(f.Entries) != 1 || f.Entries[0].Name != "bin.dat" || f.Entries[0].Size != 5 {
			t.Fatalf("listing: %+v", f)
		}
		e.raw("GET", base, e.admin, nil).want(t, 200, "").json(t, &f)
		if f.Path != home || len(f.Entries) == 0 {
			t.Fatalf("home: %+v", f)
		}
		// mkdir, permissions, move.
		e.do("POST", base+"/mkdir", e.admin, map[string]any{"path": "a/b/c", "mode": "700"}).want(t, 200, "").json(t, &f)
		if fi, err := os.Stat(filepath.Join(home, "a/b/c")); err != nil || fi.Mode().Perm() != 0o700 || f.Mode != "700" {
			t.Fatalf("mkdir: %v %v", fi, err)
		}
		e.do("POST", base+"/mkdir", e.admin, map[string]any{"path": "app/src/bin.dat"}).want(t, 409, "already_exists")
		e.raw("PUT", base+"/content?path=a/b/c/x.sh", e.admin, strings.NewReader("echo hi")).want(t, 200, "")
		e.do("POST", base+"/permissions", e.admin, map[string]any{"path": "a", "mode": "755", "recursive": true}).want(t, 200, "")
		for _, p := range []string{"a", "a/b", "a/b/c", "a/b/c/x.sh"} {
			if fi, _ := os.Stat(filepath.Join(home, p)); fi.Mode().Perm() != 0o755 {
				t.Fatalf("%s: mode %v after a recursive chmod", p, fi.Mode())
			}
		}
		e.do("POST", base+"/move", e.admin, map[string]any{"from": "a/b/c/x.sh", "to": "moved/y.sh"}).want(t, 200, "")
		if b, _ := os.ReadFile(filepath.Join(home, "moved/y.sh")); string(b) != "echo hi" {
			t.Fatalf("move: %q", b)
		}
		e.do("POST", base+"/move", e.admin, map[string]any{"from": "nothing", "to": "x"}).want(t, 404, "not_found")
		e.do("POST", base+"/move", e.admin, map[string]any{"from": "moved", "to": "moved/inside"}).want(t, 400, "invalid_value")
		// Delete: a file, a folder that is not empty only with recursive.
		e.raw("DELETE", base+"?path=a", e.admin, nil).want(t, 409, "folder_not_empty")
		e.raw("DELETE", base+"?path=a&recursive=true", e.admin, nil).want(t, 200, "")
		e.raw("DELETE", base+"?path=moved/y.sh", e.admin, nil).want(t, 200, "")
		e.raw("DELETE", base+"?path=moved", e.admin, nil).want(t, 200, "")
		e.raw("DELETE", base+"?path=~", e.admin, nil).want(t, 400, "invalid_value")
		for _, p := range []string{"a", "moved"} {
			if _, err := os.Lstat(filepath.Join(home, p)); !os.IsNotExist(err) {
				t.Fatalf("%s is still there: %v", p, err)
			}
		}
		e.raw("GET", base+"/content?path=a", e.admin, nil).want(t, 404, "not_found")
		e.raw("GET", base+"/content?path=app", e.admin, nil).want(t, 400, "is_a_folder")
		// Delete a symlink, never what it points to.
		os.WriteFile(filepath.Join(home, "keep.txt"), []byte("keep"), 0o644)
		os.Symlink("keep.txt", filepath.Join(home, "link"))
		e.raw("DELETE", base+"?path=link&recursive=true", e.admin, nil).want(t, 200, "")
		if _, err := os.Stat(filepath.Join(home, "keep.txt")); err != nil {
			t.Fatal("deleting a symlink deleted its target")
		}

		// The local driver's sandbox is its home folder: nothing outside
		// it is reached, by an absolute path, by .. or through a symlink.
		os.Symlink("/etc", filepath.Join(home, "etc-link"))
		for _, p := range []string{"/etc/hostname", "../../../../../../etc/hostname", "etc-link/hostname", "~/../x"} {
			e.raw("GET", base+"/content?path="+p, e.admin, nil).want(t, 403, "permission_denied")
			e.raw("PUT", base+"/content?path="+p, e.admin, strings.NewReader("x")).want(t, 403, "permission_denied")
		}
		e.raw("GET", base+"/search?pattern=*&path=/", e.admin, nil).want(t, 403, "permission_denied")
		os.Remove(filepath.Join(home, "etc-link"))

		// Search, find, replace.
		for p, s := range map[string]string{"proj/a.py": "import os\nprint('hello')\n", "proj/sub/b.py": "x = 'hello'\r\nhello hello\n",
			"proj/c.txt": "hello\n", "proj/bin.py": "hello\x00binary"} {
			e.raw("PUT", base+"/content?path="+p, e.admin, strings.NewReader(s)).want(t, 200, "")
		}
		var found struct {
			Files     []string
			Truncated bool
		}
		e.raw("GET", base+"/search?pattern=*.py&path=proj", e.admin, nil).want(t, 200, "").json(t, &found)
		want := []string{home + "/proj/a.py", home + "/proj/bin.py", home + "/proj/sub/b.py"}
		if fmt.Sprint(found.Files) != fmt.Sprint(want) || found.Truncated {
			t.Fatalf("search: %+v, want %v", found, want)
		}
		var matches struct {
			Matches []struct {
				File    string
				Line    int
				Content string
			}
			Truncated bool
		}
		e.raw("GET", base+"/find?pattern=hello&path=proj", e.admin, nil).want(t, 200, "").json(t, &matches)
		got := []string{}
		for _, m := range matches.Matches {
			got = append(got, fmt.Sprintf("%s:%d:%s", strings.TrimPrefix(m.File, home+"/"), m.Line, m.Content))
		}
		if fmt.Sprint(got) != fmt.Sprint([]string{"proj/a.py:2:print('hello')", "proj/c.txt:1:hello", "proj/sub/b.py:1:x = 'hello'\r", "proj/sub/b.py:2:hello hello"}) {
			t.Fatalf("find: %q", got)
		}
		e.raw("GET", base+"/find?pattern=^hel%2Bo$&regex=true&path=proj", e.admin, nil).want(t, 200, "").json(t, &matches)
		if len(matches.Matches) != 1 || !strings.HasSuffix(matches.Matches[0].File, "proj/c.txt") {
			t.Fatalf("find regex: %+v", matches)
		}
		var replaced struct {
			Results []struct {
				File         string
				Success      bool
				Replacements *int
				Error        string
			}
		}
		e.do("POST", base+"/replace", e.admin, map[string]any{"paths": []string{"proj/sub/b.py", "proj/none.py", "proj"}, "pattern": "hello", "new_value": "bye"}).want(t, 200, "").json(t, &replaced)
		if res := replaced.Results; len(res) != 3 || !res[0].Success || *res[0].Replacements != 3 || res[1].Success || res[2].Success || res[2].Error == "" {
			t.Fatalf("replace: %+v", replaced)
		}
		if b, _ := os.ReadFile(filepath.Join(home, "proj/sub/b.py")); string(b) != "x = 'bye'\r\nbye bye\n" {
			t.Fatalf("after replace: %q", b)
		}

		// Scopes.
		ro := e.key("ro", "sandbox.read", "file.read")
		e.raw("GET", base+"/content?path=proj/c.txt", ro, nil).want(t, 200, "")
		e.raw("PUT", base+"/content?path=proj/c.txt", ro, strings.NewReader("x")).want(t, 403, "api_key_action_forbidden")
		e.raw("GET", base+"/content?path=proj/c.txt", e.key("none", "sandbox.read"), nil).want(t, 403, "api_key_action_forbidden")
		e.do("POST", base+"/upload-url", ro, map[string]any{"path": "x"}).want(t, 403, "api_key_action_forbidden")
	})
}

// TestFilesMalformed: bad input gets a clear error and changes nothing.
func TestFilesMalformed(t *testing.T) {
	forEachFilesStore(t, api.Options{MaxFileBytes: 1 << 20}, func(t *testing.T, e *filesEnv) {
		id := e.running("box")
		home := e.home(id)
		before := snapshotTree(t, home)
		const base = "/v1/sandboxes/box/files"
		long := strings.Repeat("a", 4097)
		for _, c := range []struct {
			method, path string
			body         any
			status       int
			code         string
		}{
			{"GET", base + "/content", nil, 400, "invalid_value"},
			{"GET", base + "/content?path=a%00b", nil, 400, "invalid_value"},
			{"GET", base + "/content?path=" + long, nil, 400, "invalid_value"},
			{"GET", base + "/content?path=x&other=1", nil, 400, "invalid_query"},
			{"GET", base + "?path=x&recursive=1", nil, 400, "invalid_query"},
			{"PUT", base + "/content?path=x&mode=999", "x", 400, "invalid_value"},
			{"PUT", base + "/content?path=x&mode=", "x", 400, "invalid_value"},
			{"PUT", base + "/content?path=x&mode=17777", "x", 400, "invalid_value"},
			{"PUT", base + "/content?path=x&mode=rwx", "x", 400, "invalid_value"},
			{"PUT", base + "/content?path=x", strings.Repeat("x", 1<<20+1), 413, "file_too_large"},
			{"PUT", base + "/archive?path=x", "not gzip", 400, "invalid_archive"},
			{"PUT", base + "/archive?path=x", strings.Repeat("x", 1<<20+1), 413, "file_too_large"},
			{"DELETE", base, nil, 400, "invalid_value"},
			{"DELETE", base + "?path=x&recursive=yes", nil, 400, "invalid_query"},
			{"DELETE", base + "?path=/", nil, 400, "invalid_value"},
			{"POST", base + "/move", map[string]any{"from": "x"}, 400, "invalid_value"},
			{"POST", base + "/move", map[string]any{"from": "x", "to": ""}, 400, "invalid_value"},
			{"POST", base + "/move", map[string]any{"from": 1, "to": "y"}, 400, "invalid_type"},
			{"POST", base + "/move", `{"from":"x","to":"y","extra":1}`, 400, "unknown_field"},
			{"POST", base + "/move", `{"from":"x"`, 400, "invalid_json"},
			{"POST", base + "/move", map[string]any{"from": "~", "to": "y"}, 400, "invalid_value"},
			{"POST", base + "/mkdir", map[string]any{}, 400, "invalid_value"},
			{"POST", base + "/mkdir", map[string]any{"path": "d", "mode": "8"}, 400, "invalid_value"},
			{"POST", base + "/permissions", map[string]any{"path": "d"}, 400, "invalid_value"},
			{"POST", base + "/permissions", map[string]any{"path": "d", "mode": 755}, 400, "invalid_type"},
			{"POST", base + "/download-url", map[string]any{"path": "d", "expires_in": 59}, 400, "invalid_value"},
			{"POST", base + "/download-url", map[string]any{"path": "d", "expires_in": 86401}, 400, "invalid_value"},
			{"POST", base + "/upload-url", map[string]any{}, 400, "invalid_value"},
			{"GET", base + "/search", nil, 400, "invalid_value"},
			{"GET", base + "/search?pattern=[", nil, 400, "invalid_value"},
			{"GET", base + "/search?pattern=a/b", nil, 400, "invalid_value"},
			{"GET", base + "/find", nil, 400, "invalid_value"},
			{"GET", base + "/find?pattern=(&regex=true", nil, 400, "invalid_value"},
			{"GET", base + "/find?pattern=a&regex=maybe", nil, 400, "invalid_query"},
			{"POST", base + "/replace", map[string]any{"paths": []string{}, "pattern": "a", "new_value": "b"}, 400, "invalid_value"},
			{"POST", base + "/replace", map[string]any{"paths": make([]string, 101), "pattern": "a", "new_value": "b"}, 400, "invalid_value"},
			{"POST", base + "/replace", map[string]any{"paths": []string{"x"}, "pattern": "", "new_value": "b"}, 400, "invalid_value"},
			{"POST", base + "/replace", map[string]any{"paths": []string{"x"}, "pattern": "a"}, 400, "invalid_value"},
			{"POST", base + "/replace", map[string]any{"paths": []string{""}, "pattern": "a", "new_value": "b"}, 400, "invalid_value"},
			{"GET", "/v1/files/download", nil, 403, "invalid_link"},
			{"GET", "/v1/files/download?token=abc", nil, 403, "invalid_link"},
			{"GET", "/v1/files/download?token=" + long + long, nil, 403, "invalid_link"},
			{"GET", "/v1/files/download?token=x&path=y", nil, 400, "invalid_query"},
			{"PUT", "/v1/files/upload?token=%%%", "x", 403, "invalid_link"},
			{"GET", "/v1/sandboxes/nobox/files/content?path=x", nil, 404, "not_found"},
		} {
			t.Run(c.method+" "+c.path[:min(len(c.path), 60)], func(t *testing.T) {
				var r response
				switch b := c.body.(type) {
				case string:
					r = e.raw(c.method, c.path, e.admin, strings.NewReader(b))
				default:
					r = e.do(c.method, c.path, e.admin, c.body)
				}
				r.want(t, c.status, c.code)
			})
		}
		if after := snapshotTree(t, home); after != before {
			t.Fatalf("malformed requests changed the home folder:\n%s\nwas\n%s", after, before)
		}
	})
}

// snapshotTree describes every entry under dir: name, type, mode, size
// and contents' hash.
func snapshotTree(t testing.TB, dir string) string {
	t.Helper()
	var b strings.Builder
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			fmt.Fprintf(&b, "%s: %v\n", p, err)
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		fmt.Fprintf(&b, "%s %v %d", rel, fi.Mode(), fi.Size())
		if fi.Mode().IsRegular() {
			c, _ := os.ReadFile(p)
			fmt.Fprintf(&b, " %x", c[:min(len(c), 64)])
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			l, _ := os.Readlink(p)
			fmt.Fprintf(&b, " -> %s", l)
		}
		b.WriteByte('\n')
		return nil
	})
	return b.String()
}

type linkJSON struct {
	URL, Method string
	ExpiresAt   time.Time `json:"expires_at"`
}

func TestFileLinks(t *testing.T) {
	forEachFilesStore(t, api.Options{}, func(t *testing.T, e *filesEnv) {
		id := e.running("box")
		home := e.home(id)
		const base = "/v1/sandboxes/box/files"
		e.raw("PUT", base+"/content?path=out/result.bin", e.admin, strings.NewReader("the result")).want(t, 200, "")

		var dl linkJSON
		e.do("POST", base+"/download-url", e.admin, map[string]any{"path": "out/result.bin"}).want(t, 200, "").json(t, &dl)
		if dl.Method != "GET" || !strings.HasPrefix(dl.URL, e.srv.URL+"/v1/files/download?token=") {
			t.Fatalf("download-url: %+v", dl)
		}
		if d := time.Until(dl.ExpiresAt); d < 14*time.Minute || d > 16*time.Minute {
			t.Fatalf("a link lives 15 minutes by default; this one %v", d)
		}
		if r := e.raw("GET", dl.URL, "", nil).want(t, 200, ""); string(r.body) != "the result" {
			t.Fatalf("download through the link: %q", r.body)
		}
		// The token is never logged (nor is any query).
		if token := dl.URL[strings.Index(dl.URL, "token=")+6:]; strings.Contains(e.logs.String(), token[:40]) {
			t.Fatal("the link's token is in the log")
		}
		// The link is for that file and that way only.
		tok := dl.URL[strings.Index(dl.URL, "token=")+6:]
		e.raw("PUT", e.srv.URL+"/v1/files/upload?token="+tok, "", strings.NewReader("x")).want(t, 403, "invalid_link")
		tampered := []byte(tok)
		tampered[len(tampered)/2] ^= 1
		e.raw("GET", e.srv.URL+"/v1/files/download?token="+string(tampered), "", nil).want(t, 403, "invalid_link")

		var ul linkJSON
		e.do("POST", base+"/upload-url", e.admin, map[string]any{"path": "in/new.txt", "expires_in": 60}).want(t, 200, "").json(t, &ul)
		if ul.Method != "PUT" {
			t.Fatalf("upload-url: %+v", ul)
		}
		e.raw("PUT", ul.URL, "", strings.NewReader("uploaded")).want(t, 200, "")
		if b, _ := os.ReadFile(filepath.Join(home, "in/new.txt")); string(b) != "uploaded" {
			t.Fatalf("upload through the link: %q", b)
		}
		// Expired.
		e.clock.Advance(61 * time.Second)
		e.raw("PUT", ul.URL, "", strings.NewReader("late")).want(t, 403, "link_expired")
		// A key that expires takes its links with it.
		short := e.keyWith("short", func(k *store.APIKey) { exp := e.clock.Now().Add(time.Hour); k.ExpiresAt = &exp }, "file.read", "sandbox.read")
		var kl linkJSON
		e.do("POST", base+"/download-url", short, map[string]any{"path": "out/result.bin", "expires_in": 86400}).want(t, 200, "").json(t, &kl)
		e.raw("GET", kl.URL, "", nil).want(t, 200, "")
		e.clock.Advance(2 * time.Hour)
		e.raw("GET", kl.URL, "", nil).want(t, 403, "link_revoked")
	})
}

// tarball builds a .tar.gz from entries.
func tarball(t testing.TB, entries ...tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, en := range entries {
		h := en.hdr
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if h.Typeflag == tar.TypeReg && h.Size == 0 {
			h.Size = int64(len(en.body))
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if len(en.body) > 0 {
			tw.Write([]byte(en.body))
		}
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

type tarEntry struct {
	hdr  tar.Header
	body string
}

func file(name, body string) tarEntry {
	return tarEntry{hdr: tar.Header{Name: name, Typeflag: tar.TypeReg}, body: body}
}

func dir(name string) tarEntry {
	return tarEntry{hdr: tar.Header{Name: name, Typeflag: tar.TypeDir, Mode: 0o755}}
}

func symlink(name, to string) tarEntry {
	return tarEntry{hdr: tar.Header{Name: name, Typeflag: tar.TypeSymlink, Linkname: to}}
}

func TestFilesArchive(t *testing.T) {
	testdep.Short(t, "archives of 10,000 files, both stores: minutes")
	forEachFilesStore(t, api.Options{}, func(t *testing.T, e *filesEnv) {
		id := e.running("box")
		home := e.home(id)
		const base = "/v1/sandboxes/box/files"
		// A good one: into a new folder, then merged into it.
		good := tarball(t, dir("src/"), file("src/main.c", "int main(){return 0;}\n"),
			tarEntry{hdr: tar.Header{Name: "build.sh", Typeflag: tar.TypeReg, Mode: 0o755}, body: "#!/bin/sh\necho built\n"},
			symlink("src/link.c", "main.c"), tarEntry{hdr: tar.Header{Name: "hard.c", Typeflag: tar.TypeLink, Linkname: "src/main.c"}})
		var res struct{ Files, Folders, Symlinks int }
		e.raw("PUT", base+"/archive?path=proj", e.admin, bytes.NewReader(good)).want(t, 200, "").json(t, &res)
		if res.Files != 3 || res.Folders != 1 || res.Symlinks != 1 {
			t.Fatalf("unpack: %+v", res)
		}
		if b, _ := os.ReadFile(filepath.Join(home, "proj/src/link.c")); string(b) != "int main(){return 0;}\n" {
			t.Fatalf("symlink: %q", b)
		}
		if fi, _ := os.Stat(filepath.Join(home, "proj/build.sh")); fi.Mode().Perm() != 0o755 {
			t.Fatalf("mode: %v", fi.Mode())
		}
		os.WriteFile(filepath.Join(home, "proj/mine.txt"), []byte("stays"), 0o644)
		e.raw("PUT", base+"/archive?path=proj", e.admin, bytes.NewReader(tarball(t, file("src/main.c", "v2")))).want(t, 200, "")
		if b, _ := os.ReadFile(filepath.Join(home, "proj/src/main.c")); string(b) != "v2" {
			t.Fatalf("overwrite: %q", b)
		}
		if b, _ := os.ReadFile(filepath.Join(home, "proj/mine.txt")); string(b) != "stays" {
			t.Fatal("a file the archive does not name went away")
		}
		if entries, _ := os.ReadDir(filepath.Join(home, "proj")); len(entries) != 4 {
			t.Fatalf("proj holds %d entries, want 4 (a staging folder left behind?)", len(entries))
		}

		// Hostile ones: refused, and nothing changes anywhere.
		os.Mkdir(filepath.Join(home, "outside"), 0o755)
		os.WriteFile(filepath.Join(home, "outside/secret"), []byte("s"), 0o600)
		os.Symlink("../outside", filepath.Join(home, "proj/escape")) // a symlink already in the target
		many := []tarEntry{}
		for i := range 10001 {
			many = append(many, file(fmt.Sprintf("many/%05d", i), "x"))
		}
		many = append(many, file("../up", "x"))
		sparse := tarball(t, tarEntry{hdr: tar.Header{Name: "sparse", Typeflag: tar.TypeReg, Size: 2 << 30}})
		for _, c := range []struct {
			name   string
			body   []byte
			status int
			code   string
		}{
			{"dotdot", tarball(t, file("ok", "x"), file("../outside/secret", "pwned")), 400, "invalid_archive"},
			{"dotdot inside", tarball(t, file("a/../../outside/secret", "pwned")), 400, "invalid_archive"},
			{"absolute", tarball(t, file(home+"/outside/secret", "pwned")), 400, "invalid_archive"},
			{"symlink then file", tarball(t, symlink("l", "src"), file("l/x", "pwned")), 400, "invalid_archive"},
			{"symlink out", tarball(t, symlink("l", "../outside")), 400, "invalid_archive"},
			{"symlink absolute", tarball(t, symlink("l", "/etc")), 400, "invalid_archive"},
			{"through an existing symlink", tarball(t, file("escape/secret", "pwned")), 409, "archive_conflict"},
			{"file over a folder", tarball(t, file("src", "x")), 409, "archive_conflict"},
			{"hardlink out", tarball(t, tarEntry{hdr: tar.Header{Name: "h", Typeflag: tar.TypeLink, Linkname: "../outside/secret"}}), 400, "invalid_archive"},
			{"hardlink to a file of the folder", tarball(t, tarEntry{hdr: tar.Header{Name: "h", Typeflag: tar.TypeLink, Linkname: "mine.txt"}}), 400, "invalid_archive"},
			{"device", tarball(t, tarEntry{hdr: tar.Header{Name: "dev", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3}}), 400, "invalid_archive"},
			{"fifo", tarball(t, tarEntry{hdr: tar.Header{Name: "fifo", Typeflag: tar.TypeFifo}}), 400, "invalid_archive"},
			{"10,000 tiny files, then ..", tarball(t, many...), 400, "invalid_archive"},
			{"2 GiB sparse header", sparse, 413, "archive_too_large"},
			{"truncated", good[:len(good)/2], 400, "invalid_archive"},
		} {
			t.Run(c.name, func(t *testing.T) {
				before := snapshotTree(t, home)
				e.raw("PUT", base+"/archive?path=proj", e.admin, bytes.NewReader(c.body)).want(t, c.status, c.code)
				if after := snapshotTree(t, home); after != before {
					t.Fatalf("a refused archive changed files:\n%s\nwas\n%s", after, before)
				}
			})
		}
		// Into a folder that did not exist: refused, and it is not made.
		e.raw("PUT", base+"/archive?path=fresh/deep", e.admin, bytes.NewReader(tarball(t, file("../x", "x")))).want(t, 400, "invalid_archive")
		if _, err := os.Lstat(filepath.Join(home, "fresh")); !os.IsNotExist(err) {
			t.Fatalf("a refused archive left its folder: %v", err)
		}
		// 10,000 tiny files are fine.
		e.raw("PUT", base+"/archive?path=tiny", e.admin, bytes.NewReader(tarball(t, many[:10000]...))).want(t, 200, "").json(t, &res)
		if entries, _ := os.ReadDir(filepath.Join(home, "tiny/many")); res.Files != 10000 || len(entries) != 10000 {
			t.Fatalf("10,000 files: %+v, %d on disk", res, len(entries))
		}
	})
}

// TestFilesAutoStart: a file call starts a stopped sandbox with
// auto_start, as exec does.
func TestFilesAutoStart(t *testing.T) {
	forEachFilesStore(t, api.Options{}, func(t *testing.T, e *filesEnv) {
		e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "lazy", "auto_start": true}).want(t, 202, "")
		e.waitState("lazy", "running")
		e.raw("PUT", "/v1/sandboxes/lazy/files/content?path=f", e.admin, strings.NewReader("kept")).want(t, 200, "")
		e.do("POST", "/v1/sandboxes/lazy/stop", e.admin, nil).want(t, 202, "")
		e.waitState("lazy", "stopped")
		if r := e.raw("GET", "/v1/sandboxes/lazy/files/content?path=f", e.admin, nil).want(t, 200, ""); string(r.body) != "kept" {
			t.Fatalf("after auto-start: %q", r.body)
		}
		var audit struct{ Events []struct{ Action string } }
		e.do("GET", "/v1/audit", e.admin, nil).json(t, &audit)
		if len(audit.Events) == 0 || audit.Events[0].Action != "sandbox.auto_start" {
			t.Fatalf("audit: %+v", audit)
		}
		e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "still"}).want(t, 202, "")
		e.waitState("still", "running")
		e.do("POST", "/v1/sandboxes/still/stop", e.admin, nil).want(t, 202, "")
		e.waitState("still", "stopped")
		e.raw("GET", "/v1/sandboxes/still/files?path=~", e.admin, nil).want(t, 409, "conflict")
	})
}
