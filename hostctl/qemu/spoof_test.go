package qemu

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"froog.tech/froog/internal/testdep"
	"froog.tech/froog/internal/wait"
)

// The guard of every tap (spoof.go), without a VM: in a network
// namespace of its own, the driver's bridge and rules (setup) and two
// "taps", veth pairs named as two sandboxes' taps and guarded and
// attached as plug does, whose other ends are in namespaces of their own
// with the guests' MACs and addresses. A client in a namespace of its
// own, routed through the host, stands for the internet. From guest a,
// frames made by hand: those from its own MAC and addresses reach the
// host (a packet socket on the bridge sees them) and, to the client, the
// client (a UDP listener); forged ones reach neither: another sandbox's
// or a public IPv4 or IPv6 source, another link-local one, another MAC,
// a VLAN tag, ARP claiming another's address or MAC, neighbour
// advertisements for another's addresses, router advertisements,
// redirects and DHCP and DHCPv6 servers' packets. Both guests' own
// sockets reach the client (ARP and neighbour discovery pass). Then the
// rules made afresh (a new driver) keep the taps' guards, one tap's
// guard rewritten leaves the other's as it was, and a tap without one
// passes nothing.
func TestTapSpoofing(t *testing.T) {
	t.Parallel() // its bridge, rules and namespaces are its own
	if os.Getenv("FROOG_SPOOF_NETNS") != "" {
		spoofInside(t)
		return
	}
	for _, bin := range []string{"nft", "bridge"} {
		testdep.Need(t, bin)
	}
	ns := fmt.Sprintf("froogspoof%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		testdep.Missing(t, "cannot make a network namespace here (root and iproute2 are needed): %v %s", err, out)
	}
	defer exec.Command("ip", "netns", "del", ns).Run()
	cmd := exec.Command("ip", "netns", "exec", ns, os.Args[0], "-test.run=^TestTapSpoofing$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "FROOG_SPOOF_NETNS=1")
	out, err := cmd.CombinedOutput()
	t.Logf("inside the namespace:\n%s", out)
	if err != nil || !strings.Contains(string(out), "--- PASS: TestTapSpoofing") {
		t.Fatalf("inside the namespace: %v", err)
	}
}

// spoofGuest is one end of a "tap": a sandbox's namespace.
type spoofGuest struct {
	id, ns, tap      string
	mac              net.HardwareAddr
	addr, addr6, ll  netip.Addr
	sendRaw          func(frame []byte) error
	udp4, udp6       net.Conn // the guest's own sockets, to the client
	kernel4, kernel6 []byte   // what they send
}

const (
	spoofClient4 = "198.51.100.2"
	spoofClient6 = "2001:db8:c::2"
	spoofPort    = 9000
)

func spoofInside(t *testing.T) {
	sh := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	sh("ip", "link", "set", "lo", "up")
	for f, v := range map[string]string{"ipv4/ip_forward": "1", "ipv6/conf/all/forwarding": "1",
		"ipv4/conf/all/rp_filter": "0", "ipv4/conf/default/rp_filter": "0"} {
		if err := os.WriteFile("/proc/sys/net/"+f, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	n, err := newTapNet("froogbr0", netip.MustParsePrefix("10.213.0.0/16"), netip.MustParsePrefix("2001:db8:f00::/64"))
	if err != nil {
		t.Fatal(err)
	}
	n.sandboxes = dir
	if err := n.ready(); err != nil {
		t.Fatal(err)
	}

	// The client, the internet's stand-in, behind the host.
	pid := os.Getpid()
	cli := fmt.Sprintf("froogspc%d", pid)
	sh("ip", "netns", "add", cli)
	defer exec.Command("ip", "netns", "del", cli).Run()
	sh("ip", "link", "add", "cli0", "type", "veth", "peer", "name", "cli1", "netns", cli)
	sh("ip", "addr", "add", "198.51.100.1/24", "dev", "cli0")
	sh("ip", "addr", "add", "2001:db8:c::1/64", "dev", "cli0", "nodad")
	sh("ip", "link", "set", "cli0", "up")
	sh("ip", "route", "add", "default", "via", spoofClient4)
	sh("ip", "-6", "route", "add", "default", "via", spoofClient6)
	sh("ip", "-n", cli, "link", "set", "lo", "up")
	sh("ip", "-n", cli, "addr", "add", spoofClient4+"/24", "dev", "cli1")
	sh("ip", "-n", cli, "addr", "add", spoofClient6+"/64", "dev", "cli1", "nodad")
	sh("ip", "-n", cli, "link", "set", "cli1", "up")
	client := listenClient(t, cli)

	// The guests: a and b, each a veth whose host end is named, guarded
	// and attached as plug does a tap.
	var gs []*spoofGuest
	for i, id := range []string{"sbx_spoof_a", "sbx_spoof_b"} {
		if err := os.MkdirAll(filepath.Join(dir, id), 0o700); err != nil {
			t.Fatal(err)
		}
		addr, err := n.address(dir, id)
		if err != nil {
			t.Fatal(err)
		}
		g := &spoofGuest{id: id, ns: fmt.Sprintf("froogsp%c%d", 'a'+i, pid), tap: tapName(id), addr: addr, addr6: n.address6(addr)}
		g.mac, _ = net.ParseMAC(macAddress(id))
		g.ll = linkLocal(macAddress(id))
		sh("ip", "netns", "add", g.ns)
		defer exec.Command("ip", "netns", "del", g.ns).Run()
		if err := n.guard(id); err != nil {
			t.Fatal(err)
		}
		sh("ip", "link", "add", g.tap, "type", "veth", "peer", "name", "eth0", "netns", g.ns)
		if err := n.attach(g.tap); err != nil {
			t.Fatal(err)
		}
		sh("ip", "-n", g.ns, "link", "set", "eth0", "address", g.mac.String())
		sh("ip", "netns", "exec", g.ns, "sh", "-c", "echo 0 >/proc/sys/net/ipv6/conf/eth0/accept_dad")
		sh("ip", "-n", g.ns, "addr", "add", netip.PrefixFrom(addr, 16).String(), "dev", "eth0")
		sh("ip", "-n", g.ns, "addr", "add", g.addr6.String()+"/64", "dev", "eth0", "nodad")
		sh("ip", "-n", g.ns, "link", "set", "eth0", "up")
		sh("ip", "-n", g.ns, "route", "add", "default", "via", n.host.String())
		sh("ip", "-n", g.ns, "-6", "route", "add", "default", "via", n.host6.String())
		if out, _ := exec.Command("ip", "-n", g.ns, "-6", "addr", "show", "dev", "eth0", "scope", "link").Output(); !strings.Contains(string(out), g.ll.String()+"/64") {
			t.Fatalf("the guard's link-local address %s is not the kernel's: %s", g.ll, out)
		}
		InNetns(t, g.ns, func() error {
			fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				return err
			}
			ifi, err := net.InterfaceByName("eth0")
			if err != nil {
				return err
			}
			g.sendRaw = func(f []byte) error {
				return unix.Sendto(fd, f, 0, &unix.SockaddrLinklayer{Ifindex: ifi.Index, Halen: 6})
			}
			if g.udp4, err = net.Dial("udp4", net.JoinHostPort(spoofClient4, strconv.Itoa(spoofPort))); err != nil {
				return err
			}
			g.udp6, err = net.Dial("udp6", net.JoinHostPort(spoofClient6, strconv.Itoa(spoofPort)))
			return err
		})
		g.kernel4, g.kernel6 = tag("kernel4 "+id), tag("kernel6 "+id)
		gs = append(gs, g)
	}
	a, b := gs[0], gs[1]
	br := sniff(t, "froogbr0")
	brMAC := ifMAC(t, "froogbr0")

	// Every probe is from a, to the host's MAC or a broadcast/multicast
	// one. pass: it must reach the host; client: it is UDP to the client,
	// which must see it when it passes and not otherwise.
	type probe struct {
		what         string
		frame, mark  []byte
		pass, client bool
	}
	var probes []probe
	add := func(what string, pass, client bool, frame func(mark []byte) []byte) {
		m := tag(what)
		f := frame(m)
		if !bytes.Contains(f, m) {
			m = f[14:] // ARP has no room for a mark: its message is one
		}
		probes = append(probes, probe{what, f, m, pass, client})
	}
	c4, c6 := netip.MustParseAddr(spoofClient4), netip.MustParseAddr(spoofClient6)
	allNodes := netip.MustParseAddr("ff02::1")
	bcast, allNodesMAC := net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, net.HardwareAddr{0x33, 0x33, 0, 0, 0, 1}
	toClient4 := func(src netip.Addr, mac net.HardwareAddr) func([]byte) []byte {
		return func(m []byte) []byte { return ether(brMAC, mac, 0x0800, udp4(src, c4, 40000, spoofPort, m)) }
	}
	toClient6 := func(src netip.Addr) func([]byte) []byte {
		return func(m []byte) []byte { return ether(brMAC, a.mac, 0x86dd, udp6(src, c6, 40000, spoofPort, m)) }
	}
	// na is a neighbour advertisement (override) for target, with its
	// link-layer address.
	na := func(src, dst netip.Addr, dstMAC net.HardwareAddr, target netip.Addr, lla net.HardwareAddr) func([]byte) []byte {
		return func(m []byte) []byte {
			body := slices.Concat([]byte{0x20, 0, 0, 0}, target.AsSlice(), []byte{2, 1}, lla, ndMark(m))
			return ether(dstMAC, a.mac, 0x86dd, icmp6(src, dst, 136, body))
		}
	}
	arpFrame := func(dst net.HardwareAddr, op uint16, sha net.HardwareAddr, spa, tpa netip.Addr) func([]byte) []byte {
		return func([]byte) []byte { return ether(dst, a.mac, 0x0806, arp(op, sha, spa, tpa)) }
	}
	public4, public6 := netip.MustParseAddr("203.0.113.7"), netip.MustParseAddr("2001:db8:99::7")
	forged := net.HardwareAddr{0x02, 0, 0, 0, 0, 0x99}

	add("IPv4 from the other sandbox's address", false, true, toClient4(b.addr, a.mac))
	add("IPv4 from a public address", false, true, toClient4(public4, a.mac))
	add("IPv6 from the other sandbox's address", false, true, toClient6(b.addr6))
	add("IPv6 from a public address", false, true, toClient6(public6))
	add("IPv6 from the other's link-local address", false, false, toClient6(b.ll))
	add("its address from the other's MAC", false, true, toClient4(a.addr, b.mac))
	add("its address from a forged MAC", false, true, toClient4(a.addr, forged))
	add("its address in a VLAN tag", false, true, func(m []byte) []byte {
		return ether(brMAC, a.mac, 0x8100, slices.Concat([]byte{0, 7, 0x08, 0}, udp4(a.addr, c4, 40000, spoofPort, m)))
	})
	add("ARP claiming the other's address", false, false, arpFrame(brMAC, 2, a.mac, b.addr, n.host))
	add("ARP claiming the gateway's address", false, false, arpFrame(bcast, 1, a.mac, n.host, n.host))
	add("ARP giving the other's MAC for its address", false, false, arpFrame(brMAC, 2, b.mac, a.addr, n.host))
	add("a neighbour advertisement for the other's address", false, false, na(a.addr6, allNodes, allNodesMAC, b.addr6, a.mac))
	add("a neighbour advertisement for the gateway's address", false, false, na(a.addr6, allNodes, allNodesMAC, n.host6, a.mac))
	add("a router advertisement", false, false, func(m []byte) []byte {
		body := slices.Concat([]byte{64, 0, 0x07, 0x08, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1}, a.mac, ndMark(m))
		return ether(allNodesMAC, a.mac, 0x86dd, icmp6(a.ll, allNodes, 134, body))
	})
	add("a redirect", false, false, func(m []byte) []byte {
		body := slices.Concat([]byte{0, 0, 0, 0}, a.ll.AsSlice(), c6.AsSlice(), ndMark(m))
		return ether(brMAC, a.mac, 0x86dd, icmp6(a.ll, n.host6, 137, body))
	})
	add("a DHCP server's offer", false, false, func(m []byte) []byte {
		return ether(bcast, a.mac, 0x0800, udp4(a.addr, netip.MustParseAddr("255.255.255.255"), 67, 68, m))
	})
	add("a DHCPv6 server's reply", false, false, func(m []byte) []byte {
		return ether(brMAC, a.mac, 0x86dd, udp6(a.ll, n.host6, 547, 546, m))
	})
	// Positive controls, sent after the rest.
	add("IPv4 from its own address", true, true, toClient4(a.addr, a.mac))
	add("IPv6 from its own address", true, true, toClient6(a.addr6))
	add("ARP from its own address", true, false, arpFrame(bcast, 1, a.mac, a.addr, netip.MustParseAddr("10.213.0.77")))
	add("a neighbour advertisement for its own address", true, false, na(a.addr6, n.host6, brMAC, a.addr6, a.mac))
	add("a neighbour solicitation from its link-local address", true, false, func(m []byte) []byte {
		body := slices.Concat([]byte{0, 0, 0, 0}, n.host6.AsSlice(), []byte{1, 1}, a.mac, ndMark(m))
		return ether(brMAC, a.mac, 0x86dd, icmp6(a.ll, n.host6, 135, body))
	})
	add("duplicate address detection for its own address", true, false, func(m []byte) []byte {
		a6 := a.addr6.As16() // to its solicited-node address
		solicited := netip.AddrFrom16([16]byte{0xff, 2, 11: 1, 12: 0xff, 13: a6[13], 14: a6[14], 15: a6[15]})
		body := slices.Concat([]byte{0, 0, 0, 0}, a.addr6.AsSlice(), ndMark(m))
		return ether(net.HardwareAddr{0x33, 0x33, 0xff, a6[13], a6[14], a6[15]}, a.mac, 0x86dd, icmp6(netip.IPv6Unspecified(), solicited, 135, body))
	})

	sendAll := func() {
		for _, p := range probes {
			for range 2 {
				if err := a.sendRaw(p.frame); err != nil {
					t.Fatalf("%s: %v", p.what, err)
				}
			}
		}
	}
	// arrived: the frames with mark the host saw, and the datagrams the
	// client did.
	arrived := func(mark []byte) (int, int) { return br.count(mark), client.count(mark) }
	kernelReach := func(step string, gs ...*spoofGuest) {
		t.Helper()
		ok := wait.Until(5*time.Second, func() bool {
			done := true
			for _, g := range gs {
				g.udp4.Write(g.kernel4)
				g.udp6.Write(g.kernel6)
				done = done && client.count(g.kernel4) > 0 && client.count(g.kernel6) > 0
			}
			return done
		})
		if !ok {
			for _, g := range gs {
				t.Errorf("%s: %s's own sockets reach the client: %d datagrams over IPv4, %d over IPv6; want some of each",
					step, g.id, client.count(g.kernel4), client.count(g.kernel6))
			}
		}
	}
	check := func(step string) {
		t.Helper()
		sendAll()
		wait.Until(5*time.Second, func() bool {
			for _, p := range probes {
				if h, c := arrived(p.mark); p.pass && (h == 0 || p.client && c == 0) {
					return false
				}
			}
			return true
		})
		time.Sleep(200 * time.Millisecond) // for any late forged one
		for _, p := range probes {
			h, c := arrived(p.mark)
			switch {
			case p.pass && (h == 0 || p.client && c == 0):
				t.Errorf("%s: %s: %d frames reached the host, %d datagrams the client; want some", step, p.what, h, c)
			case !p.pass && (h > 0 || c > 0):
				t.Errorf("%s: %s passed: %d frames reached the host, %d datagrams the client; want none", step, p.what, h, c)
			}
		}
		br.reset()
		client.reset()
	}
	kernelReach("at first", a, b)
	check("at first")

	// A new driver makes the rules afresh, the running taps' guards with
	// them.
	bChain := listChain(t, b.tap)
	if err := n.setup(); err != nil {
		t.Fatal(err)
	}
	kernelReach("the rules made again", a, b)
	check("the rules made again")
	// a's guard rewritten (a restart) leaves b's as it was; a's removed
	// (a stop), a passes nothing and b goes on.
	if err := n.guard(a.id); err != nil {
		t.Fatal(err)
	}
	if got := listChain(t, b.tap); got != bChain {
		t.Errorf("b's guard changed with a's:\nbefore\n%s\nafter\n%s", bChain, got)
	}
	n.unguard(a.id)
	if out, _ := exec.Command("nft", "list", "map", "bridge", "froog", "taps").CombinedOutput(); strings.Contains(string(out), a.tap) || !strings.Contains(string(out), b.tap) {
		t.Errorf("a unguarded, the map taps is:\n%s", out)
	}
	kernelReach("a unguarded", b)
	sendAll()
	a.udp4.Write(a.kernel4)
	time.Sleep(200 * time.Millisecond)
	for _, p := range probes {
		if h, c := arrived(p.mark); h > 0 || c > 0 {
			t.Errorf("a unguarded: %s passed: %d frames reached the host, %d datagrams the client", p.what, h, c)
		}
	}
	if c := client.count(a.kernel4); c > 0 {
		t.Errorf("a unguarded: its own socket reaches the client (%d datagrams)", c)
	}
}

// listChain is the rules of tap's guard.
func listChain(t *testing.T, tap string) string {
	out, err := exec.Command("nft", "list", "chain", "bridge", "froog", guardChain(tap)).CombinedOutput()
	if err != nil {
		t.Fatalf("nft list chain %s: %v: %s", guardChain(tap), err, out)
	}
	return string(out)
}

// InNetns runs fn on a thread in network namespace ns; the sockets it
// makes stay there. The thread is never given back: it ends with its
// goroutine. (Exported for the package's external tests.)
func InNetns(t testing.TB, ns string, fn func() error) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		fd, err := unix.Open("/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- err
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			errc <- err
			return
		}
		errc <- fn()
	}()
	if err := <-errc; err != nil {
		t.Fatalf("in namespace %s: %v", ns, err)
	}
}

// tally keeps what a listener got, to count by a mark in it.
type tally struct {
	mu  sync.Mutex
	got [][]byte
}

func (l *tally) add(b []byte) {
	l.mu.Lock()
	l.got = append(l.got, bytes.Clone(b))
	l.mu.Unlock()
}

func (l *tally) count(mark []byte) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := 0
	for _, b := range l.got {
		if bytes.Contains(b, mark) {
			c++
		}
	}
	return c
}

func (l *tally) reset() {
	l.mu.Lock()
	l.got = nil
	l.mu.Unlock()
}

// listenClient keeps the datagrams to the client's port, both families.
func listenClient(t *testing.T, ns string) *tally {
	l := &tally{}
	var conns []net.PacketConn
	InNetns(t, ns, func() error {
		for _, a := range []string{spoofClient4, spoofClient6} {
			c, err := net.ListenPacket("udp", net.JoinHostPort(a, strconv.Itoa(spoofPort)))
			if err != nil {
				return err
			}
			conns = append(conns, c)
		}
		return nil
	})
	for _, c := range conns {
		t.Cleanup(func() { c.Close() })
		go func() {
			buf := make([]byte, 2048)
			for {
				n, _, err := c.ReadFrom(buf)
				if err != nil {
					return
				}
				l.add(buf[:n])
			}
		}()
	}
	return l
}

// sniff keeps the frames that dev, here, receives: on the bridge, what
// it passes up to the host.
func sniff(t *testing.T, dev string) *tally {
	ifi, err := net.InterfaceByName(dev)
	if err != nil {
		t.Fatal(err)
	}
	all := int(htons(unix.ETH_P_ALL))
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, all)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index}); err != nil {
		t.Fatal(err)
	}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 100_000}); err != nil {
		t.Fatal(err)
	}
	l, done, stopped := &tally{}, make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(done); <-stopped; unix.Close(fd) })
	go func() {
		defer close(stopped)
		buf := make([]byte, 65536)
		for {
			select {
			case <-done:
				return
			default:
			}
			n, from, err := unix.Recvfrom(fd, buf, 0)
			if err != nil {
				continue // the timeout: look at done
			}
			if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
				continue
			}
			l.add(buf[:n])
		}
	}()
	return l
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func ifMAC(t *testing.T, dev string) net.HardwareAddr {
	ifi, err := net.InterfaceByName(dev)
	if err != nil {
		t.Fatal(err)
	}
	return ifi.HardwareAddr
}

// tag is a mark of 22 bytes that names a probe, for its payload.
func tag(what string) []byte {
	h := fnv.New64a()
	h.Write([]byte(what))
	return fmt.Appendf(nil, "froog %016x", h.Sum64())
}

// ndMark is mark as a neighbour discovery option of a type nothing
// knows (253, for experiments), which receivers skip.
func ndMark(mark []byte) []byte { return append([]byte{253, 3}, mark...) }

func ether(dst, src net.HardwareAddr, typ uint16, payload []byte) []byte {
	return slices.Concat(dst, src, []byte{byte(typ >> 8), byte(typ)}, payload)
}

// arp is an ARP message (Ethernet, IPv4) of op from sha and spa about tpa.
func arp(op uint16, sha net.HardwareAddr, spa, tpa netip.Addr) []byte {
	return slices.Concat([]byte{0, 1, 8, 0, 6, 4, byte(op >> 8), byte(op)}, sha, spa.AsSlice(), make([]byte, 6), tpa.AsSlice())
}

// checksum is the Internet checksum of b after sum.
func checksum(sum uint32, b []byte) uint16 {
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return ^uint16(sum)
}

func udp4(src, dst netip.Addr, sport, dport uint16, data []byte) []byte {
	u := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, sport), dport)
	u = append(binary.BigEndian.AppendUint16(u, uint16(8+len(data))), 0, 0) // no checksum
	u = append(u, data...)
	h := []byte{0x45, 0, 0, 0, 0, 0, 0, 0, 64, 17, 0, 0}
	binary.BigEndian.PutUint16(h[2:], uint16(20+len(u)))
	h = append(append(h, src.AsSlice()...), dst.AsSlice()...)
	binary.BigEndian.PutUint16(h[10:], checksum(0, h))
	return append(h, u...)
}

// ipv6 is an IPv6 packet of next (UDP or ICMPv6) whose checksum, at
// sumAt in payload, it fills in.
func ipv6(src, dst netip.Addr, next byte, hops byte, sumAt int, payload []byte) []byte {
	pseudo := append(append(src.AsSlice(), dst.AsSlice()...), 0, 0, 0, 0, 0, 0, 0, next)
	binary.BigEndian.PutUint16(pseudo[34:], uint16(len(payload)))
	s := checksum(0, append(pseudo, payload...))
	if s == 0 {
		s = 0xffff
	}
	binary.BigEndian.PutUint16(payload[sumAt:], s)
	h := []byte{0x60, 0, 0, 0, 0, 0, next, hops}
	binary.BigEndian.PutUint16(h[4:], uint16(len(payload)))
	return append(append(append(h, src.AsSlice()...), dst.AsSlice()...), payload...)
}

func udp6(src, dst netip.Addr, sport, dport uint16, data []byte) []byte {
	u := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, sport), dport)
	u = append(binary.BigEndian.AppendUint16(u, uint16(8+len(data))), 0, 0)
	return ipv6(src, dst, 17, 64, 6, append(u, data...))
}

// icmp6 is an ICMPv6 message of typ, code 0, with hop limit 255 (as
// neighbour discovery wants).
func icmp6(src, dst netip.Addr, typ byte, body []byte) []byte {
	return ipv6(src, dst, 58, 255, 2, append([]byte{typ, 0, 0, 0}, body...))
}
