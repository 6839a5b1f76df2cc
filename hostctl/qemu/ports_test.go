package qemu_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"froog.tech/froog/hostctl"
	"froog.tech/froog/hostctl/qemu"
	"froog.tech/froog/internal/wait"
	"froog.tech/froog/store"
)

// The sandboxes' IPv6 subnet in TestTapIsolation, and the client's
// addresses: one public (documentation) range, and one in fc00::/7,
// which sandboxes may not reach.
const (
	subnet6      = "2001:db8:f00::"
	clientAddr   = "2001:db8:c::2"
	clientULA    = "fd00:c::2"
	clientRouter = "2001:db8:c::1"
)

// openPortsInside runs in TestTapIsolation's namespace, with its two
// guests booted: a client with IPv6 in a namespace of its own reaches
// SSH, ping and a's open ports, not its closed ones, and one sandbox's
// change leaves the other's rules as they were. Outbound, a sandbox
// reaches the client's public address, not its fc00::/7 one, nor the
// other sandbox.
func openPortsInside(t *testing.T, d *qemu.Driver, signer ssh.Signer, eps []hostctl.Endpoint) {
	a, b := eps[0], eps[1]
	if a.IPv6 != subnet6+"2" || b.IPv6 != subnet6+"3" {
		t.Fatalf("IPv6 addresses %q and %q, want %s2 and %s3 (the IPv4 ones' offsets)", a.IPv6, b.IPv6, subnet6, subnet6)
	}
	ns := fmt.Sprintf("froogcli%d", os.Getpid())
	sh := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	sh("ip", "netns", "add", ns)
	defer exec.Command("ip", "netns", "del", ns).Run()
	sh("ip", "link", "add", "cli0", "type", "veth", "peer", "name", "cli1", "netns", ns)
	sh("ip", "addr", "add", clientRouter+"/64", "dev", "cli0", "nodad")
	sh("ip", "addr", "add", "fd00:c::1/64", "dev", "cli0", "nodad")
	sh("ip", "link", "set", "cli0", "up")
	sh("ip", "-n", ns, "link", "set", "lo", "up")
	sh("ip", "-n", ns, "addr", "add", clientAddr+"/64", "dev", "cli1", "nodad")
	sh("ip", "-n", ns, "addr", "add", clientULA+"/64", "dev", "cli1", "nodad")
	sh("ip", "-n", ns, "link", "set", "cli1", "up")
	sh("ip", "-n", ns, "-6", "route", "add", "default", "via", clientRouter)
	if err := os.WriteFile("/proc/sys/net/ipv6/conf/all/forwarding", []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The client's own server, for the sandboxes' outbound connections.
	srv := exec.Command("ip", "netns", "exec", ns, "busybox", "nc", "-ll", "-p", "8080", "-e", "echo", "client")
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { srv.Process.Kill(); srv.Wait() }()

	// Servers on every address of both guests: 8000 and 8001 on a, 8000
	// on b.
	serve := func(ep hostctl.Endpoint, ports ...int) {
		for _, p := range ports {
			guestSh(t, ep, signer, fmt.Sprintf("setsid nc -ll -p %d -e echo open-%d </dev/null >/dev/null 2>&1 & echo", p, p))
		}
	}
	serve(a, 8000, 8001)
	serve(b, 8000)
	// dial is what the client reads from addr port: the server's line, or
	// "" when nothing answers (a dropped connection times out).
	dial := func(addr string, port int) string {
		out, _ := exec.Command("ip", "netns", "exec", ns, "timeout", "6", "busybox", "nc", "-w", "3", addr, fmt.Sprint(port)).Output()
		return strings.TrimSpace(string(out))
	}
	open := func(ep hostctl.Endpoint, id string, ports ...int) {
		t.Helper()
		var ps []store.Port
		for _, p := range ports {
			ps = append(ps, store.Port{Port: p, Protocol: store.ProtoTCP})
		}
		if err := d.OpenPorts(ctx, &store.Sandbox{ID: id}, ps); err != nil {
			t.Fatal(err)
		}
	}
	want := func(step, addr string, port int, reached bool) {
		t.Helper()
		got := dial(addr, port)
		if reached && got != fmt.Sprintf("open-%d", port) && !(port == 22 && strings.HasPrefix(got, "SSH-2.0")) {
			t.Errorf("%s: the client does not reach %s port %d: %q", step, addr, port, got)
		}
		if !reached && got != "" {
			t.Errorf("%s: the client reaches %s port %d, which is not open: %q", step, addr, port, got)
		}
	}
	open(b, "sbx_tap_b", 8000)
	want("nothing open on a", a.IPv6, 8000, false)
	want("nothing open on a", a.IPv6, 22, true)
	if out, err := exec.Command("ip", "netns", "exec", ns, "busybox", "ping", "-6", "-c", "1", "-W", "3", a.IPv6).CombinedOutput(); err != nil {
		t.Errorf("the client cannot ping %s: %v: %s", a.IPv6, err, out)
	}
	open(a, "sbx_tap_a", 8000)
	want("a opened 8000", a.IPv6, 8000, true)
	want("a opened 8000", a.IPv6, 8001, false)
	want("a opened 8000", b.IPv6, 8000, true)
	open(a, "sbx_tap_a", 8001)
	want("a opened 8001 in place of 8000", a.IPv6, 8001, true)
	want("a opened 8001 in place of 8000", a.IPv6, 8000, false)
	want("a opened 8001 in place of 8000", b.IPv6, 8000, true)
	open(a, "sbx_tap_a")
	want("a closed all", a.IPv6, 8001, false)
	want("a closed all", a.IPv6, 22, true)

	// UDP: the guest has no UDP server, so its count of datagrams to
	// ports nothing listens on says what came in. Three to 9001 (closed),
	// then three to 9000 once open: the count grows by three, not six.
	noPorts := func() int {
		n, err := strconv.Atoi(guestSh(t, a, signer, `awk '$1 == "Udp6NoPorts" { print $2 }' /proc/net/snmp6`))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	n0 := noPorts()
	sendUDP(t, ns, a.IPv6, 9001, 3)
	if err := d.OpenPorts(ctx, &store.Sandbox{ID: "sbx_tap_a"}, []store.Port{{Port: 9000, Protocol: store.ProtoUDP}}); err != nil {
		t.Fatal(err)
	}
	sendUDP(t, ns, a.IPv6, 9000, 3)
	var n int
	if !wait.Until(5*time.Second, func() bool { n = noPorts(); return n >= n0+3 }) {
		t.Errorf("UDP to an open port: %d datagrams came in, want 3", n-n0)
	}
	time.Sleep(500 * time.Millisecond) // any late one of the closed port's
	if n = noPorts(); n != n0+3 {
		t.Errorf("UDP: %d datagrams came in, want the open port's 3 (9001/udp is closed)", n-n0)
	}

	// Outbound over IPv6: the internet yes (a positive control), fc00::/7
	// and the other sandbox no.
	shA := func(cmd string) string { return guestSh(t, a, signer, cmd) }
	if got := shA("nc -w 3 " + clientAddr + " 8080 </dev/null 2>/dev/null; true"); got != "client" {
		t.Errorf("a sandbox does not reach the client's public address: %q", got)
	}
	for what, target := range map[string]string{"fc00::/7": clientULA + " 8080", "the other sandbox": b.IPv6 + " 8000"} {
		if got := shA("nc -w 3 " + target + " </dev/null 2>/dev/null; true"); got != "" {
			t.Errorf("a sandbox reaches %s (%s) over IPv6: %q", what, target, got)
		}
	}
}

// sendUDP sends n datagrams to addr's port from the client's namespace
// ns: the socket is made there (qemu.InNetns). It is not connected: the
// guest answers a datagram to a port nothing listens on with an ICMP port
// unreachable, which a connected socket's next write would return as
// "connection refused".
func sendUDP(t *testing.T, ns, addr string, port, n int) {
	t.Helper()
	var c net.PacketConn
	qemu.InNetns(t, ns, func() (err error) {
		c, err = net.ListenPacket("udp6", "[::]:0")
		return err
	})
	defer c.Close()
	to := &net.UDPAddr{IP: net.ParseIP(addr), Port: port}
	for range n {
		if _, err := c.WriteTo([]byte("x"), to); err != nil {
			t.Fatalf("send UDP to %s port %d from the client: %v", addr, port, err)
		}
	}
}
