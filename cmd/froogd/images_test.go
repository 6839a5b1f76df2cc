package main

import (
	"strings"
	"testing"
)

func TestParseImages(t *testing.T) {
	got, err := parseImages("debian-12=/img/debian,ubuntu-24.04=rel/ubuntu")
	if err != nil || len(got) != 2 || got["debian-12"] != "/img/debian" || got["ubuntu-24.04"] != "rel/ubuntu" {
		t.Fatalf("got %v, %v", got, err)
	}
	if got, err := parseImages(""); err != nil || len(got) != 0 {
		t.Fatalf("empty: %v, %v", got, err)
	}
	for _, bad := range []string{"debian", "debian=", "=dir", "Debian=x", "a=x,a=y", "a=x,", ",a=x", "a b=x", "-a=x"} {
		if got, err := parseImages(bad); err == nil || !strings.Contains(err.Error(), "--images") {
			t.Errorf("%q: %v, %v", bad, got, err)
		}
	}
}

func FuzzParseImages(f *testing.F) {
	f.Add("debian-12=/img/debian,ubuntu-24.04=x")
	f.Add("a=b=c")
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseImages(s)
		if err != nil {
			return
		}
		for name, dir := range got {
			if !osName.MatchString(name) || dir == "" {
				t.Fatalf("%q: %q=%q", s, name, dir)
			}
		}
	})
}

// --vm-subnet6 is an IPv6 prefix, and only with --vm-net tap.
func TestVMSubnet6(t *testing.T) {
	t.Parallel()
	ok := driverConfig{Driver: "qemu", Net: "tap", Subnet6: "2001:db8:1:2::/64", DiskGB: 10, MinFreeMB: 1, WarmSecs: 1}
	if err := ok.validate(); err != nil {
		t.Fatalf("%+v: %v", ok, err)
	}
	for _, bad := range []driverConfig{
		{Net: "tap", Subnet6: "10.0.0.0/8"},
		{Net: "tap", Subnet6: "2001:db8::"},
		{Net: "user", Subnet6: "2001:db8:1:2::/64"},
	} {
		c := ok
		c.Net, c.Subnet6 = bad.Net, bad.Subnet6
		if err := c.validate(); err == nil || !strings.Contains(err.Error(), "--vm-subnet6") {
			t.Errorf("%s with --vm-net %s: %v", c.Subnet6, c.Net, err)
		}
	}
}
