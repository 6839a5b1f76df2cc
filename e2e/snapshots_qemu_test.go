package e2e_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"froog.tech/froog/internal/wait"
)

// Snapshots end to end on the qemu driver (the test guest under TCG
// here): the same story as TestSnapshotsEndToEnd with a VM per sandbox —
// qcow2 copies of paused VMs, a restore that stops the VM first, forks
// that boot from a snapshot, hourly snapshots under a moved clock.
func TestQEMUSnapshotsThroughTheAPI(t *testing.T) {
	t.Parallel() // in the VM phase, beside the other VM tests only
	tiny := tinyGuest(t)
	data, clock := t.TempDir(), clockFile(t)
	t.Cleanup(func() { exec.Command("pkill", "-9", "-f", filepath.Join(data, "vms")).Run() })
	cmd := exec.Command(froogd, "dev", "--data", data, "--api-addr", "127.0.0.1:0", "--edge-addr", "127.0.0.1:0", "--edge-http-addr", "127.0.0.1:0", "--driver", "qemu",
		"--kernel", filepath.Join(tiny, "vmlinux"), "--initrd", filepath.Join(tiny, "initramfs.gz"),
		"--vm-cpus", "1", "--vm-memory-mb", "256", "--vm-disk-gb", "1")
	cmd.Env = append(os.Environ(), "FROOG_TEST_CLOCK_FILE="+clock)
	p, m := startCmd(t, devReady, cmd, cmd.Args[1:])
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("froogd dev's log:\n%s", tail(noRequests(p.stderr.String()), 8000))
		}
	})
	key, _ := os.ReadFile(filepath.Join(data, "api-key"))
	c := client{t: t, base: m[1], key: strings.TrimSpace(string(key))}
	snapshotWalkthrough(t, c, clock, 3*time.Minute)

	// Snapshots are files of their own, outside every sandbox's folder;
	// deleting the sandboxes leaves the saved one only.
	for _, name := range []string{"src", "from-latest"} {
		c.call("DELETE", "/v1/sandboxes/"+name, "", 202, nil)
	}
	wait.For(t, time.Minute, "only the saved snapshot's file left", func() bool {
		files, _ := filepath.Glob(filepath.Join(data, "vms", "snapshots", "*.qcow2"))
		return len(files) == 1
	})
	var saved []snapshotJSON
	c.call("GET", "/v1/saved-snapshots", "", 200, &saved)
	if len(saved) != 1 || saved[0].Name != "base" {
		t.Fatalf("saved snapshots after the deletes: %+v", saved)
	}
	if !regexp.MustCompile(`^snap_[0-9a-f]{16}$`).MatchString(saved[0].ID) {
		t.Fatalf("saved snapshot id %q", saved[0].ID)
	}
}
