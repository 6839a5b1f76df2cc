package hostctl

import (
	"strings"
	"testing"
)

func TestParseMemAvailable(t *testing.T) {
	tests := []struct {
		in   string
		want uint64
		err  string
	}{
		{"MemTotal:       24576000 kB\nMemFree:  100 kB\nMemAvailable:   20480000 kB\n", 20480000 << 10, ""},
		{"MemAvailable: 0 kB", 0, ""},
		{"MemTotal: 1 kB\n", 0, "no MemAvailable"},
		{"", 0, "no MemAvailable"},
		{"MemAvailable: 12 MB\n", 0, "want N kB"},
		{"MemAvailable: -1 kB\n", 0, "not a number"},
		{"MemAvailable: 18446744073709551615 kB\n", 0, "not a number"},
		{"MemAvailable:\n", 0, "want N kB"},
		{"XMemAvailable: 5 kB\n", 0, "no MemAvailable"},
	}
	for _, tt := range tests {
		got, err := parseMemAvailable(tt.in)
		if tt.err == "" && (err != nil || got != tt.want) || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("%q: got %d, %v; want %d, %q", tt.in, got, err, tt.want, tt.err)
		}
	}
	if n, err := memAvailable(); err != nil || n == 0 {
		t.Fatalf("this host's /proc/meminfo: %d, %v", n, err)
	}
}

func FuzzParseMemAvailable(f *testing.F) {
	f.Add("MemTotal: 1 kB\nMemAvailable: 20480000 kB\n")
	f.Add("MemAvailable: x kB")
	f.Fuzz(func(t *testing.T, in string) {
		n, err := parseMemAvailable(in)
		if err == nil && (n%1024 != 0 || !strings.Contains(in, "MemAvailable:")) {
			t.Fatalf("%q: %d", in, n)
		}
	})
}
