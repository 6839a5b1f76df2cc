package live

import (
	"context"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"froog.tech/froog/history"
	"froog.tech/froog/hostctl"
	"froog.tech/froog/hostctl/local"
	"froog.tech/froog/internal/testkit"
	"froog.tech/froog/sandboxio"
	"froog.tech/froog/store"
	"froog.tech/froog/tunnel"
)

// Driver is a local driver whose sandboxes take a fresh control key, in
// o.Dir (a temporary folder when ""), closed when the test ends. It
// returns the driver and the key.
func Driver(tb testing.TB, o local.Options) (*local.Driver, ssh.Signer) {
	tb.Helper()
	d, signer, _ := driver(tb, o)
	return d, signer
}

func driver(tb testing.TB, o local.Options) (*local.Driver, ssh.Signer, []byte) {
	tb.Helper()
	signer, pem := testkit.NewKeyPEM(tb)
	if o.Dir == "" {
		o.Dir = tb.TempDir()
	}
	o.ControlKey = signer.PublicKey()
	d, err := local.New(o)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { d.Close() })
	return d, signer, pem
}

// Rig is a controller (host "test", the local driver) running st's
// sandboxes and a tunnel watching st to reach them.
type Rig struct {
	Driver *local.Driver
	Tunnel *tunnel.Tunnel
	Signer ssh.Signer // the control key
	KeyPEM []byte     // and its OpenSSH PEM, for an ssh client
}

// Start runs a Rig on st until the test ends.
func Start(tb testing.TB, st store.Store) *Rig {
	tb.Helper()
	drv, signer, pem := driver(tb, local.Options{})
	tun, err := tunnel.New(tunnel.Options{Sandboxes: st, Signer: signer})
	if err != nil {
		tb.Fatal(err)
	}
	copier := &history.Copier{Store: st, Jobs: sandboxio.New(tun)}
	ctl, err := hostctl.New(hostctl.Options{Store: st, Driver: drv, HostName: "test", Rescan: time.Second, CopyJobs: copier.CopyOpen})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); ctl.Run(ctx) }()
	go func() { defer wg.Done(); tun.Watch(ctx, st) }()
	// Cleanups run last first: this one, then the driver's close.
	tb.Cleanup(func() { cancel(); wg.Wait(); tun.Close() })
	return &Rig{Driver: drv, Tunnel: tun, Signer: signer, KeyPEM: pem}
}
