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

// A guest that fails before its init has run gets another boot, and the
// host's log says what happened: its kernel panicked (sysrq's crash, on
// the disk's first boot when the test guest's command line says
// froog.panic_once), or it hung with QEMU idle (the test guest idles on
// a blank disk's first boot with froog.hang_once), with QEMU's side of
// its virtio queues.
func TestBootAgainAfterAFault(t *testing.T) {
	t.Parallel() // VMs of their own, on folders of their own
	kernel, initrd := tinyvm(t)
	tests := []struct {
		id, cmdline string
		bootTimeout time.Duration // the stall budget: a hang is seen after it
		wantLog     []string
	}{
		{"sbx_panicsonce", "froog.panic_once", 0,
			[]string{"kernel panicked while booting; booting it again", "Kernel panic - not syncing: sysrq triggered crash"}},
		{"sbx_hangsonce", "froog.hang_once", 30 * time.Second,
			[]string{"hung before its init ran; booting it again", "stalled at the initramfs", "virtio-blk device["}},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			t.Parallel() // the IDs differ: a driver ends any QEMU named for its sandbox
			dir := t.TempDir()
			disk := filepath.Join(dir, "base.qcow2") // empty: the guest's init formats it
			if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", disk, "256M").CombinedOutput(); err != nil {
				t.Fatalf("qemu-img: %v: %s", err, out)
			}
			var log syncbuf.Buffer
			d, err := qemu.New(qemu.Options{Dir: dir, ControlKey: testkit.NewKey(t), DiskSize: 256 << 20, BootTimeout: tt.bootTimeout,
				Sizes:  map[string]qemu.Size{"default": {CPUs: 1, MemoryMB: 256}},
				Images: map[string]qemu.Image{"fails-once": {Disk: disk, Kernel: kernel, Initrd: initrd, Cmdline: "console=ttyS0 panic=-1 " + tt.cmdline}},
				Logger: slog.New(slog.NewTextHandler(&log, nil))})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { qemutest.StopAll(d, dir) })
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			sb := &store.Sandbox{ID: tt.id, Name: "fails-once", Size: "default", OS: "fails-once"}
			if _, err := d.Start(ctx, sb, nil); err != nil {
				t.Fatalf("after a fault in its first boot: %v\nlog: %s", err, log.String())
			}
			for _, w := range tt.wantLog {
				if l := log.String(); !strings.Contains(l, w) {
					t.Fatalf("the log does not say %q:\n%s", w, l)
				}
			}
		})
	}
}
