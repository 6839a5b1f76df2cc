package local_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"froog.tech/froog/hostctl/local"
	"froog.tech/froog/internal/testkit"
	"froog.tech/froog/store"
)

// The SSH servers listen on loopback unless the host advertises another
// address, and then there only; an address no other machine could use
// is refused.
func TestAddr(t *testing.T) {
	control := testkit.NewKey(t)
	for _, c := range []struct{ addr, want, not string }{{"", "127.0.0.1", "127.0.0.2"}, {"127.0.0.2", "127.0.0.2", "127.0.0.1"}} {
		drv, err := local.New(local.Options{Dir: t.TempDir(), Addr: c.addr, ControlKey: control.PublicKey()})
		if err != nil {
			t.Fatal(err)
		}
		ep, err := drv.Start(context.Background(), &store.Sandbox{ID: store.NewID("sbx"), Name: "box"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if ep.Host != c.want {
			t.Errorf("Addr %q: endpoint host %s, want %s", c.addr, ep.Host, c.want)
		}
		if conn, err := net.DialTimeout("tcp", net.JoinHostPort(c.not, fmt.Sprint(ep.Port)), 5*time.Second); err == nil {
			conn.Close()
			t.Errorf("Addr %q: also listening on %s", c.addr, c.not)
		}
		drv.Close()
	}
	for _, bad := range []string{"0.0.0.0", "::", "vm1.internal", "1.2.3"} {
		if _, err := local.New(local.Options{Dir: t.TempDir(), Addr: bad, ControlKey: control.PublicKey()}); err == nil {
			t.Errorf("Addr %q accepted", bad)
		}
	}
}
