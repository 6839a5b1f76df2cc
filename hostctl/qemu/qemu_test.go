package qemu_test

import (
	"context"
	"log/slog"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"froog.tech/froog/hostctl"
	"froog.tech/froog/hostctl/drivertest"
	"froog.tech/froog/hostctl/qemu"
	"froog.tech/froog/hostctl/qemu/qemutest"
	"froog.tech/froog/internal/testimage"
	"froog.tech/froog/internal/testkit"
)

var ctx = context.Background()

// tinyvm finds the test guest deploy/testdeps.sh built (building it when
// it is missing).
func tinyvm(t testing.TB) (kernel, initrd string) {
	t.Helper()
	for _, bin := range []string{"qemu-system-x86_64", "qemu-img", "busybox", "/usr/sbin/sshd"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s is not installed: deploy/testdeps.sh installs it", bin)
		}
	}
	out := testimage.Dir(t, "tinyvm")
	return filepath.Join(out, "vmlinux"), filepath.Join(out, "initramfs.gz")
}

// The driver suite under TCG (KVM where it works): a real guest through
// its whole life, a crash being a kill -9 of its QEMU process.
func TestDriverSuite(t *testing.T) {
	t.Parallel() // VMs of its own, on a folder of its own: beside the other VM tests
	kernel, initrd := tinyvm(t)
	signer := testkit.NewKey(t)
	drivertest.Run(t, drivertest.Driver{
		Signer: signer,
		// The driver's own limit for a boot that keeps progressing (5 × its
		// 3 minutes without progress), as the OS image's suite: a guest on
		// a loaded machine is slow, not broken, and a stalled boot fails
		// before it, in the driver, saying at which stage.
		Boot:        15 * time.Minute,
		AccountKeys: true,
		Alive:       qemutest.Alive,
		Files:       qemutest.Files,
		Open: func(t *testing.T, dir string, log *slog.Logger) hostctl.Driver {
			d := newDriver(t, dir, kernel, initrd, signer, log)
			t.Cleanup(func() { qemutest.StopAll(d, dir) })
			return d
		},
		Kill: qemutest.Kill,
	})
}

func newDriver(t testing.TB, dir, kernel, initrd string, signer ssh.Signer, log *slog.Logger) *qemu.Driver {
	d, err := qemu.New(qemu.Options{Dir: dir, Kernel: kernel, Initrd: initrd, ControlKey: signer, Logger: log,
		DiskSize: 256 << 20, Sizes: map[string]qemu.Size{"default": {CPUs: 1, MemoryMB: 256}}})
	if err != nil {
		t.Fatal(err)
	}
	return d
}
