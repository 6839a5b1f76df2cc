package qemu

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/digitalocean/go-qemu/qmp"
	"github.com/digitalocean/go-qemu/qmp/raw"

	"froog.tech/froog/internal/wait"
)

// TestQMPQEMU: go-qemu's typed commands the driver uses, through our
// monitor, against a real QEMU (no guest: started with -S, then run on
// an empty disk): its replies decode into go-qemu's types, the raw JSON
// commands work beside them, and Events streams QEMU's own events.
func TestQMPQEMU(t *testing.T) {
	t.Parallel()
	for _, bin := range []string{"qemu-system-x86_64", "qemu-img"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s is not installed: deploy/testdeps.sh installs it", bin)
		}
	}
	dir := t.TempDir()
	base, disk, sock := filepath.Join(dir, "base.qcow2"), filepath.Join(dir, "disk.qcow2"), filepath.Join(dir, "qmp.sock")
	for _, args := range [][]string{
		{"create", "-q", "-f", "qcow2", base, "64M"},
		{"create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", base, disk},
	} {
		if out, err := exec.Command("qemu-img", args...).CombinedOutput(); err != nil {
			t.Fatalf("qemu-img %v: %v: %s", args, err, out)
		}
	}
	cmd := exec.Command("qemu-system-x86_64", "-S", "-nodefaults", "-display", "none", "-machine", "q35,accel=tcg", "-m", "64",
		"-drive", "file="+disk+",if=virtio,format=qcow2,cache=writeback",
		"-qmp", "unix:"+sock+",server=on,wait=off")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var m *monitor
	wait.For(t, 30*time.Second, "the monitor", func() bool {
		var err error
		m, err = dialMonitor(sock, 2*time.Second)
		return err == nil
	})
	defer m.Disconnect()
	events, err := m.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}
	api := m.api(ctx)

	if st, err := m.status(ctx); err != nil || st != "prelaunch" {
		t.Fatalf("status before cont: %q, %v", st, err)
	}
	if kvm, err := api.QueryKVM(); err != nil || kvm.Enabled {
		t.Fatalf("query-kvm under TCG: %+v, %v", kvm, err)
	}
	blocks, err := api.QueryBlock()
	if err != nil {
		t.Fatalf("query-block into go-qemu's types: %v", err)
	}
	device := ""
	for _, b := range blocks {
		if b.Inserted != nil && b.Inserted.File == disk {
			device = b.Device
		}
	}
	if device == "" {
		t.Fatalf("query-block: no device has %s: %+v", disk, blocks)
	}
	if err := api.Cont(); err != nil {
		t.Fatal(err)
	}
	if st, err := api.QueryStatus(); err != nil || st.Status != raw.RunStateRunning || !st.Running {
		t.Fatalf("status after cont: %+v, %v", st, err)
	}
	wantEvent(t, events, "RESUME")

	// The raw path beside the typed one: a backup job, its events.
	backup := filepath.Join(dir, "backup.qcow2")
	if err := m.run(ctx, "drive-backup", map[string]any{"job-id": "b", "device": device, "target": backup, "sync": "top",
		"mode": "absolute-paths", "format": "qcow2", "auto-dismiss": false}, nil); err != nil {
		t.Fatal(err)
	}
	if err := m.jobDone(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(backup); err != nil {
		t.Fatalf("the backup: %v", err)
	}
	wantEvent(t, events, "JOB_STATUS_CHANGE")

	if err := api.Stop(); err != nil {
		t.Fatal(err)
	}
	if st, err := m.status(ctx); err != nil || st != "paused" {
		t.Fatalf("status after stop: %q, %v", st, err)
	}
	wantEvent(t, events, "STOP")
	memory := filepath.Join(dir, "memory")
	if err := api.Migrate("exec:cat > "+shellQuote(memory), nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := m.migrated(ctx); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(memory); err != nil || fi.Size() == 0 {
		t.Fatalf("the saved memory: %v", err)
	}
	if err := api.MigrateIncoming("exec:true"); err == nil {
		t.Fatal("migrate-incoming into a VM not started with -incoming")
	}

	if err := api.Quit(); err != nil {
		t.Fatalf("quit: %v", err)
	}
	wantEvent(t, events, "SHUTDOWN")
	select {
	case <-exited:
	case <-ctx.Done():
		t.Fatal("QEMU runs on after quit")
	}
	for range events { // closes with the connection
	}
}

// wantEvent reads events until one named name.
func wantEvent(t *testing.T, events <-chan qmp.Event, name string) {
	t.Helper()
	for ev := range events {
		if ev.Event == name {
			return
		}
	}
	t.Fatalf("no %s event before the stream closed", name)
}
