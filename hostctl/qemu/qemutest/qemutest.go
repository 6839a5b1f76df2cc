// Package qemutest holds what the qemu driver's test packages share: a
// VM's liveness, a crash (kill -9 of its QEMU), and the end of every VM a
// test left (they outlive the driver by design). Only tests import it.
package qemutest

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"froog.tech/froog/hostctl/qemu"
	"froog.tech/froog/internal/testkit"
	"froog.tech/froog/store"
)

// Files is the folder of sb's VM: its disk, seed, saved memory and
// monitor socket.
func Files(dir string, sb store.Sandbox) string { return filepath.Join(dir, "sandboxes", sb.ID) }

// Alive reports whether sb's QEMU process runs: the one its pid file
// names, unless it has exited (a zombie that init has yet to reap is
// over, as the driver counts it), or any process whose command line
// names its folder (so that a VM whose folder was removed under it still
// counts).
func Alive(dir string, sb store.Sandbox) bool {
	folder := Files(dir, sb)
	pid, err := os.ReadFile(filepath.Join(folder, "qemu.pid"))
	if p, _ := strconv.Atoi(strings.TrimSpace(string(pid))); err == nil && !qemu.Exited(p) {
		return true
	}
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range cmdlines {
		if b, err := os.ReadFile(f); err == nil && strings.Contains(string(b), folder+"/") {
			return true
		}
	}
	return false
}

// Kill crashes sb: kill -9 of its QEMU process.
func Kill(t *testing.T, dir string, sb store.Sandbox) {
	pid, err := os.ReadFile(filepath.Join(dir, "sandboxes", sb.ID, "qemu.pid"))
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(strings.TrimSpace(string(pid)))
	if err := syscall.Kill(p, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
}

// StopAll ends every VM left in dir.
func StopAll(d *qemu.Driver, dir string) {
	ids, _ := os.ReadDir(filepath.Join(dir, "sandboxes"))
	for _, id := range ids {
		d.Stop(context.Background(), &store.Sandbox{ID: id.Name()})
	}
}

// Accel is the accelerator --accel auto settles on here: TCG where
// /dev/kvm does not open; where it does, a driver's first boot tries KVM
// (here a boot of the test guest, kernel and initrd) and falls back to
// TCG when its guest does not run. A test binary that starts many froogd
// processes asks once and hands them the answer (FROOG_ACCEL), rather
// than have each try: on a host whose KVM does not work, a try is 10 s
// of a busy core.
func Accel(t testing.TB, kernel, initrd string) string {
	t.Helper()
	dir := t.TempDir()
	d, err := qemu.New(qemu.Options{Dir: dir, Kernel: kernel, Initrd: initrd, ControlKey: testkit.NewKey(t),
		DiskSize: 64 << 20, Sizes: map[string]qemu.Size{"default": {CPUs: 1, MemoryMB: 256}}})
	if err != nil {
		t.Fatal(err)
	}
	if d.Accel() == "tcg" {
		return "tcg"
	}
	defer StopAll(d, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := d.Start(ctx, &store.Sandbox{ID: "sbx_accel", Name: "accel", Size: "default"}, nil); err != nil {
		t.Fatalf("the test guest's boot that tries KVM: %v", err)
	}
	return d.Accel()
}
