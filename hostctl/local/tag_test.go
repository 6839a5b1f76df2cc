package local

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A process in the middle of an execve shows an empty environment for a
// moment. A supervisor that execs as its sandbox stops must still be the
// sandbox's: otherwise Stop leaves its group (children that dropped the
// tag) alive, the flake TestStopKillsDesktopGroups showed.
func TestTaggedWhileExecing(t *testing.T) {
	t.Parallel()
	script := filepath.Join(t.TempDir(), "loop.sh")
	if err := os.WriteFile(script, []byte("exec sh "+script+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", script)
	// A large environment, the tag last: it takes many reads for a reader
	// that reads in pieces, each a chance for an exec to cut it short.
	cmd.Env = append(os.Environ(), "FILLER="+strings.Repeat("x", 100<<10), tagVar+"=sb-execing")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	const reads = 500
	missed := 0
	for range reads {
		if !tagged(cmd.Process.Pid, "sb-execing") {
			missed++
		}
	}
	if missed > 0 {
		t.Errorf("tagged said no %d times of %d for a process that keeps exec'ing with the tag; want 0", missed, reads)
	}
	if tagged(cmd.Process.Pid, "sb-other") {
		t.Errorf("tagged said yes for another sandbox's id")
	}
}
