// Package ostest runs the driver suite on an OS image, apart from the
// test guest's suite in package qemu: its boots take minutes under TCG,
// and as a package of its own it runs beside the others.
package ostest

import (
	"log/slog"
	"testing"
	"time"

	"froog.tech/froog/hostctl"
	"froog.tech/froog/hostctl/drivertest"
	"froog.tech/froog/hostctl/qemu"
	"froog.tech/froog/hostctl/qemu/qemutest"
	"froog.tech/froog/internal/testimage"
	"froog.tech/froog/internal/testkit"
)

// The driver suite on an OS image: Debian 13 with systemd and froog-init,
// which reads the seed the test guest's init reads (host key, user, keys,
// network), under TCG. The image is the one deploy/testdeps.sh built
// (built here when it is missing).
func TestDriverSuiteOSImage(t *testing.T) {
	img, err := qemu.LoadImage(testimage.Dir(t, "debian-13"))
	if err != nil {
		t.Fatal(err)
	}
	signer := testkit.NewKey(t)
	// The driver's own limit for a boot that keeps progressing (5 × its 3
	// minutes without progress): a stalled boot fails before it, in the
	// driver, saying at which stage.
	const boot = 15 * time.Minute
	// Two vCPUs: QEMU runs each on a thread of its own (MTTCG), so a boot
	// under TCG takes both of the host's cores where one lay idle. A
	// Debian 13 boot took 47 s and 64 s of QEMU's CPU against 72 s and 71
	// with one: systemd's units start side by side.
	drivertest.Run(t, drivertest.Driver{
		Signer:      signer,
		Boot:        boot,
		OS:          "debian-13",
		AccountKeys: true,
		Alive:       qemutest.Alive,
		Files:       qemutest.Files,
		Open: func(t *testing.T, dir string, log *slog.Logger) hostctl.Driver {
			d, err := qemu.New(qemu.Options{Dir: dir, Images: map[string]qemu.Image{"debian-13": img}, ControlKey: signer, Logger: log,
				DiskSize: 4 << 30, Sizes: map[string]qemu.Size{"default": {CPUs: 2, MemoryMB: 768}}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { qemutest.StopAll(d, dir) })
			return d
		},
		Kill: qemutest.Kill,
	})
}
