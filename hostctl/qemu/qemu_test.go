package qemu_test

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"froog.tech/froog/hostctl"
	"froog.tech/froog/hostctl/drivertest"
	"froog.tech/froog/hostctl/qemu"
	"froog.tech/froog/hostctl/qemu/qemutest"
	"froog.tech/froog/internal/testimage"
	"froog.tech/froog/internal/testkit"
	"froog.tech/froog/store"
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

// BenchmarkVM: cold start to SSH-ready, warm resume to SSH-ready, stop,
// saving a paused VM's memory (and ending its process), restoring it to
// SSH-ready, and the resident memory of an idle VM's QEMU process (1 vCPU,
// 256 MB), under the accelerator this machine gives (TCG here). Every
// start includes writing the authorized keys over SSH.
func BenchmarkVM(b *testing.B) {
	kernel, initrd := tinyvm(b)
	signer := testkit.NewKey(b)
	dir := b.TempDir()
	d := newDriver(b, dir, kernel, initrd, signer, nil)
	b.Cleanup(func() { qemutest.StopAll(d, dir) })
	sb := &store.Sandbox{ID: "sbx_bench", Name: "bench", Size: "default"}
	var cold, warm, save, restore, stop time.Duration
	var rss int
	timed := func(total *time.Duration, fn func() error) {
		t0 := time.Now()
		if err := fn(); err != nil {
			b.Fatal(err)
		}
		*total += time.Since(t0)
	}
	start := func() error { _, err := d.Start(ctx, sb, nil); return err }
	// Where KVM was chosen, one start first, untimed: --accel auto tries
	// KVM on a driver's first boot, and may fall back to TCG.
	if d.Accel() == "kvm" {
		if err := start(); err != nil {
			b.Fatal(err)
		}
		if err := d.Stop(ctx, sb); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		timed(&cold, start)
		time.Sleep(time.Second) // idle
		pid, _ := os.ReadFile(filepath.Join(dir, "sandboxes", sb.ID, "qemu.pid"))
		status, _ := os.ReadFile("/proc/" + strings.TrimSpace(string(pid)) + "/status")
		if m := regexp.MustCompile(`VmRSS:\s+(\d+) kB`).FindSubmatch(status); m != nil {
			kb, _ := strconv.Atoi(string(m[1]))
			rss += kb
		}
		if err := d.Pause(ctx, sb); err != nil {
			b.Fatal(err)
		}
		timed(&warm, start)
		if err := d.Pause(ctx, sb); err != nil {
			b.Fatal(err)
		}
		timed(&save, func() error { return d.Save(ctx, sb) })
		timed(&restore, start)
		timed(&stop, func() error { return d.Stop(ctx, sb) })
	}
	n := float64(b.N)
	b.ReportMetric(cold.Seconds()*1000/n, "ms/cold-start")
	b.ReportMetric(warm.Seconds()*1000/n, "ms/warm-resume")
	b.ReportMetric(save.Seconds()*1000/n, "ms/save-memory")
	b.ReportMetric(restore.Seconds()*1000/n, "ms/restore-memory")
	b.ReportMetric(stop.Seconds()*1000/n, "ms/stop")
	b.ReportMetric(float64(rss)/1024/n, "MB-rss-idle")
	b.ReportMetric(0, "ns/op")
	b.Logf("accelerator: %s", d.Accel())
}
