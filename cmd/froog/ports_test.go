package main

import "testing"

func TestPortProto(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in    string
		port  int
		proto string
	}{
		{"27015/udp", 27015, "udp"},
		{"5432", 5432, "tcp"},
		{"22/tcp", 22, "tcp"},
		{"0", 0, ""},
		{"65536/udp", 0, ""},
		{"80/sctp", 0, ""},
		{"80/", 0, ""},
		{"udp", 0, ""},
	} {
		port, proto, err := portProto(tt.in)
		if port != tt.port || proto != tt.proto || (err == nil) != (tt.port != 0) {
			t.Errorf("portProto(%q): got %d, %q, %v; want %d, %q", tt.in, port, proto, err, tt.port, tt.proto)
		}
	}
}
