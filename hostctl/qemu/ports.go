package qemu

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strings"

	"froog.tech/froog/hostctl"
	"froog.tech/froog/store"
)

var _ hostctl.Firewall = (*Driver)(nil)

// OpenPorts makes ports the open ports of the sandbox's IPv6 address in
// the host's firewall (tapNet says what else passes). It rewrites the
// sandbox's own chain and map entry in one nftables transaction, and
// nothing of any other sandbox. Without tap networking and an IPv6 subnet
// a sandbox has no IPv6 address, and there is nothing to open: ports are
// accepted and nothing is done.
func (d *Driver) OpenPorts(ctx context.Context, sb *store.Sandbox, ports []store.Port) error {
	if d.tap == nil || !d.tap.subnet6.IsValid() {
		return nil
	}
	if err := d.tap.ready(); err != nil {
		return err
	}
	defer d.lock(sb.ID)()
	a, err := d.sandboxAddr(sb.ID)
	if err != nil {
		return fmt.Errorf("qemu: open ports of %s: %w", sb.ID, err)
	}
	if err := nft(d.tap.portsScript(sb.ID, d.tap.address6(a), ports)); err != nil {
		return fmt.Errorf("qemu: open ports of %s: %w", sb.ID, err)
	}
	return nil
}

// sandboxAddr is the sandbox's IPv4 address in the subnet, given at its
// first start.
func (d *Driver) sandboxAddr(id string) (netip.Addr, error) {
	b, err := os.ReadFile(d.file(id, "address"))
	if err != nil {
		return netip.Addr{}, err
	}
	return netip.ParseAddr(strings.TrimSpace(string(b)))
}

// portsChain is the nftables chain of the sandbox's open ports.
func portsChain(id string) string { return "ports_" + tapName(id) }

// portsScript makes the sandbox's chain hold exactly ports, and points the
// map in6 at it for the sandbox's address.
func (n *tapNet) portsScript(id string, addr netip.Addr, ports []store.Port) string {
	chain := portsChain(id)
	var tcp, udp []string
	for _, p := range ports {
		if p.Protocol == store.ProtoUDP {
			udp = append(udp, fmt.Sprint(p.Port))
		} else {
			tcp = append(tcp, fmt.Sprint(p.Port))
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "add chain inet froog %[1]s\nflush chain inet froog %[1]s\n", chain)
	if len(tcp) > 0 {
		fmt.Fprintf(&b, "add rule inet froog %s tcp dport { %s } accept\n", chain, strings.Join(tcp, ", "))
	}
	if len(udp) > 0 {
		fmt.Fprintf(&b, "add rule inet froog %s udp dport { %s } accept\n", chain, strings.Join(udp, ", "))
	}
	fmt.Fprintf(&b, "add element inet froog in6 { %s : jump %s }\n", addr, chain)
	return b.String()
}

// closePorts takes the sandbox's open ports out of the firewall (its VM
// stopped, or is deleted); one already gone is no error.
func (n *tapNet) closePorts(id string, addr netip.Addr) {
	if !n.subnet6.IsValid() || !addr.IsValid() {
		return
	}
	// Two scripts: the element may be gone (the rules were set up again)
	// while the chain is not.
	nft(fmt.Sprintf("delete element inet froog in6 { %s }\n", addr))
	nft(fmt.Sprintf("delete chain inet froog %s\n", portsChain(id)))
}
