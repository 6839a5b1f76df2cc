package qemu_test

import (
	"context"
	"log/slog"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"froog.tech/froog/hostctl/qemu"
	"froog.tech/froog/hostctl/qemu/qemutest"
	"froog.tech/froog/internal/syncbuf"
	"froog.tech/froog/internal/testkit"
	"froog.tech/froog/store"
)

// A guest whose kernel panics while booting gets one more boot, and the
// host's log says what the panic was. The test guest's init panics (sysrq's
// crash) on its disk's first boot when its command line says
// froog.panic_once.
func TestBootAgainAfterAKernelPanic(t *testing.T) {
	t.Parallel() // a VM of its own, on a folder of its own
	kernel, initrd := tinyvm(t)
	dir := t.TempDir()
	disk := filepath.Join(dir, "base.qcow2") // empty: the guest's init formats it
	if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", disk, "256M").CombinedOutput(); err != nil {
		t.Fatalf("qemu-img: %v: %s", err, out)
	}
	var log syncbuf.Buffer
	d, err := qemu.New(qemu.Options{Dir: dir, ControlKey: testkit.NewKey(t), DiskSize: 256 << 20,
		Sizes:  map[string]qemu.Size{"default": {CPUs: 1, MemoryMB: 256}},
		Images: map[string]qemu.Image{"panics-once": {Disk: disk, Kernel: kernel, Initrd: initrd, Cmdline: "console=ttyS0 panic=-1 froog.panic_once"}},
		Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { qemutest.StopAll(d, dir) })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	sb := &store.Sandbox{ID: "sbx_panicsonce", Name: "panics-once", Size: "default", OS: "panics-once"}
	if _, err := d.Start(ctx, sb, nil); err != nil {
		t.Fatalf("after a panic in its first boot: %v\nlog: %s", err, log.String())
	}
	if l := log.String(); !strings.Contains(l, "kernel panicked while booting; booting it again") || !strings.Contains(l, "Kernel panic - not syncing: sysrq triggered crash") {
		t.Fatalf("the log does not say the guest's kernel panicked, or not why:\n%s", l)
	}
}
