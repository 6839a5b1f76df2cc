package testkit

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"froog.tech/froog/internal/testdep"
)

// BareRepo is a bare git repository with one commit on branch main (a
// README holding "hello\n"), named name.git in a temporary folder, as a
// file:// URL. It needs git (skipped without it, failed under CI); the
// host's git configuration is left out.
func BareRepo(tb testing.TB, name string) string {
	tb.Helper()
	testdep.Need(tb, "git")
	dir := tb.TempDir()
	work := filepath.Join(dir, "work")
	git := func(args ...string) {
		tb.Helper()
		cmd := exec.Command("git", args...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
			"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
		if out, err := cmd.CombinedOutput(); err != nil {
			tb.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	git("init", "-q", "-b", "main", work)
	if err := os.WriteFile(filepath.Join(work, "README"), []byte("hello\n"), 0o644); err != nil {
		tb.Fatal(err)
	}
	git("-C", work, "add", "README")
	git("-C", work, "commit", "-q", "-m", "first")
	bare := filepath.Join(dir, name+".git")
	git("clone", "-q", "--bare", work, bare)
	return "file://" + bare
}
