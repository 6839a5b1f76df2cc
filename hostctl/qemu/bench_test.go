//go:build bench

package qemu_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"froog.tech/froog/hostctl/qemu"
	"froog.tech/froog/hostctl/qemu/qemutest"
	"froog.tech/froog/internal/testkit"
	"froog.tech/froog/store"
)

// BenchmarkSnapshot1GiB: a snapshot of a running guest whose 1 GiB disk
// is full of random data (a live backup job: the guest runs on), a
// restore of it into the stopped sandbox, and a fork from it, under the accelerator this machine gives (TCG here). Run with
// -benchtime=1x: each iteration copies about a GiB.
func BenchmarkSnapshot1GiB(b *testing.B) {
	kernel, initrd := tinyvm(b)
	signer := testkit.NewKey(b)
	dir := b.TempDir()
	d, err := qemu.New(qemu.Options{Dir: dir, Kernel: kernel, Initrd: initrd, ControlKey: signer,
		DiskSize: 1 << 30, Sizes: map[string]qemu.Size{"default": {CPUs: 1, MemoryMB: 256}}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { qemutest.StopAll(d, dir) })
	sb := &store.Sandbox{ID: "sbx_bench1g", Name: "bench", Size: "default"}
	ep, err := d.Start(ctx, sb, nil)
	if err != nil {
		b.Fatal(err)
	}
	// 15 MiB from /dev/urandom, written 60 times: a qcow2 copy costs the
	// same as for 900 MiB of it, which a TCG guest took a minute to make.
	fill := "dd if=/dev/urandom of=/tmp/r bs=1M count=15 2>/dev/null; for i in $(seq 0 59); do dd if=/tmp/r of=$HOME/fill bs=1M seek=$((i*15)) conv=notrunc 2>/dev/null; done; rm /tmp/r; sync; ls -l $HOME/fill; df -h $HOME | tail -1"
	t0 := time.Now()
	b.Logf("filling the disk: %s (%v)", guestSh(b, ep, signer, fill), time.Since(t0).Round(time.Second))
	var snap, restore, fork time.Duration
	var bytes int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := fmt.Sprintf("snap_bench%d", i)
		t0 := time.Now()
		n, err := d.Snapshot(ctx, sb, id)
		if err != nil {
			b.Fatal(err)
		}
		snap += time.Since(t0)
		bytes = n
		b.StopTimer()
		if err := d.Stop(ctx, sb); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		t0 = time.Now()
		if err := d.Restore(ctx, sb, id); err != nil {
			b.Fatal(err)
		}
		restore += time.Since(t0)
		dst := &store.Sandbox{ID: fmt.Sprintf("sbx_benchfork%d", i), Name: "fork", Size: "default"}
		t0 = time.Now()
		if err := d.ForkSnapshot(ctx, id, dst); err != nil {
			b.Fatal(err)
		}
		fork += time.Since(t0)
		b.StopTimer()
		d.Delete(ctx, dst)
		d.DeleteSnapshot(ctx, id)
		if _, err := d.Start(ctx, sb, nil); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	n := float64(b.N)
	b.ReportMetric(snap.Seconds()*1000/n, "ms/snapshot-running")
	b.ReportMetric(restore.Seconds()*1000/n, "ms/restore")
	b.ReportMetric(fork.Seconds()*1000/n, "ms/fork-from-snapshot")
	b.ReportMetric(float64(bytes)/(1<<20), "MiB/snapshot")
	b.ReportMetric(0, "ns/op")
	b.Logf("accelerator: %s", d.Accel())
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
