package qemu_test

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"froog.tech/froog/hostctl"
	"froog.tech/froog/hostctl/qemu"
	"froog.tech/froog/hostctl/qemu/qemutest"
	"froog.tech/froog/internal/testdep"
	"froog.tech/froog/internal/testkit"
	"froog.tech/froog/store"
)

// --net tap, in a network namespace this test makes: two VMs on the
// bridge, each reachable from the host over SSH; neither reaches the
// other, nor the host. Over IPv6 (ports_test.go), a client in a
// namespace of its own, routed through this one as the internet is,
// reaches a sandbox's open ports and not its closed ones.
func TestTapIsolation(t *testing.T) {
	t.Parallel() // its network, bridge and nftables rules are in a namespace of its own
	if os.Getenv("FROOG_IN_NETNS") != "" {
		tapIsolationInside(t)
		return
	}
	kernel, initrd := tinyvm(t) // built here: the namespace has no network
	ns := fmt.Sprintf("froogtest%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		testdep.Missing(t, "cannot make a network namespace here (root and iproute2 are needed): %v %s", err, out)
	}
	defer exec.Command("ip", "netns", "del", ns).Run()
	for _, bin := range []string{"nft", "bridge"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s is not installed: deploy/testdeps.sh installs it", bin)
		}
	}
	cmd := exec.Command("ip", "netns", "exec", ns, os.Args[0], "-test.run=^TestTapIsolation$", "-test.v")
	cmd.Env = append(os.Environ(), "FROOG_IN_NETNS=1", "FROOG_KERNEL="+kernel, "FROOG_INITRD="+initrd)
	out, err := cmd.CombinedOutput()
	t.Logf("inside the namespace:\n%s", out)
	if err != nil || !strings.Contains(string(out), "--- PASS: TestTapIsolation") {
		t.Fatalf("inside the namespace: %v", err)
	}
}

func tapIsolationInside(t *testing.T) {
	exec.Command("ip", "link", "set", "lo", "up").Run()
	signer := testkit.NewKey(t)
	dir := t.TempDir()
	d, err := qemu.New(qemu.Options{Dir: dir, Kernel: os.Getenv("FROOG_KERNEL"), Initrd: os.Getenv("FROOG_INITRD"), Net: "tap",
		Subnet6:    netip.MustParsePrefix(subnet6 + "/64"),
		ControlKey: signer, DiskSize: 256 << 20, Sizes: map[string]qemu.Size{"default": {CPUs: 1, MemoryMB: 256}}})
	if err != nil {
		t.Fatal(err)
	}
	defer qemutest.StopAll(d, dir)
	if _, err := os.Stat("/sys/class/net/froogbr0"); err == nil {
		t.Fatal("New made the bridge; the first Start should")
	}
	var eps []hostctl.Endpoint
	for _, name := range []string{"a", "b"} {
		ep, err := d.Start(ctx, &store.Sandbox{ID: "sbx_tap_" + name, Name: name, Size: "default"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		eps = append(eps, ep)
	}
	// Something listening on the host, on the bridge's address (the
	// first Start made it).
	ln, err := net.Listen("tcp", "10.213.0.1:8080")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	a, b := eps[0], eps[1]
	if a.Host == b.Host || a.Port != 22 || !strings.HasPrefix(a.Host, "10.213.") {
		t.Fatalf("endpoints %v and %v", a, b)
	}
	shA := func(cmd string) string { return guestSh(t, a, signer, cmd) }
	// Positive control first: the guest's network works (it answers SSH
	// from the host, and reaches its own address).
	if got := shA("nc -w 2 " + a.Host + " 22 </dev/null >/dev/null 2>&1 && echo open || echo closed"); got != "open" {
		t.Fatalf("the guest cannot reach itself: %s", got)
	}
	for what, target := range map[string]string{"the other sandbox": b.Host + " 22", "the host": "10.213.0.1 8080"} {
		if got := shA("nc -w 2 " + target + " </dev/null >/dev/null 2>&1 && echo open || echo closed"); got != "closed" {
			t.Errorf("a sandbox reaches %s (%s): %s", what, target, got)
		}
	}
	if got := guestSh(t, b, signer, "hostname"); got != "b" {
		t.Errorf("b over SSH from the host: %q", got)
	}
	openPortsInside(t, d, signer, eps)
}

func guestSh(t testing.TB, ep hostctl.Endpoint, signer ssh.Signer, cmd string) string {
	t.Helper()
	key, _, _, _, err := ssh.ParseAuthorizedKey([]byte(ep.HostKey))
	if err != nil {
		t.Fatal(err)
	}
	c, err := ssh.Dial("tcp", net.JoinHostPort(ep.Host, strconv.Itoa(ep.Port)), &ssh.ClientConfig{User: "user", Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: ssh.FixedHostKey(key), HostKeyAlgorithms: []string{key.Type()}, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	out, err := s.CombinedOutput(cmd)
	if err != nil {
		t.Fatalf("%q: %v: %s", cmd, err, out)
	}
	return strings.TrimSpace(string(out))
}
