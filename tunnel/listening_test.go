package tunnel_test

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"froog.tech/froog/tunnel"
)

// The tables as a Linux kernel prints them (x86-64): headings, LISTEN
// sockets, a connection, on both families.
const procNetSample = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 136 1 00000000857af46f 100 0 0 10 0
   1: 0100007F:1435 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 308083 2 00000000b8a98423 100 0 0 10 0
   2: 0200007F:0BB8 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 308084 2 00000000b8a98423 100 0 0 10 0
   3: 0100007F:1435 0100007F:D2A2 01 00000000:00000000 00:00000000 00000000  1000        0 308085 2 00000000b8a98423 100 0 0 10 0
   4: 00000000:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 137 1 00000000857af46f 100 0 0 10 0
  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:0BB9 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4733 1 00000000be318471 100 0 0 10 0
   1: 00000000000000000000000000000000:0016 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4734 1 00000000be318471 100 0 0 10 0
   2: 0000000000000000FFFF00000100007F:0050 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4735 1 00000000be318471 100 0 0 10 0
`

func TestParseListening(t *testing.T) {
	t.Parallel()
	got, err := tunnel.ParseListening([]byte(procNetSample))
	if err != nil {
		t.Fatal(err)
	}
	want := []tunnel.Listener{
		{netip.MustParseAddr("::"), 22},
		{netip.MustParseAddr("127.0.0.1"), 80}, // ::ffff:127.0.0.1
		{netip.MustParseAddr("127.0.0.2"), 3000},
		{netip.MustParseAddr("::1"), 3001},
		{netip.MustParseAddr("127.0.0.1"), 5173},
		{netip.MustParseAddr("0.0.0.0"), 8080}, // twice (SO_REUSEPORT), once here
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for _, bad := range []string{
		"   0: 0100007F:XYZW 00000000:0000 0A",
		"   0: 0100007:1435 00000000:0000 0A",
		"   0: 0100007F1435 00000000:0000 0A",
		"   0: 0100007F:14350 00000000:0000 0A",
	} {
		if ls, err := tunnel.ParseListening([]byte(bad)); err == nil {
			t.Errorf("%q: got %v and no error", bad, ls)
		}
	}
	if ls, err := tunnel.ParseListening(nil); err != nil || len(ls) != 0 {
		t.Errorf("nothing: got %v, %v", ls, err)
	}
}

func FuzzParseListening(f *testing.F) {
	f.Add([]byte(procNetSample))
	f.Add([]byte("   0: 0100007F:1435 00000000:0000 0A"))
	f.Add([]byte("0: :0A 0A 0A\n1: 00000000000000000000000000000000:FFFF x 0A"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ls, err := tunnel.ParseListening(b)
		if err != nil {
			return
		}
		for i, l := range ls {
			if !l.Addr.IsValid() || l.Addr.Is4In6() || l.Port < 0 || l.Port > 65535 {
				t.Fatalf("a listener no socket can be: %v", l)
			}
			if i > 0 && (ls[i-1].Port > l.Port || ls[i-1] == l) {
				t.Fatalf("not sorted, each once: %v", ls)
			}
		}
	})
}

// Listening through OpenSSH's server reads the host's tables (the test
// sandbox is the host): a socket the test listens on is there, with its
// address.
func TestListeningAgainstOpenSSH(t *testing.T) {
	t.Parallel()
	tun, id, _, _ := openSSHTunnel(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	want := tunnel.Listener{Addr: netip.MustParseAddr("127.0.0.1"), Port: ln.Addr().(*net.TCPAddr).Port}
	var want6 *tunnel.Listener
	if ln6, err := net.Listen("tcp6", "[::1]:0"); err == nil {
		defer ln6.Close()
		want6 = &tunnel.Listener{Addr: netip.MustParseAddr("::1"), Port: ln6.Addr().(*net.TCPAddr).Port}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ls, err := tun.Listening(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(ls, want) {
		t.Fatalf("%v is not among %v", want, ls)
	}
	if want6 != nil && !slices.Contains(ls, *want6) {
		t.Fatalf("%v is not among %v", *want6, ls)
	}
	// A read whose time is up fails, and says so.
	done, cancelDone := context.WithCancel(context.Background())
	cancelDone()
	if _, err := tun.Listening(done, id); err == nil || !strings.Contains(err.Error(), "canceled") {
		t.Fatalf("a cancelled read: got %v, want context.Canceled", err)
	}
}
