package qemu

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
)

// A sandbox's tap is its VM's one port on the bridge, so what comes in on
// the tap is what the guest sent. Each tap has a chain of its own in
// table bridge froog, guardChain, that the map taps jumps to by the tap's
// name from the bridge's prerouting hook (before the bridge learns a
// source MAC or passes the frame to the host or another port). A frame
// from a tap passes only when it is one of:
//
//   - ARP (Ethernet, IPv4) whose sender is the guest's MAC and its own
//     IPv4 address;
//   - IPv4 from its own address;
//   - IPv6 from its own address or its link-local address, and from ::
//     only neighbour solicitations (duplicate address detection) and MLDv2
//     reports;
//
// and its source MAC is the guest's own (macAddress). Neighbour
// advertisements pass only for the guest's own addresses; router
// advertisements, redirects and router renumbering, and DHCP and DHCPv6
// servers' packets (UDP source port 67, 547) never do, whatever their
// source. Everything else is dropped: other ethertypes (VLAN tags, STP,
// LLDP), and a tap without a chain, so a tap is guarded before it exists
// (plug) and a frame never passes for want of a rule. The guests' addresses
// are static (the seed gives them; nothing uses DHCP), hence no 0.0.0.0.
//
// The link-local address is the one Linux makes from the MAC by default
// (modified EUI-64, linkLocal); a guest that makes another kind (stable
// privacy) has it dropped, and neighbour discovery from its global
// address still works.
//
// Each chain is rewritten whole in one nftables transaction with its map
// entry, and removed with its tap: one sandbox's change touches no other
// sandbox's chain. setup, which makes the table afresh (a new driver),
// writes in the same transaction the chains of the taps that exist, so
// running VMs it adopts keep their network.

// guardChain is the chain in table bridge froog of the frames from tap.
func guardChain(tap string) string { return "tap_" + tap }

// linkLocal is the IPv6 link-local address Linux gives an interface with
// mac by default: fe80::/64 and the MAC's modified EUI-64.
func linkLocal(mac string) netip.Addr {
	hw, err := net.ParseMAC(mac)
	if err != nil || len(hw) != 6 {
		return netip.Addr{}
	}
	b := [16]byte{0: 0xfe, 1: 0x80}
	copy(b[8:], []byte{hw[0] ^ 2, hw[1], hw[2], 0xff, 0xfe, hw[3], hw[4], hw[5]})
	return netip.AddrFrom16(b)
}

// guardScript is the nftables commands that make the chain of sandbox
// id's tap hold exactly its guard, for its IPv4 address addr (its IPv6
// ones follow from it), and point the map taps at it.
func (n *tapNet) guardScript(id string, addr netip.Addr) string {
	tap, mac := tapName(id), macAddress(id)
	chain := guardChain(tap)
	mine6 := []netip.Addr{linkLocal(mac)}
	if a6 := n.address6(addr); a6.IsValid() {
		mine6 = append(mine6, a6)
	}
	var src6, target []string
	for _, a := range mine6 {
		src6 = append(src6, a.String())
		// The advertisement's target address: the 16 bytes after the
		// ICMPv6 header's 8 (nft 1.0.6, Debian 12's, has no icmpv6 taddr).
		target = append(target, fmt.Sprintf("@th,64,128 != 0x%x", a.AsSlice()))
	}
	var b strings.Builder
	rule := func(format string, args ...any) {
		fmt.Fprintf(&b, "add rule bridge froog %s %s\n", chain, fmt.Sprintf(format, args...))
	}
	fmt.Fprintf(&b, "add chain bridge froog %[1]s\nflush chain bridge froog %[1]s\n", chain)
	rule("ether saddr != %s drop", mac)
	// By the frame's own header: a VLAN tag the kernel took off is put
	// back for it (the ip and ip6 matches see the protocol inside).
	rule("ether type != { arp, ip, ip6 } drop")
	rule("udp sport { 67, 547 } drop") // DHCP and DHCPv6 servers
	rule("icmpv6 type { nd-router-advert, nd-redirect, router-renumbering } drop")
	rule("arp htype 1 arp ptype ip arp hlen 6 arp plen 4 arp operation { request, reply } arp saddr ether %s arp saddr ip %s accept", mac, addr)
	rule("ip saddr %s accept", addr)
	rule("icmpv6 type nd-neighbor-advert %s drop", strings.Join(target, " "))
	rule("ip6 saddr { %s } accept", strings.Join(src6, ", "))
	rule("ip6 saddr :: icmpv6 type { nd-neighbor-solicit, mld2-listener-report } accept")
	rule("drop")
	fmt.Fprintf(&b, "add element bridge froog taps { \"%s\" : jump %s }\n", tap, chain)
	return b.String()
}

// addressOf is the sandbox's IPv4 address, given at its first start
// (address).
func (n *tapNet) addressOf(id string) (netip.Addr, error) {
	b, err := os.ReadFile(filepath.Join(n.sandboxes, id, "address"))
	if err != nil {
		return netip.Addr{}, err
	}
	return netip.ParseAddr(strings.TrimSpace(string(b)))
}

// guard puts the guard of sandbox id's tap in place (its address is
// given already: the seed has it).
func (n *tapNet) guard(id string) error {
	addr, err := n.addressOf(id)
	if err != nil {
		return fmt.Errorf("qemu: guarding the tap of %s: %w", id, err)
	}
	if err := nft(n.guardScript(id, addr)); err != nil {
		return fmt.Errorf("qemu: guarding the tap of %s: %w", id, err)
	}
	return nil
}

// unguard removes the guard of sandbox id's tap; one already gone is no
// error. Frames from a tap of that name are dropped from then on.
func (n *tapNet) unguard(id string) {
	tap := tapName(id)
	// Two scripts: the element may be gone (the rules were set up again)
	// while the chain is not.
	nft(fmt.Sprintf("delete element bridge froog taps { \"%s\" }\n", tap))
	nft(fmt.Sprintf("delete chain bridge froog %s\n", guardChain(tap)))
}

// guards is the guard scripts of the sandboxes whose taps exist (VMs
// running, maybe started by an earlier driver), for setup to write with
// the table.
func (n *tapNet) guards() string {
	if n.sandboxes == "" {
		return ""
	}
	entries, _ := os.ReadDir(n.sandboxes)
	var b strings.Builder
	for _, e := range entries {
		if _, err := os.Stat("/sys/class/net/" + tapName(e.Name())); err != nil {
			continue
		}
		if addr, err := n.addressOf(e.Name()); err == nil {
			b.WriteString(n.guardScript(e.Name(), addr))
		}
	}
	return b.String()
}
