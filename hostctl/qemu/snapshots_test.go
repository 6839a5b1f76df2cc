package qemu_test

import (
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"froog.tech/froog/hostctl/qemu"
	"froog.tech/froog/internal/syncbuf"

	"froog.tech/froog/hostctl/qemu/qemutest"
	"froog.tech/froog/internal/testkit"
	"froog.tech/froog/store"
)

// TestSnapshots: a snapshot of a running guest that is writing all the
// while is a consistent qcow2 (qemu-img check) and holds what was synced
// before it; the guest runs on after; a restore is refused while the VM
// runs and, once it is stopped, brings the snapshot's files back; a fork
// from the snapshot boots with them, and so does a live fork of the
// running source; a deleted snapshot's file is gone.
func TestSnapshots(t *testing.T) {
	t.Parallel()
	kernel, initrd := tinyvm(t)
	signer := testkit.NewKey(t)
	dir := t.TempDir()
	var logs syncbuf.Buffer
	d, err := qemu.New(qemu.Options{Dir: dir, Kernel: kernel, Initrd: initrd, ControlKey: signer, Logger: slog.New(slog.NewJSONHandler(&logs, nil)),
		DiskSize: 256 << 20, Sizes: map[string]qemu.Size{"default": {CPUs: 1, MemoryMB: 256}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { qemutest.StopAll(d, dir) })
	sb := &store.Sandbox{ID: "sbx_snapsrc", Name: "src", Size: "default"}
	ep, err := d.Start(ctx, sb, nil)
	if err != nil {
		t.Fatal(err)
	}
	guestSh(t, ep, signer, "echo one > ~/f.txt && sync")
	// A writer that keeps the disk busy while the snapshot is taken.
	guestSh(t, ep, signer, "nohup sh -c 'i=0; while true; do i=$((i+1)); dd if=/dev/urandom of=$HOME/churn.$((i%8)) bs=64k count=16 2>/dev/null; done' >/dev/null 2>&1 &")

	n, err := d.Snapshot(ctx, sb, "snap_one")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "snapshots", "snap_one.qcow2")
	if n <= 0 {
		t.Fatalf("snapshot takes %d bytes", n)
	}
	if out, err := exec.Command("qemu-img", "check", file).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img check of a running guest's snapshot: %v: %s", err, out)
	}
	// Taken live, by a backup job: the guest was never paused.
	if strings.Contains(logs.String(), "live backup failed") {
		t.Fatalf("the live backup failed: %s", logs.String())
	}
	// The guest runs on after the copy.
	guestSh(t, ep, signer, "echo two > ~/f.txt && sync")

	if err := d.Restore(ctx, sb, "snap_one"); err == nil || !strings.Contains(err.Error(), "running") {
		t.Fatalf("restore under a running VM: got %v, want a refusal", err)
	}
	if got := guestSh(t, ep, signer, "cat ~/f.txt"); got != "two" {
		t.Fatalf("a refused restore changed the running guest's file: %q", got)
	}
	if err := d.Stop(ctx, sb); err != nil {
		t.Fatal(err)
	}
	if err := d.Restore(ctx, sb, "snap_one"); err != nil {
		t.Fatal(err)
	}
	ep, err = d.Start(ctx, sb, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := guestSh(t, ep, signer, "cat ~/f.txt"); got != "one" {
		t.Fatalf("after the restore: %q, want one", got)
	}

	fork := &store.Sandbox{ID: "sbx_snapfork", Name: "fork", Size: "default"}
	if err := d.ForkSnapshot(ctx, "snap_one", fork); err != nil {
		t.Fatal(err)
	}
	fep, err := d.Start(ctx, fork, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := guestSh(t, fep, signer, "cat ~/f.txt; hostname"); got != "one\nfork" {
		t.Fatalf("in the fork: %q", got)
	}
	if fep.HostKey == ep.HostKey {
		t.Fatal("the fork has its source's host key")
	}

	// A fork of the running source is copied live too.
	live := &store.Sandbox{ID: "sbx_snaplive", Name: "live", Size: "default"}
	if err := d.Fork(ctx, sb, live); err != nil {
		t.Fatal(err)
	}
	lep, err := d.Start(ctx, live, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := guestSh(t, lep, signer, "cat ~/f.txt"); got != "one" {
		t.Fatalf("in the live fork: %q", got)
	}
	if strings.Contains(logs.String(), "live backup") {
		t.Fatalf("a live backup failed: %s", logs.String())
	}

	if err := d.DeleteSnapshot(ctx, "snap_one"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("deleted snapshot's file: %v", err)
	}
	if err := d.DeleteSnapshot(ctx, "snap_one"); err != nil {
		t.Fatalf("deleting it again: %v", err)
	}
}
