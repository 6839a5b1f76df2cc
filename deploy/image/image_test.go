package main

import (
	"archive/tar"
	"bytes"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/layout"

	"froog.tech/froog/internal/testdep"
)

// staticFroogd builds froogd as deploy/image.sh does: static, trimmed.
func staticFroogd(t *testing.T) string {
	t.Helper()
	testdep.Short(t, "builds froogd and the image (minutes)")
	bin := filepath.Join(t.TempDir(), "froogd")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -buildid= -X froog.tech/froog/internal/version.stamped=9.9.9-test", "-o", bin, "../../cmd/froogd")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build froogd: %v\n%s", err, out)
	}
	return bin
}

func testOptions(t *testing.T, bin string) options {
	if _, err := os.Stat("/etc/ssl/certs/ca-certificates.crt"); err != nil {
		t.Fatalf("Debian's CA bundle: %v (apt-get install ca-certificates)", err)
	}
	return options{Binary: bin, CAFile: "/etc/ssl/certs/ca-certificates.crt", CACopy: "/usr/share/doc/ca-certificates/copyright", Version: "9.9.9-test", Revision: "0123abc",
		Created: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Repository: "froog.tech/froogd"}
}

// fakeFroogd stands in for froogd where its content does not matter: a
// MiB that does not compress, written to a file of the test's.
func fakeFroogd(t *testing.T) string {
	t.Helper()
	b := make([]byte, 1<<20)
	rand.NewChaCha8([32]byte{'f', 'r', 'o', 'o', 'g'}).Read(b)
	bin := filepath.Join(t.TempDir(), "froogd")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// The same inputs give the same image, byte for byte; a different input
// gives another digest. The builder does not look into the binary, so a
// stand-in serves: gzipping three layers of the real one under -race
// would be most of the package's time.
func TestReproducible(t *testing.T) {
	t.Parallel()
	o := testOptions(t, fakeFroogd(t))
	dir := t.TempDir()
	var digests []string
	var tars [][]byte
	for i, version := range []string{"9.9.9-test", "9.9.9-test", "9.9.10-test"} {
		o.Version = version
		o.Out = filepath.Join(dir, string(rune('a'+i))+".tar")
		d, err := build(o)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(o.Out)
		digests, tars = append(digests, d.String()), append(tars, b)
	}
	if digests[0] != digests[1] || !bytes.Equal(tars[0], tars[1]) {
		t.Errorf("two builds of the same inputs differ: %s and %s (tars equal: %v)", digests[0], digests[1], bytes.Equal(tars[0], tars[1]))
	}
	if digests[2] == digests[0] {
		t.Errorf("another version gives the same digest %s", digests[0])
	}
	t.Logf("digest %s", digests[0])
}

// The image's layout: an OCI layout with one image, configured to run
// froogd as the non-root user; one layer holding exactly the files meant,
// with their owners and modes; and froogd runs from it, in a chroot of
// the layer as the image's user (static: no libc in the image).
func TestLayout(t *testing.T) {
	t.Parallel()
	bin := staticFroogd(t)
	o := testOptions(t, bin)
	o.Out = filepath.Join(t.TempDir(), "image.tar")
	digest, err := build(o)
	if err != nil {
		t.Fatal(err)
	}
	lay := t.TempDir()
	untar(t, o.Out, lay)
	for _, f := range []string{"oci-layout", "index.json"} {
		if _, err := os.Stat(filepath.Join(lay, f)); err != nil {
			t.Errorf("OCI layout: %v", err)
		}
	}
	idx, err := layout.ImageIndexFromPath(lay)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 || im.Manifests[0].Digest != digest || im.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != o.Version {
		t.Fatalf("index: %+v, want one image %s named %s", im.Manifests, digest, o.Version)
	}
	img, err := idx.Image(digest)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if c.User != "65532:65532" || strings.Join(c.Entrypoint, " ") != "/usr/bin/froogd" || strings.Join(c.Cmd, " ") != "edge" ||
		cf.OS != "linux" || cf.Architecture != "amd64" || !cf.Created.Time.Equal(o.Created) || c.Labels["org.opencontainers.image.version"] != o.Version {
		t.Errorf("config: %+v (%s/%s, created %v)", c, cf.OS, cf.Architecture, cf.Created)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %d %v, want 1", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	got := map[string]string{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got[h.Name] = h.FileInfo().Mode().String() + " " + itoa(h.Uid) + ":" + itoa(h.Gid)
		if !h.ModTime.Equal(o.Created) {
			t.Errorf("%s: time %v, want the commit's %v", h.Name, h.ModTime, o.Created)
		}
		p := filepath.Join(root, h.Name)
		if h.Typeflag == tar.TypeDir {
			os.MkdirAll(p, 0o755)
			os.Chmod(p, h.FileInfo().Mode())
			os.Chown(p, h.Uid, h.Gid)
			continue
		}
		b, _ := io.ReadAll(tr)
		os.WriteFile(p, b, h.FileInfo().Mode())
	}
	rc.Close()
	want := map[string]string{
		"etc/":                              "drwxr-xr-x 0:0",
		"etc/group":                         "-rw-r--r-- 0:0",
		"etc/nsswitch.conf":                 "-rw-r--r-- 0:0",
		"etc/passwd":                        "-rw-r--r-- 0:0",
		"etc/ssl/":                          "drwxr-xr-x 0:0",
		"etc/ssl/certs/":                    "drwxr-xr-x 0:0",
		"etc/ssl/certs/ca-certificates.crt": "-rw-r--r-- 0:0",
		"tmp/":                              "dtrwxrwxrwx 0:0",
		"usr/":                              "drwxr-xr-x 0:0",
		"usr/bin/":                          "drwxr-xr-x 0:0",
		"usr/bin/froogd":                    "-rwxr-xr-x 0:0",
		"usr/share/":                        "drwxr-xr-x 0:0",
		"usr/share/doc/":                    "drwxr-xr-x 0:0",
		"usr/share/doc/ca-certificates/":    "drwxr-xr-x 0:0",
		"usr/share/doc/ca-certificates/copyright": "-rw-r--r-- 0:0",
		"var/":           "drwxr-xr-x 0:0",
		"var/lib/":       "drwxr-xr-x 0:0",
		"var/lib/froog/": "drwx------ 65532:65532",
	}
	if len(got) != len(want) {
		t.Errorf("layer has %d entries, want %d: %v", len(got), len(want), got)
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: %q, want %q", name, got[name], w)
		}
	}
	if pw, _ := os.ReadFile(filepath.Join(root, "etc/passwd")); !strings.Contains(string(pw), "froog:x:65532:65532:") {
		t.Errorf("/etc/passwd: %q", pw)
	}
	if os.Getuid() != 0 {
		t.Log("not root: froogd is not run in a chroot of the layer")
		return
	}
	cmd := exec.Command("/usr/bin/froogd", "version")
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root, Credential: &syscall.Credential{Uid: 65532, Gid: 65532}}
	cmd.Dir = "/"
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "froogd 9.9.9-test ") {
		t.Errorf("froogd version in the image's root as its user: %q %v", out, err)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// untar unpacks the tar file at path into dir.
func untar(t *testing.T, path, dir string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, h.Name)
		if h.Typeflag == tar.TypeDir {
			os.MkdirAll(p, 0o755)
			continue
		}
		os.MkdirAll(filepath.Dir(p), 0o755)
		b, _ := io.ReadAll(tr)
		os.WriteFile(p, b, 0o644)
	}
}
