package store_test

import (
	"errors"
	"testing"

	"froog.tech/froog/store"
)

func TestParsePort(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want store.Port
		bad  bool
	}{
		{in: "22", want: store.Port{Port: 22, Protocol: "tcp"}},
		{in: "27015/udp", want: store.Port{Port: 27015, Protocol: "udp"}},
		{in: "65535/tcp", want: store.Port{Port: 65535, Protocol: "tcp"}},
		{in: "0", bad: true},
		{in: "65536", bad: true},
		{in: "-1", bad: true},
		{in: "+80", bad: true},
		{in: "80/sctp", bad: true},
		{in: "80/TCP", bad: true},
		{in: "80/", bad: true},
		{in: "/udp", bad: true},
		{in: "", bad: true},
		{in: "8o", bad: true},
	}
	for _, tt := range tests {
		got, err := store.ParsePort(tt.in)
		if tt.bad {
			if !errors.Is(err, store.ErrBadPort) {
				t.Errorf("ParsePort(%q): got %v, %v; want ErrBadPort", tt.in, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParsePort(%q): got %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func FuzzParsePort(f *testing.F) {
	for _, s := range []string{"22", "27015/udp", "0/tcp", "99999", "1/", "x/udp"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := store.ParsePort(s)
		if err != nil {
			return
		}
		if p.Check() != nil {
			t.Fatalf("ParsePort(%q) = %v, which Check refuses", s, p)
		}
		if back, err := store.ParsePort(p.String()); err != nil || back != p {
			t.Fatalf("ParsePort(%q) = %v, which reads back as %v, %v", s, p, back, err)
		}
	})
}
