package sandboxio

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// FuzzArchiveName: an accepted name is "" or clean, relative, and stays
// inside the folder.
func FuzzArchiveName(f *testing.F) {
	for _, s := range []string{"a", "./a/b/", "a/../b", "../x", "/etc/passwd", "a//b/./c", ".", "./", "..", "a/..", "x\x00y", "....//a", "a/.../b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		got, err := archiveName(name)
		if err != nil {
			return
		}
		if got == "" {
			return
		}
		if path.IsAbs(got) || got != path.Clean(got) || got == ".." || strings.HasPrefix(got, "../") {
			t.Fatalf("archiveName(%q) = %q", name, got)
		}
		if j := path.Join("/root/dir", got); !strings.HasPrefix(j, "/root/dir/") {
			t.Fatalf("archiveName(%q) = %q, which joins to %q", name, got, j)
		}
	})
}

// FuzzSymlinkTarget: an accepted symlink resolves inside the folder.
func FuzzSymlinkTarget(f *testing.F) {
	for _, s := range [][2]string{{"a", "b"}, {"a/b", "../c"}, {"a/b", "../../c"}, {"a", "/etc"}, {"a", ""}, {"a/b/c", "../.././d"}, {"a", "./../x"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, name, target string) {
		n, err := archiveName(name)
		if err != nil || n == "" {
			return
		}
		if checkSymlink(n, target) != nil {
			return
		}
		if j := path.Join("/root/dir", path.Dir(n), target); j != "/root/dir" && !strings.HasPrefix(j, "/root/dir/") {
			t.Fatalf("symlink %q -> %q resolves to %q", n, target, j)
		}
	})
}

// osFS is unpackFS over this machine's files, with nothing of its own
// to stop an escape: the fuzz test checks that unpack never tries one.
type osFS struct{}

func (osFS) Lstat(p string) (os.FileInfo, error) { return os.Lstat(p) }
func (osFS) Mkdir(p string) error                { return os.Mkdir(p, 0o755) }
func (osFS) Create(p string) (io.WriteCloser, error) {
	return os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
}
func (osFS) Symlink(target, link string) error      { return os.Symlink(target, link) }
func (osFS) Link(o, n string) error                 { return os.Link(o, n) }
func (osFS) Chmod(p string, m os.FileMode) error    { return os.Chmod(p, m) }
func (osFS) Chtimes(p string, a, m time.Time) error { return os.Chtimes(p, a, m) }
func (osFS) Rename(from, to string) error           { return os.Rename(from, to) }
func (osFS) Remove(p string) error                  { return os.Remove(p) }
func (osFS) RemoveAll(p string) error               { return os.RemoveAll(p) }

// treeState describes everything under dir.
func treeState(dir string) string {
	var b strings.Builder
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			fmt.Fprintf(&b, "%s: %v\n", p, err)
			return nil
		}
		fmt.Fprintf(&b, "%s %v %d", p, fi.Mode(), fi.Size())
		if fi.Mode().IsRegular() {
			c, _ := os.ReadFile(p)
			fmt.Fprintf(&b, " %q", c)
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

func fuzzTar(entries ...tar.Header) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range entries {
		body := ""
		if h.Typeflag == tar.TypeReg {
			body = "data:" + h.Name
			h.Size = int64(len(body))
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		tw.WriteHeader(&h)
		tw.Write([]byte(body))
	}
	tw.Close()
	return buf.Bytes()
}

// specTar builds a tar from lines "TYPE NAME [LINK]", TYPE one of f
// (file), d (folder), l (symlink), h (hardlink), c (device), p (fifo).
func specTar(spec string) []byte {
	var hs []tar.Header
	for _, line := range strings.Split(spec, "\n") {
		f := strings.SplitN(line, " ", 3)
		if len(f) < 2 {
			continue
		}
		h := tar.Header{Name: f[1]}
		if len(f) == 3 {
			h.Linkname = f[2]
		}
		switch f[0] {
		case "f":
			h.Typeflag = tar.TypeReg
		case "d":
			h.Typeflag, h.Mode = tar.TypeDir, 0o755
		case "l":
			h.Typeflag = tar.TypeSymlink
		case "h":
			h.Typeflag = tar.TypeLink
		case "c":
			h.Typeflag = tar.TypeChar
		case "p":
			h.Typeflag = tar.TypeFifo
		default:
			continue
		}
		hs = append(hs, h)
	}
	return fuzzTar(hs...)
}

// FuzzUnpack unpacks archives of arbitrary entries into a folder beside
// another: nothing outside the folder ever changes, a refused archive
// changes nothing at all, and no staging folder is left.
func FuzzUnpack(f *testing.F) {
	for _, seed := range []string{
		"f a\nf d/b",
		"d d/\nf d/x",
		"f ../outside/f",
		"f /abs",
		"l l ../outside\nf l/f",
		"l l d\nf l/f",
		"d d\nl d/l ../x",
		"l in ../outside",
		"f f\nh h f",
		"h h ../outside/f",
		"f f\nf f\nl f x\nf f",
		"f existing/new\nf escape/f",
		"f existing\nd escape",
		"c dev",
		"d a\nf a/b\nl a/c b\nh a/d a/b\nf a/c",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		root := t.TempDir()
		target, outside := filepath.Join(root, "target"), filepath.Join(root, "outside")
		os.MkdirAll(filepath.Join(target, "existing"), 0o755)
		os.WriteFile(filepath.Join(target, "existing", "f"), []byte("mine"), 0o644)
		os.MkdirAll(outside, 0o755)
		os.WriteFile(filepath.Join(outside, "f"), []byte("secret"), 0o600)
		os.Symlink("../outside", filepath.Join(target, "escape"))
		var gz bytes.Buffer
		w := gzip.NewWriter(&gz)
		w.Write(specTar(spec))
		w.Close()
		beforeOut, beforeIn := treeState(outside), treeState(target)
		_, err := unpack(context.Background(), osFS{}, target, &gz, 1<<20)
		if got := treeState(outside); got != beforeOut {
			t.Fatalf("outside changed:\n%s\nwas\n%s", got, beforeOut)
		}
		if err != nil {
			if got := treeState(target); got != beforeIn {
				t.Fatalf("a refused archive (%v) changed the folder:\n%s\nwas\n%s", err, got, beforeIn)
			}
		}
		list, _ := os.ReadDir(target)
		for _, e := range list {
			if strings.HasPrefix(e.Name(), ".froog-unpack-") {
				t.Fatalf("staging folder %s left behind (err %v)", e.Name(), err)
			}
		}
	})
}
