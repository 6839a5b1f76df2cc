package qemu

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// tapNet is --net tap: every VM gets a tap device on one bridge, an
// address of its own in the subnet, and nftables rules that keep it away
// from other sandboxes (the bridge ports are isolated, and a bridge-level
// rule drops tap-to-tap frames too), from the host (nothing new may come
// in from the bridge), and from private ranges and loopback.
//
// With an IPv6 subnet (subnet6) every VM also gets an IPv6 address of its
// own there, at the same offset as its IPv4 one, with the bridge's as its
// gateway. Outbound, the IPv6 blocked ranges are dropped as the IPv4 ones
// are (blocked6). Inbound to a sandbox's IPv6 address, forwarded from
// anywhere, only SSH (22), ping and ICMPv6 errors, replies to its own
// connections, and its open ports pass; the rest is dropped. Each
// sandbox's open ports are a chain of their own (portsChain), which the
// map in6 jumps to by the destination address, so that one sandbox's
// change rewrites its own chain and nothing else (ports.go).
//
// What a guest sends is checked at its tap: only its own MAC and
// addresses, no router advertisements, no DHCP server (spoof.go).
type tapNet struct {
	bridge  string
	subnet  netip.Prefix
	host    netip.Addr   // the bridge's own address: the guests' gateway
	subnet6 netip.Prefix // zero: no IPv6
	host6   netip.Addr   // the bridge's own IPv6 address, the guests' IPv6 gateway
	// sandboxes is the driver's folder of sandbox folders, each with its
	// address file (New sets it).
	sandboxes string

	mu sync.Mutex // held while the bridge and rules are set up
	up bool       // they are, by this driver
}

// privateRanges are never reachable from a sandbox.
var privateRanges = []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "169.254.0.0/16", "127.0.0.0/8"}

// blocked6 are never reachable from a sandbox over IPv6, besides the
// sandboxes' own subnet: unique local, link-local (the bridge's neighbour
// discovery is the host's input, not forwarded) and multicast.
var blocked6 = []string{"fc00::/7", "fe80::/10", "ff00::/8", "::1/128"}

// newTapNet checks the subnets; it changes nothing on the host (ready
// does, at the first start). subnet6 may be zero: no IPv6.
func newTapNet(bridge string, subnet, subnet6 netip.Prefix) (*tapNet, error) {
	if !subnet.IsValid() || !subnet.Addr().Is4() || subnet.Bits() > 24 {
		return nil, fmt.Errorf("qemu: tap subnet %v: want an IPv4 prefix of /24 or wider", subnet)
	}
	n := &tapNet{bridge: bridge, subnet: subnet.Masked(), host: subnet.Masked().Addr().Next()}
	if subnet6.IsValid() {
		// Room for an IPv6 address at each IPv4 address's offset.
		if !subnet6.Addr().Is6() || subnet6.Addr().Is4In6() || 128-subnet6.Bits() < 32-subnet.Bits() {
			return nil, fmt.Errorf("qemu: tap IPv6 subnet %v: want an IPv6 prefix with at least as many addresses as the IPv4 subnet %v", subnet6, subnet)
		}
		n.subnet6 = subnet6.Masked()
		n.host6 = n.subnet6.Addr().Next()
	}
	return n, nil
}

// address6 is the IPv6 address of the sandbox whose IPv4 address is a:
// the same offset in subnet6. Invalid without IPv6.
func (n *tapNet) address6(a netip.Addr) netip.Addr {
	if !n.subnet6.IsValid() {
		return netip.Addr{}
	}
	v4, base := a.As4(), n.subnet.Addr().As4()
	off := binary.BigEndian.Uint32(v4[:]) - binary.BigEndian.Uint32(base[:])
	b := n.subnet6.Addr().As16()
	lo := binary.BigEndian.Uint32(b[12:]) + off // no carry: the prefix leaves these bits zero
	binary.BigEndian.PutUint32(b[12:], lo)
	return netip.AddrFrom16(b)
}

// ready sets the bridge and the rules up, once per driver: concurrent
// callers wait for the one setup, and one that failed is tried again by
// the next caller.
func (n *tapNet) ready() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.up {
		return nil
	}
	if err := n.setup(); err != nil {
		return fmt.Errorf("qemu: setting up tap networking on bridge %s: %w", n.bridge, err)
	}
	n.up = true
	return nil
}

func run(name string, args ...string) error {
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// setup makes the bridge (once) and puts the rules in place (again).
func (n *tapNet) setup() error {
	if _, err := os.Stat("/sys/class/net/" + n.bridge); errors.Is(err, os.ErrNotExist) {
		if err := run("ip", "link", "add", n.bridge, "type", "bridge"); err != nil {
			return err
		}
	}
	pfx := netip.PrefixFrom(n.host, n.subnet.Bits()).String()
	if out, _ := exec.Command("ip", "-4", "addr", "show", "dev", n.bridge).Output(); !strings.Contains(string(out), pfx) {
		if err := run("ip", "addr", "add", pfx, "dev", n.bridge); err != nil {
			return err
		}
	}
	if n.subnet6.IsValid() {
		pfx6 := netip.PrefixFrom(n.host6, n.subnet6.Bits()).String()
		if out, _ := exec.Command("ip", "-6", "addr", "show", "dev", n.bridge).Output(); !strings.Contains(string(out), pfx6) {
			if err := run("ip", "-6", "addr", "add", pfx6, "dev", n.bridge, "nodad"); err != nil {
				return err
			}
		}
	}
	if err := run("ip", "link", "set", n.bridge, "up"); err != nil {
		return err
	}
	// IPv6: the guests' neighbour discovery with the host (their gateway)
	// comes in; nothing else new does. Inbound to their addresses, see
	// tapNet.
	var in6, fwd6, chains6 string
	if n.subnet6.IsValid() {
		in6 = fmt.Sprintf(`iifname "%s" icmpv6 type { nd-neighbor-solicit, nd-neighbor-advert } accept`, n.bridge)
		fwd6 = fmt.Sprintf(`iifname "%[1]s" ip6 daddr { %[2]s } drop
		oifname "%[1]s" ip6 daddr %[3]s jump inbound6`, n.bridge, strings.Join(append(slices.Clone(blocked6), n.subnet6.String()), ", "), n.subnet6)
		chains6 = `map in6 {
		type ipv6_addr : verdict
	}
	chain inbound6 {
		ct state established,related accept
		icmpv6 type { echo-request, destination-unreachable, packet-too-big, time-exceeded, parameter-problem } accept
		tcp dport 22 accept
		ip6 daddr vmap @in6
		drop
	}`
	}
	rules := fmt.Sprintf(`table inet froog
delete table inet froog
table inet froog {
	chain input {
		type filter hook input priority 0; policy accept;
		iifname "%[1]s" ct state established,related accept
		%[3]s
		iifname "%[1]s" drop
	}
	chain forward {
		type filter hook forward priority 0; policy accept;
		iifname "%[1]s" ct state established,related accept
		iifname "%[1]s" ip daddr { %[2]s } drop
		%[4]s
		iifname "%[1]s" oifname "%[1]s" drop
	}
	%[5]s
}
table bridge froog
delete table bridge froog
table bridge froog {
	map taps {
		type ifname : verdict
	}
	chain prerouting {
		type filter hook prerouting priority -200; policy accept;
		iifname "fg*" iifname vmap @taps
		iifname "fg*" drop
	}
	chain forward {
		type filter hook forward priority 0; policy accept;
		iifname "fg*" oifname "fg*" drop
	}
}
`, n.bridge, strings.Join(privateRanges, ", "), in6, fwd6, chains6)
	return nft(rules + n.guards())
}

// nft runs one nftables script: all of it or nothing.
func nft(script string) error {
	cmd := exec.Command("nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// macAddress is the sandbox's own MAC (QEMU gives every VM the same one
// otherwise, and two VMs on one bridge would take each other's frames):
// QEMU's locally administered prefix, then three bytes of the id's hash.
func macAddress(id string) string {
	h := sha256.Sum256([]byte("mac " + id))
	return fmt.Sprintf("52:54:00:%02x:%02x:%02x", h[0], h[1], h[2])
}

// tapName is the sandbox's tap device (at most 15 characters).
func tapName(id string) string {
	h := sha256.Sum256([]byte(id))
	return "fg" + hex.EncodeToString(h[:6])
}

// address gives the sandbox its address in the subnet, once: the lowest
// one no other sandbox folder holds.
func (n *tapNet) address(dir, id string) (netip.Addr, error) {
	mine := filepath.Join(dir, id, "address")
	if b, err := os.ReadFile(mine); err == nil {
		return netip.ParseAddr(strings.TrimSpace(string(b)))
	}
	taken := map[netip.Addr]bool{n.host: true}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if b, err := os.ReadFile(filepath.Join(dir, e.Name(), "address")); err == nil {
			if a, err := netip.ParseAddr(strings.TrimSpace(string(b))); err == nil {
				taken[a] = true
			}
		}
	}
	for a := n.host.Next(); n.subnet.Contains(a); a = a.Next() {
		if !taken[a] && n.subnet.Contains(a.Next()) { // not the broadcast address
			return a, os.WriteFile(mine, []byte(a.String()), 0o600)
		}
	}
	return netip.Addr{}, fmt.Errorf("qemu: no address left in %v", n.subnet)
}

// plug makes the sandbox's tap device, an isolated port of the bridge,
// guarded (spoof.go) before it exists.
func (n *tapNet) plug(id string) (string, error) {
	tap := tapName(id)
	if _, err := os.Stat("/sys/class/net/" + tap); err == nil {
		run("ip", "link", "del", tap)
	}
	if err := n.guard(id); err != nil {
		return "", err
	}
	if err := run("ip", "tuntap", "add", "dev", tap, "mode", "tap"); err != nil {
		return "", err
	}
	return tap, n.attach(tap)
}

// attach makes the device dev an isolated port of the bridge, and up.
func (n *tapNet) attach(dev string) error {
	for _, args := range [][]string{
		{"ip", "link", "set", dev, "master", n.bridge},
		{"bridge", "link", "set", "dev", dev, "isolated", "on"},
		{"ip", "link", "set", dev, "up"},
	} {
		if err := run(args[0], args[1:]...); err != nil {
			return err
		}
	}
	return nil
}

// unplug removes the sandbox's tap device and its guard.
func (n *tapNet) unplug(id string) {
	if _, err := os.Stat("/sys/class/net/" + tapName(id)); err == nil {
		run("ip", "link", "del", tapName(id))
	}
	n.unguard(id)
}
