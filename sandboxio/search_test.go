package sandboxio

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pkg/sftp"
)

// filesOn is Files on an in-process SFTP server over a pipe, at dir.
func filesOn(t *testing.T, dir string) *Files {
	t.Helper()
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	srv, err := sftp.NewServer(struct {
		io.Reader
		io.WriteCloser
	}{sr, sw})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve()
	c, err := sftp.NewClientPipe(cr, cw)
	if err != nil {
		t.Fatal(err)
	}
	f := &Files{Client: c, home: dir, stop: func() { srv.Close() }}
	t.Cleanup(f.Close)
	return f
}

func TestWalkAndFind(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, content string) {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.txt", "one\nneedle here\nthree\n")
	write("sub/b.txt", "needle\n"+strings.Repeat("x", 2000)+"needle\n")
	write("sub/bin.dat", "needle\x00")
	f := filesOn(t, dir)
	ctx := context.Background()

	var seen []string
	if stopped := f.Walk(ctx, dir, func(p string, _ os.FileInfo) bool { seen = append(seen, strings.TrimPrefix(p, dir+"/")); return true }, nil); stopped {
		t.Fatal("the walk stopped early")
	}
	slices.Sort(seen)
	if want := []string{"a.txt", "sub", "sub/b.txt", "sub/bin.dat"}; !slices.Equal(seen, want) {
		t.Fatalf("walk: got %v, want %v", seen, want)
	}
	if stopped := f.Walk(ctx, dir, func(string, os.FileInfo) bool { return false }, nil); !stopped {
		t.Fatal("a walk told to stop did not say it stopped")
	}

	files := []string{filepath.Join(dir, "a.txt"), filepath.Join(dir, "sub/b.txt"), filepath.Join(dir, "sub/bin.dat")}
	got, more := f.Find(ctx, files, func(line []byte) bool { return strings.Contains(string(line), "needle") })
	if more || len(got) != 3 {
		t.Fatalf("find: got %+v (more %v), want 3 matches", got, more)
	}
	if got[0].File != files[0] || got[0].Line != 2 || got[0].Content != "needle here" {
		t.Errorf("first match %+v", got[0])
	}
	if got[2].Line != 2 || len([]rune(got[2].Content)) != MaxFindLine {
		t.Errorf("long line: line %d, %d characters, want line 2 cut at %d", got[2].Line, len([]rune(got[2].Content)), MaxFindLine)
	}
}
