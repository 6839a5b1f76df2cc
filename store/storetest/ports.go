package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"froog.tech/froog/store"
)

func setPorts(s Backend, id string, ports []store.Port) (store.Sandbox, error) {
	return s.UpdateSandbox(ctx, id, func(sb *store.Sandbox, _ *store.AuditEvent) error {
		sb.Ports = ports
		return nil
	}, nil)
}

func tcp(n int) store.Port { return store.Port{Port: n, Protocol: store.ProtoTCP} }
func udp(n int) store.Port { return store.Port{Port: n, Protocol: store.ProtoUDP} }

// Ports are kept sorted and once each, bad ones are refused, and they
// outlive a stop and start.
func testPorts(t *testing.T, o func() Backend) {
	s := open(t, o)
	a := account(t, s, 10)
	sb := sandbox(t, s, a.ID, "box", nil, now)
	got, err := setPorts(s, sb.ID, []store.Port{udp(27015), tcp(80), tcp(80), tcp(27015)})
	if err != nil {
		t.Fatalf("set ports: %v", err)
	}
	want := []store.Port{tcp(80), tcp(27015), udp(27015)}
	if !slices.Equal(got.Ports, want) {
		t.Fatalf("ports: got %v, want %v", got.Ports, want)
	}
	for _, bad := range [][]store.Port{{tcp(0)}, {tcp(65536)}, {{Port: 22, Protocol: "sctp"}}, {{Port: 22}}} {
		_, err := setPorts(s, sb.ID, bad)
		wantErr(t, fmt.Sprint("ports ", bad), err, store.ErrBadPort)
	}
	if _, err := s.StopSandbox(ctx, sb.ID, now, nil); err != nil {
		t.Fatal(err)
	}
	_, err = s.UpdateSandbox(ctx, sb.ID, func(x *store.Sandbox, _ *store.AuditEvent) error {
		x.DesiredState, x.State = store.StateRunning, store.StateStarting
		return nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if back, err := s.SandboxByID(ctx, sb.ID); err != nil || !slices.Equal(back.Ports, want) {
		t.Fatalf("ports after stop and start: got %v, %v; want %v", back.Ports, err, want)
	}
	if got, err := setPorts(s, sb.ID, nil); err != nil || got.Ports != nil {
		t.Fatalf("close every port: got %v, %v", got.Ports, err)
	}
	// A new sandbox (a fork) comes with its ports, checked alike.
	fork, err := s.CreateSandbox(ctx, store.Sandbox{AccountID: a.ID, Name: "fork", Size: "small", OS: "ubuntu-24.04",
		DesiredState: store.StateStopped, State: store.StateStopped, Ports: []store.Port{udp(9), tcp(9)}, CreatedAt: now, UpdatedAt: now}, nil)
	if err != nil || !slices.Equal(fork.Ports, []store.Port{tcp(9), udp(9)}) {
		t.Fatalf("create with ports: got %v, %v", fork.Ports, err)
	}
}

// At most MaxPortsPerSandbox, public URLs' TCP ports counted: neither a
// port nor a URL made public passes it, even written at the same time;
// a port that a public URL opens already costs nothing more, and a write
// that removes ports always passes.
func testPortsLimit(t *testing.T, o func() Backend) {
	s := open(t, o)
	a := account(t, s, 10)
	sb := sandbox(t, s, a.ID, "box", nil, now)
	var le *store.LimitError
	if _, err := putURL(s, sb.ID, 3000, "box-3000-pub", true, now); err != nil {
		t.Fatal(err)
	}
	if _, err := putURL(s, sb.ID, 4000, "box-4000-priv", false, now); err != nil {
		t.Fatal(err)
	}
	var ports []store.Port
	for i := 1; len(ports) < store.MaxPortsPerSandbox-1; i++ {
		ports = append(ports, udp(i))
	}
	if _, err := setPorts(s, sb.ID, append(ports, udp(99))); !errors.As(err, &le) || le.Limit != "ports_per_sandbox" {
		t.Fatalf("64 ports and a public URL: got %v, want ports_per_sandbox", err)
	}
	if _, err := setPorts(s, sb.ID, append(slices.Clone(ports), tcp(3000))); err != nil {
		t.Fatalf("63 ports and the public URL's own: %v", err)
	}
	if _, err := putURL(s, sb.ID, 4000, "box-4000-priv", true, now); !errors.As(err, &le) || le.Limit != "ports_per_sandbox" {
		t.Fatalf("a 65th port by making a URL public: got %v, want ports_per_sandbox", err)
	}
	if _, err := putURL(s, sb.ID, 4000, "box-4000-priv", false, now); err != nil {
		t.Fatalf("a private URL opens nothing: %v", err)
	}
	if _, err := setPorts(s, sb.ID, ports[1:]); err != nil {
		t.Fatalf("close one: %v", err)
	}
	// Two writers at once, one port and one public URL, for the last place.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	wg.Add(2)
	go func() {
		defer wg.Done()
		_, errs[0] = setPorts(s, sb.ID, append(slices.Clone(ports[1:]), tcp(5000)))
	}()
	go func() {
		defer wg.Done()
		_, errs[1] = putURL(s, sb.ID, 4000, "box-4000-priv", true, now)
	}()
	wg.Wait()
	if (errs[0] == nil) == (errs[1] == nil) {
		t.Fatalf("two writers for the last place: got %v and %v, want one to pass", errs[0], errs[1])
	}
	up, err := s.SandboxByID(ctx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	urls, err := s.URLs(ctx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(store.EffectivePorts(up.Ports, urls)); n != store.MaxPortsPerSandbox {
		t.Fatalf("effective ports after the race: got %d, want %d", n, store.MaxPortsPerSandbox)
	}
}
