package local

import (
	"encoding/binary"
	"net"
	"os"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// sock_diag and /proc/net agree on the host's listening sockets: a
// listener of the test's own is in both, with the same inode.
func TestDiagListeningMatchesProc(t *testing.T) {
	t.Parallel()
	for _, network := range []string{"tcp4", "tcp6"} {
		addr := map[string]string{"tcp4": "127.0.0.1:0", "tcp6": "[::1]:0"}[network]
		ln, err := net.Listen(network, addr)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		port := ln.Addr().(*net.TCPAddr).Port
		family := map[string]uint8{"tcp4": unix.AF_INET, "tcp6": unix.AF_INET6}[network]
		diag, err := diagListening(family)
		if err != nil {
			t.Fatalf("%s: %v", network, err)
		}
		b, err := os.ReadFile(map[string]string{"tcp4": "/proc/net/tcp", "tcp6": "/proc/net/tcp6"}[network])
		if err != nil {
			t.Fatal(err)
		}
		proc := listenLines(b)
		find := func(ls []listenLine) string {
			for _, l := range ls {
				if l.port == port {
					return l.inode
				}
			}
			return ""
		}
		if in := find(diag); in == "" || in != find(proc) {
			t.Errorf("%s: the listener on %d: inode %q from sock_diag, %q from /proc/net", network, port, in, find(proc))
		}
	}
}

// diagMsg is a sock_diag message as the kernel writes one.
func diagMsg(typ uint16, data []byte) []byte {
	b := make([]byte, unix.SizeofNlMsghdr+len(data))
	binary.NativeEndian.PutUint32(b, uint32(len(b)))
	binary.NativeEndian.PutUint16(b[4:], typ)
	copy(b[unix.SizeofNlMsghdr:], data)
	return b
}

func inetDiagMsg(port uint16, inode uint32) []byte {
	d := make([]byte, inetDiagMsgSize)
	binary.BigEndian.PutUint16(d[4:], port)
	binary.NativeEndian.PutUint32(d[68:], inode)
	return d
}

func TestParseDiag(t *testing.T) {
	t.Parallel()
	errno := make([]byte, 4)
	binary.NativeEndian.PutUint32(errno, uint32(0xffffffff)) // -EPERM
	tests := []struct {
		name    string
		in      []byte
		want    []listenLine
		done    bool
		wantErr string
	}{
		{"two sockets", slices.Concat(diagMsg(unix.SOCK_DIAG_BY_FAMILY, inetDiagMsg(3000, 11)), diagMsg(unix.SOCK_DIAG_BY_FAMILY, inetDiagMsg(5173, 12))),
			[]listenLine{{3000, "11"}, {5173, "12"}}, false, ""},
		{"the end", slices.Concat(diagMsg(unix.SOCK_DIAG_BY_FAMILY, inetDiagMsg(80, 7)), diagMsg(unix.NLMSG_DONE, make([]byte, 4))),
			[]listenLine{{80, "7"}}, true, ""},
		{"refused", diagMsg(unix.NLMSG_ERROR, errno), nil, false, "operation not permitted"},
		{"short error", diagMsg(unix.NLMSG_ERROR, nil), nil, false, "short error"},
		{"short socket", diagMsg(unix.SOCK_DIAG_BY_FAMILY, make([]byte, 40)), nil, false, "40 bytes"},
		{"truncated", diagMsg(unix.SOCK_DIAG_BY_FAMILY, inetDiagMsg(80, 7))[:20], nil, false, "sock_diag"},
	}
	for _, tt := range tests {
		got, done, err := parseDiag(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s: error %v, want one saying %q", tt.name, err, tt.wantErr)
			}
			continue
		}
		if err != nil || done != tt.done || !slices.Equal(got, tt.want) {
			t.Errorf("%s: %v, done %v, %v; want %v, done %v", tt.name, got, done, err, tt.want, tt.done)
		}
	}
}

func FuzzParseDiag(f *testing.F) {
	f.Add(diagMsg(unix.SOCK_DIAG_BY_FAMILY, inetDiagMsg(3000, 11)))
	f.Add(diagMsg(unix.NLMSG_DONE, make([]byte, 4)))
	f.Add(diagMsg(unix.NLMSG_ERROR, nil))
	// Any datagram: no panic (a message shorter than it says), and a
	// datagram that fails gives no sockets. (A port and an inode read
	// from fixed-size fields cannot be out of range: nothing to check.)
	f.Fuzz(func(t *testing.T, b []byte) {
		lines, _, err := parseDiag(b)
		if err != nil && lines != nil {
			t.Errorf("an error with sockets: %v, %v", lines, err)
		}
	})
}
