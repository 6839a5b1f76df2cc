package qemu_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"froog.tech/froog/hostctl"
	"froog.tech/froog/hostctl/drivertest"
	"froog.tech/froog/hostctl/qemu"
	"froog.tech/froog/store"
)

var ctx = context.Background()

// tinyvm builds (or finds, cached) the test guest.
func tinyvm(t testing.TB) (kernel, initrd string) {
	t.Helper()
	for _, bin := range []string{"qemu-system-x86_64", "qemu-img", "busybox", "dropbear"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s is not installed: deploy/testdeps.sh installs it", bin)
		}
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(cache, "froog", "tinyvm")
	if b, err := exec.Command("sh", "../../deploy/tinyvm/build.sh", out).CombinedOutput(); err != nil {
		t.Fatalf("building the test guest: %v\n%s", err, b)
	}
	return filepath.Join(out, "vmlinuz"), filepath.Join(out, "initramfs.gz")
}

// The driver suite under TCG (KVM where it works): a real guest through
// its whole life, a crash being a kill -9 of its QEMU process.
func TestDriverSuite(t *testing.T) {
	kernel, initrd := tinyvm(t)
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	signer, _ := ssh.NewSignerFromKey(priv)
	drivertest.Run(t, drivertest.Driver{
		Signer: signer,
		Boot:   90 * time.Second,
		Open: func(t *testing.T, dir string) hostctl.Driver {
			d := newDriver(t, dir, kernel, initrd, signer)
			t.Cleanup(func() { stopAll(d, dir) })
			return d
		},
		Kill: func(t *testing.T, dir string, sb store.Sandbox) {
			pid, err := os.ReadFile(filepath.Join(dir, "sandboxes", sb.ID, "qemu.pid"))
			if err != nil {
				t.Fatal(err)
			}
			p, _ := strconv.Atoi(strings.TrimSpace(string(pid)))
			if err := syscall.Kill(p, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		},
	})
}

func newDriver(t testing.TB, dir, kernel, initrd string, signer ssh.Signer) *qemu.Driver {
	d, err := qemu.New(qemu.Options{Dir: dir, Kernel: kernel, Initrd: initrd, AuthorizedKeys: []ssh.PublicKey{signer.PublicKey()},
		DiskSize: 256 << 20, Sizes: map[string]qemu.Size{"default": {CPUs: 1, MemoryMB: 256}}})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// stopAll ends every VM left in dir: they outlive the driver by design.
func stopAll(d *qemu.Driver, dir string) {
	ids, _ := os.ReadDir(filepath.Join(dir, "sandboxes"))
	for _, id := range ids {
		d.Stop(ctx, &store.Sandbox{ID: id.Name()})
	}
}
