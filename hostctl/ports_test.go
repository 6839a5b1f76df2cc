package hostctl_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"froog.tech/froog/hostctl"
	"froog.tech/froog/internal/wait"
	"froog.tech/froog/store"
)

// fakeFirewallDriver records what hostctl asks its firewall to open: a
// fake because the point is what hostctl asks and when; the qemu
// driver's nftables rules are tested against a booted guest
// (hostctl/qemu's TestTapIsolation).
type fakeFirewallDriver struct {
	mu    sync.Mutex
	calls []string // each OpenPorts's ports, "" for none
	st    hostctl.Store
	// runningAtCall: the store said running at the first call.
	runningAtCall bool
}

func (d *fakeFirewallDriver) Start(context.Context, *store.Sandbox, []string) (hostctl.Endpoint, error) {
	return hostctl.Endpoint{Host: "127.0.0.1", Port: 2222, HostKey: "ssh-ed25519 AAAA", IPv6: "2001:db8::7"}, nil
}
func (d *fakeFirewallDriver) Stop(context.Context, *store.Sandbox) error   { return nil }
func (d *fakeFirewallDriver) Delete(context.Context, *store.Sandbox) error { return nil }

func (d *fakeFirewallDriver) OpenPorts(ctx context.Context, sb *store.Sandbox, ports []store.Port) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	now, err := d.st.SandboxByID(ctx, sb.ID)
	if err != nil {
		return err
	}
	d.calls = append(d.calls, fmt.Sprint(ports))
	if now.State == store.StateRunning && len(d.calls) == 1 {
		d.runningAtCall = true
	}
	return nil
}

func (d *fakeFirewallDriver) seen() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.calls)
}

var _ hostctl.Firewall = (*fakeFirewallDriver)(nil)

// hostctl has a Firewall driver open a sandbox's ports before it counts
// as running, and again whenever its own ports or its public URLs change
// while it runs (a URL made public, private, or removed), and after each
// start; it records the driver's IPv6 address on the sandbox.
func TestOpenPorts(t *testing.T) {
	t.Parallel()
	drv := &fakeFirewallDriver{}
	// No rescan within the test: only the feed can tell of a change.
	r := newRig(t, drv, hostctl.Options{Rescan: time.Hour})
	drv.mu.Lock()
	drv.st = r.st // before any sandbox: nothing calls OpenPorts yet
	drv.mu.Unlock()
	sb := r.create("box", func(s *store.Sandbox) { s.Ports = []store.Port{{Port: 27015, Protocol: "udp"}} })
	up := r.waitState(sb.ID, store.StateRunning)
	if up.IPv6 != "2001:db8::7" {
		t.Fatalf("ipv6 %q, want the driver's 2001:db8::7", up.IPv6)
	}
	last := func(want string) {
		t.Helper()
		var got []string
		if !wait.Until(10*time.Second, func() bool {
			got = drv.seen()
			return len(got) > 0 && got[len(got)-1] == want
		}) {
			t.Fatalf("OpenPorts calls %q, want the last %q", got, want)
		}
	}
	last("[27015/udp]")
	if drv.runningAtCall {
		t.Fatal("the ports were opened after the sandbox counted as running")
	}
	if _, err := r.st.UpdateSandbox(ctx, sb.ID, func(s *store.Sandbox, _ *store.AuditEvent) error {
		s.Ports = append(s.Ports, store.Port{Port: 80, Protocol: "tcp"})
		return nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	last("[80/tcp 27015/udp]")
	putURL := func(public bool) {
		t.Helper()
		if _, err := r.st.PutURL(ctx, sb.ID, 3000, func(old *store.URL, _ *store.AuditEvent) (store.URL, error) {
			now := store.Micro(time.Now())
			return store.URL{Hostname: "box-3000-abcdef", Public: public, TokenHash: "h", CreatedAt: now, UpdatedAt: now}, nil
		}, nil); err != nil {
			t.Fatal(err)
		}
	}
	putURL(true)
	last("[80/tcp 3000/tcp 27015/udp]")
	putURL(false)
	last("[80/tcp 27015/udp]")
	putURL(true)
	last("[80/tcp 3000/tcp 27015/udp]")
	if err := r.st.DeleteURL(ctx, sb.ID, 3000, nil); err != nil {
		t.Fatal(err)
	}
	last("[80/tcp 27015/udp]")

	n := len(drv.seen())
	r.setDesired(sb.ID, store.StateStopped)
	r.waitState(sb.ID, store.StateStopped)
	r.setDesired(sb.ID, store.StateRunning)
	r.waitState(sb.ID, store.StateRunning)
	if got := drv.seen(); len(got) <= n || got[len(got)-1] != "[80/tcp 27015/udp]" {
		t.Fatalf("after a stop and start: calls %q, want the same ports opened again", got[n:])
	}
}
