package qemu

import (
	"net/netip"
	"strings"
	"testing"

	"froog.tech/froog/store"
)

// Each sandbox's IPv6 address is its IPv4 address's offset in the IPv6
// subnet; a subnet too small for that, or not IPv6, is refused.
func TestTapSubnet6(t *testing.T) {
	t.Parallel()
	n, err := newTapNet("br", netip.MustParsePrefix("10.213.0.0/16"), netip.MustParsePrefix("2001:db8:f00::/64"))
	if err != nil {
		t.Fatal(err)
	}
	for v4, v6 := range map[string]string{"10.213.0.2": "2001:db8:f00::2", "10.213.1.0": "2001:db8:f00::100", "10.213.255.254": "2001:db8:f00::fffe"} {
		if got := n.address6(netip.MustParseAddr(v4)); got.String() != v6 {
			t.Errorf("address6(%s) = %s, want %s", v4, got, v6)
		}
	}
	if n.host6.String() != "2001:db8:f00::1" {
		t.Errorf("the bridge's IPv6 address %s, want 2001:db8:f00::1", n.host6)
	}
	none, err := newTapNet("br", netip.MustParsePrefix("10.213.0.0/16"), netip.Prefix{})
	if err != nil || none.address6(netip.MustParseAddr("10.213.0.2")).IsValid() {
		t.Fatalf("no IPv6 subnet: %v, %v", none.address6(netip.MustParseAddr("10.213.0.2")), err)
	}
	for _, bad := range []string{"2001:db8::/120", "10.0.0.0/8", "::ffff:10.0.0.0/104"} {
		if _, err := newTapNet("br", netip.MustParsePrefix("10.213.0.0/16"), netip.MustParsePrefix(bad)); err == nil {
			t.Errorf("IPv6 subnet %s accepted", bad)
		}
	}
}

// A sandbox's ports are its own chain, rewritten whole, and its map entry.
func TestPortsScript(t *testing.T) {
	t.Parallel()
	n, _ := newTapNet("br", netip.MustParsePrefix("10.213.0.0/16"), netip.MustParsePrefix("2001:db8:f00::/64"))
	got := n.portsScript("sbx_1", netip.MustParseAddr("2001:db8:f00::2"), []store.Port{{Port: 22, Protocol: "tcp"}, {Port: 80, Protocol: "tcp"}, {Port: 27015, Protocol: "udp"}})
	chain := portsChain("sbx_1")
	want := "add chain inet froog " + chain + "\nflush chain inet froog " + chain + "\n" +
		"add rule inet froog " + chain + " tcp dport { 22, 80 } accept\n" +
		"add rule inet froog " + chain + " udp dport { 27015 } accept\n" +
		"add element inet froog in6 { 2001:db8:f00::2 : jump " + chain + " }\n"
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if none := n.portsScript("sbx_1", netip.MustParseAddr("2001:db8:f00::2"), nil); strings.Contains(none, "dport") {
		t.Fatalf("no ports: %s", none)
	}
}

// The seed gives the guest its IPv6 address and route beside the IPv4
// ones, in the form deploy/tinyvm/init, froog-init and cloud-init read.
func TestSeedIPv6(t *testing.T) {
	t.Parallel()
	s := Seed{Address: "10.213.0.2/16", Gateway: "10.213.0.1", DNS: "10.213.0.1", Address6: "2001:db8:f00::2/64", Gateway6: "2001:db8:f00::1"}
	got := string(s.Files()["network-config"])
	for _, w := range []string{`addresses: [10.213.0.2/16, "2001:db8:f00::2/64"]`, "gateway4: 10.213.0.1\n", "gateway6: 2001:db8:f00::1\n"} {
		if !strings.Contains(got, w) {
			t.Errorf("network-config lacks %q:\n%s", w, got)
		}
	}
}

// A tap's guard is its own chain, rewritten whole, and its map entry;
// its link-local address is the MAC's EUI-64 (TestTapSpoofing checks it
// is the kernel's, and what the rules let through).
func TestGuardScript(t *testing.T) {
	t.Parallel()
	if got := linkLocal("52:54:00:12:34:56"); got.String() != "fe80::5054:ff:fe12:3456" {
		t.Errorf("linkLocal = %s, want fe80::5054:ff:fe12:3456", got)
	}
	for _, subnet6 := range []netip.Prefix{netip.MustParsePrefix("2001:db8:f00::/64"), {}} {
		n, _ := newTapNet("br", netip.MustParsePrefix("10.213.0.0/16"), subnet6)
		got := n.guardScript("sbx_1", netip.MustParseAddr("10.213.0.2"))
		tap, chain := tapName("sbx_1"), guardChain(tapName("sbx_1"))
		lines := strings.Split(strings.TrimSpace(got), "\n")
		ll := linkLocal(macAddress("sbx_1")).String()
		src6 := "ip6 saddr { " + ll + " } accept"
		if subnet6.IsValid() {
			src6 = "ip6 saddr { " + ll + ", 2001:db8:f00::2 } accept"
		}
		if lines[0] != "add chain bridge froog "+chain || lines[1] != "flush chain bridge froog "+chain ||
			lines[len(lines)-1] != `add element bridge froog taps { "`+tap+`" : jump `+chain+` }` ||
			lines[len(lines)-2] != "add rule bridge froog "+chain+" drop" ||
			!strings.Contains(got, "ether saddr != "+macAddress("sbx_1")+" drop") ||
			!strings.Contains(got, "ip saddr 10.213.0.2 accept") || !strings.Contains(got, src6) {
			t.Errorf("IPv6 subnet %v: got\n%s", subnet6, got)
		}
	}
}
