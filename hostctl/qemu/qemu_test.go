package qemu_test

import (
	"bytes"
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

type rig struct {
	t      *testing.T
	dir    string
	kernel string
	initrd string
	signer ssh.Signer
}

func newRig(t *testing.T) *rig {
	k, i := tinyvm(t)
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	signer, _ := ssh.NewSignerFromKey(priv)
	return &rig{t: t, dir: t.TempDir(), kernel: k, initrd: i, signer: signer}
}

func (r *rig) driver() *qemu.Driver {
	d, err := qemu.New(qemu.Options{Dir: r.dir, Kernel: r.kernel, Initrd: r.initrd, AuthorizedKeys: []ssh.PublicKey{r.signer.PublicKey()},
		DiskSize: 256 << 20, Sizes: map[string]qemu.Size{"default": {1, 256}}})
	if err != nil {
		r.t.Fatal(err)
	}
	return d
}

// sh runs a command in the guest over SSH, pinning the host key the
// driver reported.
func (r *rig) sh(ep hostctl.Endpoint, cmd string) string {
	r.t.Helper()
	key, _, _, _, err := ssh.ParseAuthorizedKey([]byte(ep.HostKey))
	if err != nil {
		r.t.Fatal(err)
	}
	c, err := ssh.Dial("tcp", ep.Host+":"+strconv.Itoa(ep.Port), &ssh.ClientConfig{User: "user", Auth: []ssh.AuthMethod{ssh.PublicKeys(r.signer)},
		HostKeyCallback: ssh.FixedHostKey(key), HostKeyAlgorithms: []string{key.Type()}, Timeout: 10 * time.Second})
	if err != nil {
		console, _ := exec.Command("sh", "-c", "tail -n 20 "+r.dir+"/sandboxes/*/console.log").Output()
		r.t.Fatalf("ssh to the guest: %v\n%s", err, console)
	}
	defer c.Close()
	s, err := c.NewSession()
	if err != nil {
		r.t.Fatal(err)
	}
	defer s.Close()
	out, err := s.CombinedOutput(cmd)
	if err != nil {
		r.t.Fatalf("%q: %v: %s", cmd, err, out)
	}
	return strings.TrimSpace(string(out))
}

// One sandbox through its life under TCG: boot, a file and a background
// process; pause and resume (the process still runs); stop and a cold
// boot (the file is still there, the process is not); a QEMU killed with
// -9 comes back from its disk; a new driver adopts a running VM.
func TestLifecycle(t *testing.T) {
	r := newRig(t)
	d := r.driver()
	sb := &store.Sandbox{ID: "sbx_test1", Name: "box", Size: "default"}
	t.Cleanup(func() { d.Delete(ctx, sb) })
	bctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	start := time.Now()
	ep, err := d.Start(bctx, sb)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cold boot to SSH: %v (%s)", time.Since(start), d.Accel())
	if got := r.sh(ep, "hostname"); got != "box" {
		t.Fatalf("hostname %q", got)
	}
	r.sh(ep, "echo kept > ~/file && sync")
	r.sh(ep, "setsid sh -c 'while true; do sleep 1; done' </dev/null >/dev/null 2>&1 & echo $! > ~/job.pid")
	job := r.sh(ep, "cat ~/job.pid")

	// Warm: pause and resume.
	if err := d.Pause(ctx, sb); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	ep2, err := d.Start(bctx, sb)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("warm resume to SSH: %v", time.Since(start))
	if ep2 != ep || r.sh(ep2, "kill -0 "+job+" && echo alive") != "alive" {
		t.Fatalf("after a warm start: endpoint %v (was %v), the job is gone", ep2, ep)
	}

	// Cold: stop and boot from the disk.
	if err := d.Stop(ctx, sb); err != nil {
		t.Fatal(err)
	}
	ep3, err := d.Start(bctx, sb)
	if err != nil {
		t.Fatal(err)
	}
	if ep3.HostKey != ep.HostKey || r.sh(ep3, "cat ~/file") != "kept" {
		t.Fatal("after a cold start: another host key, or the file is gone")
	}
	if out := r.sh(ep3, "kill -0 "+job+" 2>/dev/null && echo alive || echo gone"); out != "gone" {
		t.Fatalf("the job survived a cold boot: %s", out)
	}

	// A QEMU killed from outside: the next Start boots it from its disk.
	pid, _ := os.ReadFile(filepath.Join(r.dir, "sandboxes", sb.ID, "qemu.pid"))
	p, _ := strconv.Atoi(strings.TrimSpace(string(pid)))
	syscall.Kill(p, syscall.SIGKILL)
	time.Sleep(200 * time.Millisecond)
	ep4, err := d.Start(bctx, sb)
	if err != nil {
		t.Fatal(err)
	}
	if r.sh(ep4, "cat ~/file") != "kept" {
		t.Fatal("after kill -9: the file is gone")
	}

	// hostctl restarts: a new driver on the same folder adopts the VM.
	pidBefore, _ := os.ReadFile(filepath.Join(r.dir, "sandboxes", sb.ID, "qemu.pid"))
	d2 := r.driver()
	ep5, err := d2.Start(bctx, sb)
	if err != nil {
		t.Fatal(err)
	}
	pidAfter, _ := os.ReadFile(filepath.Join(r.dir, "sandboxes", sb.ID, "qemu.pid"))
	if ep5 != ep4 || !bytes.Equal(pidBefore, pidAfter) {
		t.Fatalf("the new driver started the VM again: %v/%s, was %v/%s", ep5, pidAfter, ep4, pidBefore)
	}
}
