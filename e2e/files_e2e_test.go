package e2e_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"froog.tech/froog/internal/wait"
)

// The files issue's end-to-end check against the real binary, on both
// stores: a client uploads a folder as a .tar.gz, runs a build with
// exec, and downloads the result through files/content and through a
// download-url with no key, getting the same bytes; an upload-url takes
// a file with no key; hostile archives are refused and change nothing.
func TestFilesEndToEnd(t *testing.T) {
	t.Parallel()
	t.Run("embedded", func(t *testing.T) {
		t.Parallel()
		data := t.TempDir()
		p, m := start(t, devReady, "dev", "--data", data, "--api-addr", "127.0.0.1:0", "--edge-addr", "127.0.0.1:0", "--edge-http-addr", "127.0.0.1:0")
		key, _ := os.ReadFile(filepath.Join(data, "api-key"))
		filesWalkthrough(t, client{t: t, base: m[1], key: strings.TrimSpace(string(key))}, p, "")
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		db, key, ctlKey, secret := selfHosted(t)
		start(t, regexp.MustCompile(`hostctl h1 running`), "hostctl", "--database-url", db, "--host-name", "h1",
			"--data", t.TempDir(), "--control-key-file", ctlKey)
		// Behind a proxy, the API says where clients reach it.
		p, m := start(t, regexp.MustCompile(`on (http://\S+)/v1`), "api", "--database-url", db, "--api-addr", "127.0.0.1:0",
			"--domain", "froogusercontent.test", "--secret-key-file", secret, "--control-key-file", ctlKey, "--api-url", "https://api.froog.test")
		filesWalkthrough(t, client{t: t, base: m[1], key: key}, p, "https://api.froog.test")
	})
}

func TestAPIURLFlag(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(froogd, "api", "--database-url", "postgres://x", "--domain", "froog.test", "--secret-key-file", "s",
		"--control-key-file", "c", "--api-url", "ftp://api.froog.test/v1").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--api-url") {
		t.Fatalf("a bad --api-url: %v: %s", err, out)
	}
}

// send is a request with a raw body; key "" sends no Authorization.
func (c client) send(method, url, key string, body []byte) (int, []byte) {
	c.t.Helper()
	if !strings.HasPrefix(url, "http") {
		url = c.base + url
	}
	req, _ := http.NewRequest(method, url, bytes.NewReader(body))
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

// packDir makes a .tar.gz of dir's contents, as froog push does.
func packDir(t *testing.T, dir string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		link, _ := os.Readlink(p) // "" for all but symlinks
		h, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		h.Name = filepath.ToSlash(rel)
		if fi.IsDir() {
			h.Name += "/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			tw.Write(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

type hostileEntry struct {
	hdr  tar.Header
	body string
}

func hostileTar(t *testing.T, entries ...hostileEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		h := e.hdr
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if h.Typeflag == tar.TypeReg && h.Size == 0 {
			h.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(e.body))
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

func regular(name, body string) hostileEntry {
	return hostileEntry{hdr: tar.Header{Name: name, Typeflag: tar.TypeReg}, body: body}
}

// filesWalkthrough runs the walkthrough; linkBase is where the API's
// links point ("" for where the client reaches it).
func filesWalkthrough(t *testing.T, c client, p *proc, linkBase string) {
	// reach is a link as this test reaches it.
	reach := func(u string) string {
		t.Helper()
		want := linkBase
		if want == "" {
			want = c.base
		}
		if !strings.HasPrefix(u, want+"/v1/files/") {
			t.Fatalf("link %q…, want it on %s", u[:min(len(u), 40)], want)
		}
		return c.base + strings.TrimPrefix(u, want)
	}
	c.call("POST", "/v1/sandboxes", `{"name": "builder"}`, 202, nil)
	var sb struct{ State string }
	if !wait.Until(30*time.Second, func() bool {
		c.call("GET", "/v1/sandboxes/builder", "", 200, &sb)
		return sb.State == "running"
	}) {
		t.Fatalf("builder never ran: %+v", sb)
	}
	exec1 := func(command string) string {
		t.Helper()
		var res struct {
			ExitCode int `json:"exit_code"`
			Stdout   string
			Stderr   string
		}
		body, _ := json.Marshal(map[string]string{"command": command})
		c.call("POST", "/v1/sandboxes/builder/exec", string(body), 200, &res)
		if res.ExitCode != 0 {
			t.Fatalf("exec %q: %+v", command, res)
		}
		return res.Stdout
	}

	// The client's folder, uploaded as one archive.
	src := t.TempDir()
	os.MkdirAll(filepath.Join(src, "src", "lib"), 0o755)
	os.WriteFile(filepath.Join(src, "src", "b.txt"), []byte("banana\ncherry\n"), 0o644)
	os.WriteFile(filepath.Join(src, "src", "lib", "a.txt"), []byte("apple\n"), 0o644)
	os.WriteFile(filepath.Join(src, "build.sh"), []byte("#!/bin/sh\nset -e\nmkdir -p out\ncat src/b.txt src/lib/a.txt | sort > out/sorted.txt\ngzip -9 -n -c out/sorted.txt > out/result.gz\n"), 0o755)
	os.Symlink("src/b.txt", filepath.Join(src, "b-link"))
	if code, b := c.send("PUT", "/v1/sandboxes/builder/files/archive?path=proj", c.key, packDir(t, src)); code != 200 {
		t.Fatalf("upload the folder: %d %s", code, b)
	}
	// A build with exec.
	exec1("cd ~/proj && ./build.sh")
	want := strings.Fields(exec1("sha256sum ~/proj/out/result.gz"))[0]
	if got := exec1("cat ~/proj/out/sorted.txt"); got != "apple\nbanana\ncherry\n" {
		t.Fatalf("the build's output: %q", got)
	}
	// The result through files/content.
	code, direct := c.send("GET", "/v1/sandboxes/builder/files/content?path=proj/out/result.gz", c.key, nil)
	if code != 200 {
		t.Fatalf("download: %d %s", code, direct)
	}
	// And through a download-url, with no key.
	var link struct{ URL, Method string }
	c.call("POST", "/v1/sandboxes/builder/files/download-url", `{"path": "proj/out/result.gz", "expires_in": 120}`, 200, &link)
	code, linked := c.send("GET", reach(link.URL), "", nil)
	if code != 200 || link.Method != "GET" {
		t.Fatalf("download through the link: %d %s", code, linked)
	}
	sum := sha256.Sum256(direct)
	if !bytes.Equal(direct, linked) || hex.EncodeToString(sum[:]) != want {
		t.Fatalf("the bytes differ: files/content %d bytes, link %d bytes, sha256 %x, in the sandbox %s", len(direct), len(linked), sum, want)
	}
	// An upload-url, with no key.
	c.call("POST", "/v1/sandboxes/builder/files/upload-url", `{"path": "inbox/from-ci.txt"}`, 200, &link)
	if code, b := c.send("PUT", reach(link.URL), "", []byte("from a CI step\n")); code != 200 {
		t.Fatalf("upload through the link: %d %s", code, b)
	}
	if got := exec1("cat ~/inbox/from-ci.txt"); got != "from a CI step\n" {
		t.Fatalf("uploaded: %q", got)
	}
	token := link.URL[strings.Index(link.URL, "token=")+len("token="):]
	if !strings.HasPrefix(token, "ft_") || strings.Contains(p.stderr.String(), token[:30]) {
		t.Fatalf("a link's token %q… is in froogd's log, or unmarked", token[:10])
	}

	// Hostile archives: refused, and nothing in the sandbox changes.
	exec1("mkdir -p ~/outside && echo secret > ~/outside/secret && ln -s ../outside ~/proj/escape")
	state := func() string {
		return exec1("cd ~ && find . -path ./.froog -prune -o -print | sort && find . -path ./.froog -prune -o -type f -print | sort | xargs md5sum")
	}
	before := state()
	many := []hostileEntry{}
	for i := range 10000 {
		many = append(many, regular(fmt.Sprintf("many/%05d", i), "x"))
	}
	for _, h := range []struct {
		name string
		body []byte
		want int
	}{
		{"../", hostileTar(t, regular("ok.txt", "x"), regular("../outside/secret", "pwned")), 400},
		{"absolute", hostileTar(t, regular("/tmp/pwned", "pwned")), 400},
		{"symlink then a file through it", hostileTar(t, hostileEntry{hdr: tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "src"}}, regular("l/pwned", "x")), 400},
		{"a file through a symlink already there", hostileTar(t, regular("escape/secret", "pwned")), 409},
		{"a hardlink out", hostileTar(t, hostileEntry{hdr: tar.Header{Name: "h", Typeflag: tar.TypeLink, Linkname: "../outside/secret"}}), 400},
		{"a device", hostileTar(t, hostileEntry{hdr: tar.Header{Name: "null", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3}}), 400},
		{"10,000 tiny files, then ../", hostileTar(t, append(many, regular("../x", "x"))...), 400},
		{"a 2 GiB sparse header", hostileTar(t, hostileEntry{hdr: tar.Header{Name: "sparse", Typeflag: tar.TypeReg, Size: 2 << 30}}), 413},
	} {
		if code, b := c.send("PUT", "/v1/sandboxes/builder/files/archive?path=proj", c.key, h.body); code != h.want {
			t.Errorf("%s: got %d, want %d: %s", h.name, code, h.want, b)
		}
	}
	if after := state(); after != before {
		t.Fatalf("hostile archives changed the sandbox:\n%s\nwas\n%s", after, before)
	}
	// 10,000 tiny files on their own are unpacked.
	if code, b := c.send("PUT", "/v1/sandboxes/builder/files/archive?path=tiny", c.key, hostileTar(t, many...)); code != 200 {
		t.Fatalf("10,000 tiny files: %d %s", code, b)
	}
	if got := strings.TrimSpace(exec1("ls ~/tiny/many | wc -l")); got != "10000" {
		t.Fatalf("10,000 tiny files: %s on disk", got)
	}
}

// The files routes on the qemu driver: the test guest's sshd runs its
// sftp-server as the sandbox user.
func TestQEMUFiles(t *testing.T) {
	t.Parallel() // in the VM phase, beside the other VM tests only
	tiny := tinyGuest(t)
	data := t.TempDir()
	t.Cleanup(func() { exec.Command("pkill", "-9", "-f", filepath.Join(data, "vms")).Run() })
	_, m := start(t, devReady, "dev", "--data", data, "--api-addr", "127.0.0.1:0", "--domain", "froog.test",
		"--edge-addr", "127.0.0.1:0", "--edge-http-addr", "127.0.0.1:0", "--driver", "qemu",
		"--kernel", filepath.Join(tiny, "vmlinux"), "--initrd", filepath.Join(tiny, "initramfs.gz"),
		"--vm-cpus", "1", "--vm-memory-mb", "256", "--vm-disk-gb", "1")
	key, _ := os.ReadFile(filepath.Join(data, "api-key"))
	c := client{t: t, base: m[1], key: strings.TrimSpace(string(key))}
	c.call("POST", "/v1/sandboxes", `{"name": "vm-files"}`, 202, nil)
	runs(t, c, "vm-files")
	content := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	var f struct{ Path, Mode string }
	code, b := c.send("PUT", "/v1/sandboxes/vm-files/files/content?path=up/data.bin&mode=640", c.key, content)
	if code != 200 || json.Unmarshal(b, &f) != nil || f.Path != "/home/user/up/data.bin" || f.Mode != "640" {
		t.Fatalf("upload: %d %s", code, b)
	}
	var res struct {
		ExitCode int `json:"exit_code"`
		Stdout   string
	}
	c.call("POST", "/v1/sandboxes/vm-files/exec", `{"command": "stat -c '%u %a %s' ~/up/data.bin"}`, 200, &res)
	if strings.TrimSpace(res.Stdout) != fmt.Sprintf("1000 640 %d", len(content)) {
		t.Fatalf("in the guest: %q", res.Stdout)
	}
	if code, got := c.send("GET", "/v1/sandboxes/vm-files/files/content?path=/home/user/up/data.bin", c.key, nil); code != 200 || !bytes.Equal(got, content) {
		t.Fatalf("download: %d, %d bytes", code, len(got))
	}
	arch := hostileTar(t, regular("src/a.txt", "a\n"), hostileEntry{hdr: tar.Header{Name: "run.sh", Typeflag: tar.TypeReg, Mode: 0o755}, body: "#!/bin/sh\ncat src/a.txt\n"})
	if code, b := c.send("PUT", "/v1/sandboxes/vm-files/files/archive?path=proj", c.key, arch); code != 200 {
		t.Fatalf("archive: %d %s", code, b)
	}
	c.call("POST", "/v1/sandboxes/vm-files/exec", `{"command": "cd proj && ./run.sh && stat -c %u src/a.txt"}`, 200, &res)
	if res.ExitCode != 0 || res.Stdout != "a\n1000\n" {
		t.Fatalf("unpacked in the guest: %+v", res)
	}
	if code, b := c.send("PUT", "/v1/sandboxes/vm-files/files/archive?path=proj", c.key, hostileTar(t, regular("../../etc/x", "x"))); code != 400 {
		t.Fatalf("a hostile archive: %d %s", code, b)
	}
	var found struct{ Files []string }
	c.call("GET", "/v1/sandboxes/vm-files/files/search?pattern=*.txt", "", 200, &found)
	if len(found.Files) != 1 || found.Files[0] != "/home/user/proj/src/a.txt" {
		t.Fatalf("search: %+v", found)
	}
	c.call("DELETE", "/v1/sandboxes/vm-files", "", 202, nil)
}
