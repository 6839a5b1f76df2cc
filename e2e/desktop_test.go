package e2e_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"froog.tech/froog/internal/testdep"
)

// froogd is froog-desktop by that name and as `froogd desktop`: one
// contract, the same exit statuses.
func TestDesktopCommand(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("Xvnc"); err != nil {
		testdep.Missing(t, "Xvnc is not installed (deploy/testdeps.sh installs tigervnc-standalone-server)")
	}
	home, bin := t.TempDir(), t.TempDir()
	link := filepath.Join(bin, "froog-desktop")
	if err := os.Symlink(froogd, link); err != nil {
		t.Fatal(err)
	}
	runAs := func(name string, args ...string) (map[string]any, int) {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir, cmd.Env = home, []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		var st map[string]any
		if out.Len() > 0 {
			if err := json.Unmarshal(out.Bytes(), &st); err != nil {
				t.Fatalf("%s %v printed %q: %v", filepath.Base(name), args, out.String(), err)
			}
		}
		return st, code
	}
	t.Cleanup(func() { runAs(froogd, "desktop", "stop") })

	st, code := runAs(link, "start")
	if code != 0 || st["running"] != true || st["kind"] != "desktop" || st["vnc_port"] == nil || st["display"] == nil {
		t.Fatalf("froog-desktop start: exit %d, %v", code, st)
	}
	if st2, code := runAs(froogd, "desktop", "status"); code != 0 || st2["vnc_port"] != st["vnc_port"] {
		t.Fatalf("froogd desktop status: exit %d, %v; want %v", code, st2, st)
	}
	if _, code := runAs(froogd, "desktop", "stop"); code != 0 {
		t.Fatalf("froogd desktop stop: exit %d", code)
	}
	if st, code := runAs(link, "status"); code != 3 || st["running"] != false {
		t.Fatalf("froog-desktop status after stop: exit %d, %v; want 3, not running", code, st)
	}
	if _, code := runAs(froogd, "desktop", "frobnicate"); code != 2 {
		t.Fatalf("froogd desktop frobnicate: exit %d, want 2", code)
	}
}
