package qemu_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"froog.tech/froog/hostctl/qemu"
	"froog.tech/froog/hostctl/qemu/qemutest"
	"froog.tech/froog/internal/testkit"
	"froog.tech/froog/store"
	"froog.tech/froog/tunnel"
)

// A host that advertises an address (hostctl --advertise-addr): the VM's
// forwarded SSH port listens there only, the sandbox reports it, and the
// control plane logs in there against the pinned host key.
func TestAdvertisedAddress(t *testing.T) {
	t.Parallel()
	kernel, initrd := tinyvm(t)
	signer := testkit.NewKey(t)
	dir := t.TempDir()
	d, err := qemu.New(qemu.Options{Dir: dir, Kernel: kernel, Initrd: initrd, ControlKey: signer, Addr: "127.0.0.2",
		DiskSize: 256 << 20, Sizes: map[string]qemu.Size{"default": {CPUs: 1, MemoryMB: 256}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { qemutest.StopAll(d, dir) })
	sb := &store.Sandbox{ID: "sbx_addr", Name: "addr", Size: "default"}
	if key, err := d.HostKey(ctx, sb); err != nil {
		t.Fatal(err)
	} else {
		sb.SSHHostKey = key
	}
	ep, err := d.Start(ctx, sb, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ep.Host != "127.0.0.2" || ep.HostKey != sb.SSHHostKey {
		t.Fatalf("endpoint %+v; want host 127.0.0.2 and the pinned key", ep)
	}
	pinned, _, _, _, err := ssh.ParseAuthorizedKey([]byte(ep.HostKey))
	if err != nil {
		t.Fatal(err)
	}
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, err := tunnel.DialSSH(dctx, net.JoinHostPort(ep.Host, fmt.Sprint(ep.Port)), "user", signer, pinned)
	if err != nil {
		t.Fatalf("log in at the advertised address: %v", err)
	}
	c.Close()
	if conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", ep.Port), 5*time.Second); err == nil {
		conn.Close()
		t.Fatalf("the VM's SSH port also listens on 127.0.0.1:%d; want the advertised address only", ep.Port)
	}
	for _, bad := range []string{"0.0.0.0", "::1", "vm1", "10.0.0.300"} {
		if _, err := qemu.New(qemu.Options{Dir: dir, Kernel: kernel, Initrd: initrd, ControlKey: signer, Addr: bad}); err == nil {
			t.Errorf("Addr %q accepted", bad)
		}
	}
}
