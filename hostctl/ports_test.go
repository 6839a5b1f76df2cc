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
	calls []fwCall
	st    hostctl.Store
}

// fwCall is one call the fake saw: an OpenPorts's ports ("[]" for none),
// or "restore SNAPSHOT" (fakeFirewallSnapshotDriver); running when the
// store said the sandbox ran at the time.
type fwCall struct {
	what    string
	running bool
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
	d.calls = append(d.calls, fwCall{what: fmt.Sprint(ports), running: now.State == store.StateRunning})
	return nil
}

func (d *fakeFirewallDriver) log() []fwCall {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.calls)
}

func (d *fakeFirewallDriver) seen() []string {
	var out []string
	for _, c := range d.log() {
		out = append(out, c.what)
	}
	return out
}

// waitLast waits until the last call the fake saw is want.
func (d *fakeFirewallDriver) waitLast(t *testing.T, want string) {
	t.Helper()
	var got []string
	if !wait.Until(10*time.Second, func() bool {
		got = d.seen()
		return len(got) > 0 && got[len(got)-1] == want
	}) {
		t.Fatalf("calls %q, want the last %q", got, want)
	}
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
	drv.waitLast(t, "[27015/udp]")
	if drv.log()[0].running {
		t.Fatal("the ports were opened after the sandbox counted as running")
	}
	if _, err := r.st.UpdateSandbox(ctx, sb.ID, func(s *store.Sandbox, _ *store.AuditEvent) error {
		s.Ports = append(s.Ports, store.Port{Port: 80, Protocol: "tcp"})
		return nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	drv.waitLast(t, "[80/tcp 27015/udp]")
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
	drv.waitLast(t, "[80/tcp 3000/tcp 27015/udp]")
	putURL(false)
	drv.waitLast(t, "[80/tcp 27015/udp]")
	putURL(true)
	drv.waitLast(t, "[80/tcp 3000/tcp 27015/udp]")
	if err := r.st.DeleteURL(ctx, sb.ID, 3000, nil); err != nil {
		t.Fatal(err)
	}
	drv.waitLast(t, "[80/tcp 27015/udp]")

	n := len(drv.seen())
	r.setDesired(sb.ID, store.StateStopped)
	r.waitState(sb.ID, store.StateStopped)
	r.setDesired(sb.ID, store.StateRunning)
	r.waitState(sb.ID, store.StateRunning)
	if got := drv.seen(); len(got) <= n || got[len(got)-1] != "[80/tcp 27015/udp]" {
		t.Fatalf("after a stop and start: calls %q, want the same ports opened again", got[n:])
	}
}

// fakeFirewallSnapshotDriver is fakeFirewallDriver that also restores
// snapshots (copying nothing), recording each restore among the calls.
type fakeFirewallSnapshotDriver struct {
	*fakeFirewallDriver
}

var _ hostctl.Snapshotter = fakeFirewallSnapshotDriver{}

func (fakeFirewallSnapshotDriver) Snapshot(context.Context, *store.Sandbox, string) (int64, error) {
	return 1, nil
}

func (d fakeFirewallSnapshotDriver) Restore(_ context.Context, _ *store.Sandbox, id string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, fwCall{what: "restore " + id})
	return nil
}

func (fakeFirewallSnapshotDriver) ForkSnapshot(context.Context, string, *store.Sandbox) error {
	return nil
}
func (fakeFirewallSnapshotDriver) DeleteSnapshot(context.Context, string) error { return nil }

// A restore stops the VM, and a stop takes the sandbox's rules out of
// the host's firewall (the qemu driver's Stop does): hostctl opens the
// ports again on the boot after the restore, before the sandbox counts
// as running, and they are the ports open now, not those open when the
// snapshot was taken (a snapshot is a disk; the ports are the sandbox's).
func TestOpenPortsAfterRestore(t *testing.T) {
	t.Parallel()
	drv := fakeFirewallSnapshotDriver{&fakeFirewallDriver{}}
	r := newRig(t, drv, hostctl.Options{})
	drv.mu.Lock()
	drv.st = r.st // before any sandbox: nothing calls OpenPorts yet
	drv.mu.Unlock()
	sb := r.create("box", func(s *store.Sandbox) { s.Ports = []store.Port{{Port: 27015, Protocol: "udp"}} })
	sb = r.waitState(sb.ID, store.StateRunning)
	drv.waitLast(t, "[27015/udp]")
	saved := r.save(&sb, "base")
	if _, err := r.st.UpdateSandbox(ctx, sb.ID, func(s *store.Sandbox, _ *store.AuditEvent) error {
		s.Ports = []store.Port{{Port: 80, Protocol: "tcp"}}
		return nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	drv.waitLast(t, "[80/tcp]")

	if _, err := r.st.UpdateSandbox(ctx, sb.ID, func(s *store.Sandbox, _ *store.AuditEvent) error { s.RestoreFrom = saved.ID; return nil }, nil); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 10*time.Second, "restored and running again", func() bool {
		got, _ := r.st.SandboxByID(ctx, sb.ID)
		return got.RestoreFrom == "" && got.State == store.StateRunning
	})
	calls := drv.log()
	i := slices.IndexFunc(calls, func(c fwCall) bool { return c.what == "restore "+saved.ID })
	if i < 0 || i+1 >= len(calls) {
		t.Fatalf("calls %+v: want the restore, then the ports opened again", calls)
	}
	if after := calls[i+1]; after.what != "[80/tcp]" || after.running {
		t.Fatalf("after the restore: %+v, want [80/tcp] opened before the sandbox counted as running", after)
	}
}
