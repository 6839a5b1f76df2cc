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
