package sandboxio

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFileOps: Delete, Move, MakeFolder and SetMode on an in-process
// SFTP server, with the errors the API maps.
func TestFileOps(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := filesOn(t, dir)
	at := func(name string) string { return filepath.Join(dir, name) }
	os.MkdirAll(at("full/sub"), 0o755)
	os.WriteFile(at("full/sub/f"), []byte("x"), 0o644)
	os.WriteFile(at("file"), []byte("x"), 0o644)
	os.Symlink("file", at("full/link"))

	if err := c.Delete(at("full"), false); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("delete of a full folder: %v, want ErrNotEmpty", err)
	}
	if err := c.Delete(at("missing"), false); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("delete of nothing: %v", err)
	}

	if _, err := c.MakeFolder(at("file"), nil); !errors.Is(err, ErrExists) {
		t.Fatalf("a folder over a file: %v, want ErrExists", err)
	}
	mode := os.FileMode(0o700)
	fi, err := c.MakeFolder(at("new/deep"), &mode)
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("make folder: %v %v", fi, err)
	}

	if err := c.Move(at("file"), at("full")); !errors.Is(err, ErrExists) {
		t.Fatalf("a file over a folder: %v, want ErrExists", err)
	}
	if err := c.Move(at("file"), at("to/here/file")); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(at("to/here/file")); err != nil || string(b) != "x" {
		t.Fatalf("moved file: %q %v", b, err)
	}

	n, err := c.SetMode(context.Background(), at("full"), 0o750, true)
	if err != nil || n != 3 { // full, sub, sub/f; not the link
		t.Fatalf("set mode: %d %v, want 3", n, err)
	}
	if fi, _ := os.Stat(at("full/sub/f")); fi.Mode().Perm() != 0o750 {
		t.Fatalf("mode under the folder: %v", fi.Mode())
	}

	if err := c.Delete(at("full"), true); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(at("full")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the folder stayed: %v", err)
	}
}

// TestList: a folder's entries up to the bound, a symlink's target, and
// a symlink to a folder listed as the folder.
func TestList(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := filesOn(t, dir)
	os.MkdirAll(filepath.Join(dir, "d"), 0o755)
	os.WriteFile(filepath.Join(dir, "d", "a"), nil, 0o644)
	os.Symlink("a", filepath.Join(dir, "d", "b"))
	os.Symlink("d", filepath.Join(dir, "ld"))
	l, err := c.List(context.Background(), filepath.Join(dir, "ld"), 1)
	if err != nil || !l.Folder || l.LinkTarget != "d" || len(l.Entries) != 1 || !l.Truncated {
		t.Fatalf("list of a link to a folder, bound 1: %+v %v", l, err)
	}
	l, err = c.List(context.Background(), filepath.Join(dir, "d"), 10)
	if err != nil || len(l.Entries) != 2 || l.Truncated {
		t.Fatalf("list: %+v %v", l, err)
	}
	for _, e := range l.Entries {
		if e.Info.Name() == "b" && e.LinkTarget != "a" {
			t.Fatalf("symlink entry: %+v", e)
		}
	}
	if l, err := c.List(context.Background(), filepath.Join(dir, "d", "a"), 10); err != nil || l.Folder {
		t.Fatalf("list of a file: %+v %v", l, err)
	}
}

// TestWrite: a new file with its folders, a replaced file keeps its
// mode, a symlink is written through, and past the bound the file is as
// it was.
func TestWrite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := filesOn(t, dir)
	ctx := context.Background()
	at := func(name string) string { return filepath.Join(dir, name) }
	fi, err := c.Write(ctx, at("a/b/f"), strings.NewReader("one"), 10, nil)
	if err != nil || fi.Size() != 3 {
		t.Fatalf("write: %v %v", fi, err)
	}
	os.Chmod(at("a/b/f"), 0o600)
	if _, err := c.Write(ctx, at("a/b/f"), strings.NewReader("two"), 10, nil); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(at("a/b/f")); fi.Mode().Perm() != 0o600 {
		t.Fatalf("a replaced file's mode: %v", fi.Mode())
	}
	if _, err := c.Write(ctx, at("a/b/f"), strings.NewReader("far too long"), 10, nil); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("past the bound: %v, want ErrTooLarge", err)
	}
	os.Symlink("b/f", at("a/l"))
	if _, err := c.Write(ctx, at("a/l"), strings.NewReader("three"), 10, nil); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(at("a/b/f")); string(b) != "three" {
		t.Fatalf("content: %q", b)
	}
	if fi, _ := os.Lstat(at("a/l")); fi.Mode()&os.ModeSymlink == 0 {
		t.Fatal("the symlink was replaced")
	}
	if _, err := c.Write(ctx, at("a"), strings.NewReader("x"), 10, nil); !errors.Is(err, ErrIsFolder) {
		t.Fatalf("over a folder: %v, want ErrIsFolder", err)
	}
	list, _ := os.ReadDir(at("a/b"))
	if len(list) != 1 {
		t.Fatalf("left beside the file: %v", list)
	}
}

// TestOpenRead: a file's bytes and size, through a symlink.
func TestOpenRead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := filesOn(t, dir)
	os.WriteFile(filepath.Join(dir, "f"), []byte("content"), 0o644)
	os.Symlink("f", filepath.Join(dir, "l"))
	f, fi, err := c.OpenRead(filepath.Join(dir, "l"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b strings.Builder
	if _, err := f.WriteTo(&b); err != nil || b.String() != "content" || fi.Size() != 7 || !fi.Mode().IsRegular() {
		t.Fatalf("read %q (%v), size %d mode %v", b.String(), err, fi.Size(), fi.Mode())
	}
	if _, _, err := c.OpenRead(filepath.Join(dir, "none")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a missing file: %v", err)
	}
}

// TestReplace: the count, the file written in place, and the bound.
func TestReplace(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := filesOn(t, dir)
	p := filepath.Join(dir, "f")
	os.WriteFile(p, []byte("a-b-a"), 0o640)
	if n, err := c.Replace(p, []byte("a"), []byte("xy"), 100); err != nil || n != 2 {
		t.Fatalf("replace: %d %v", n, err)
	}
	if b, _ := os.ReadFile(p); string(b) != "xy-b-xy" {
		t.Fatalf("content: %q", b)
	}
	if _, err := c.Replace(p, []byte("x"), []byte("z"), 3); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("past the bound: %v, want ErrTooLarge", err)
	}
	if _, err := c.Replace(dir, []byte("x"), []byte("z"), 100); !errors.Is(err, ErrNotFile) {
		t.Fatalf("a folder: %v, want ErrNotFile", err)
	}
}
