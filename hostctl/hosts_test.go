package hostctl_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"froog.tech/froog/hostctl"
	"froog.tech/froog/hostctl/local"
	"froog.tech/froog/internal/testkit"
	"froog.tech/froog/internal/testkit/live"
	"froog.tech/froog/internal/wait"
	"froog.tech/froog/store"
)

// Two hosts on one store: new sandboxes spread by free room, each
// reporting its host's advertised address; a host whose controller stops
// is marked down by the other, its sandboxes in error saying why, and
// new sandboxes go to the host that is left.
func TestTwoHosts(t *testing.T) {
	beat := hostctl.Options{HostName: "a", Capacity: 3, Heartbeat: 100 * time.Millisecond, DownAfter: time.Second, Address: "127.0.0.1"}
	r := newRig(t, nil, beat)

	drvB, _ := live.Driver(t, local.Options{Addr: "127.0.0.2"})
	beat.HostName, beat.Address, beat.Store, beat.Driver, beat.Rescan = "b", "127.0.0.2", r.st, drvB, 200*time.Millisecond
	// runB runs a controller for b and returns what stops it.
	runB := func() (stop func()) {
		ctl, err := hostctl.New(beat)
		if err != nil {
			t.Fatal(err)
		}
		bctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); ctl.Run(bctx) }()
		var once sync.Once
		stop = func() { once.Do(func() { cancel(); <-done }) }
		t.Cleanup(stop)
		return stop
	}
	stopB := runB()
	wait.For(t, 5*time.Second, "both hosts registered", func() bool {
		hs, err := r.st.Hosts(ctx)
		return err == nil && len(hs) == 2
	})

	on := map[string][]string{}
	for _, name := range []string{"s1", "s2", "s3", "s4"} {
		sb := r.waitState(r.create(name, nil).ID, store.StateRunning)
		on[sb.SSHHost] = append(on[sb.SSHHost], sb.ID)
	}
	if len(on["127.0.0.1"]) != 2 || len(on["127.0.0.2"]) != 2 {
		t.Fatalf("four sandboxes over two hosts of 3: %v; want two on each, at each host's address", on)
	}

	stopB()
	for _, id := range on["127.0.0.2"] {
		wait.For(t, 10*time.Second, "b's sandbox in error", func() bool {
			sb, err := r.st.SandboxByID(ctx, id)
			return err == nil && sb.State == store.StateError && strings.Contains(sb.Error, "host b stopped heart-beating")
		})
	}
	for _, id := range on["127.0.0.1"] {
		if sb, _ := r.st.SandboxByID(ctx, id); sb.State != store.StateRunning {
			t.Fatalf("a's sandbox %s is %s after b went down", id, sb.State)
		}
	}
	hs, _ := r.st.Hosts(ctx)
	if hs[0].Name != "a" || hs[0].DownAt != nil || hs[1].Name != "b" || hs[1].DownAt == nil {
		t.Fatalf("hosts: %+v", hs)
	}
	if sb := r.waitState(r.create("s5", nil).ID, store.StateRunning); sb.SSHHost != "127.0.0.1" {
		t.Fatalf("s5 at %s with b down; want a", sb.SSHHost)
	}
	// a is full now (3): one more waits, placed nowhere.
	s6 := r.create("s6", nil)
	time.Sleep(500 * time.Millisecond) // a few rescans; nothing must place it
	if sb, _ := r.st.SandboxByID(ctx, s6.ID); sb.HostID != "" || sb.State != store.StateCreating {
		t.Fatalf("s6 with every live host full: %+v", sb)
	}

	// b's controller back: b is up again, runs its sandboxes again, and
	// takes the one that waited.
	runB()
	for _, id := range on["127.0.0.2"] {
		if sb := r.waitState(id, store.StateRunning); sb.Error != "" || sb.SSHHost != "127.0.0.2" {
			t.Fatalf("b's sandbox after b's return: %+v", sb)
		}
	}
	if sb := r.waitState(s6.ID, store.StateRunning); sb.SSHHost != "127.0.0.2" {
		t.Fatalf("s6 at %s once b was back; want b", sb.SSHHost)
	}
	if hs, _ := r.st.Hosts(ctx); hs[1].DownAt != nil {
		t.Fatalf("b still down: %+v", hs[1])
	}
}

// clockMovingStore is a store after whose every heartbeat the clock
// moves on by jump: a process paused between a beat and what follows it.
type clockMovingStore struct {
	hostctl.Store
	clock *testkit.FakeClock
	jump  time.Duration
	beats atomic.Int32
	downs atomic.Int32 // hosts marked down
}

func (s *clockMovingStore) MarkHostsDown(ctx context.Context, seenBefore, at time.Time) ([]store.Host, error) {
	down, err := s.Store.MarkHostsDown(ctx, seenBefore, at)
	s.downs.Add(int32(len(down)))
	return down, err
}

func (s *clockMovingStore) RegisterHost(ctx context.Context, h store.Host) (store.Host, error) {
	out, err := s.Store.RegisterHost(ctx, h)
	s.clock.Advance(s.jump)
	s.beats.Add(1)
	return out, err
}

// A host never finds itself silent: it judges the others by the time of
// its own last beat, however far the clock moved since (TestSandboxesRun
// once saw its host marked down, and its sandbox restarted, when the
// tests' clock moved 54 s between a beat and the judgement).
func TestHeartbeatAfterClockJump(t *testing.T) {
	clock := testkit.NewFakeClock(time.Now())
	real := live.EmbeddedStore(t)
	st := &clockMovingStore{Store: real, clock: clock, jump: 10 * time.Second}
	ctl, err := hostctl.New(hostctl.Options{HostName: "a", Capacity: 1, Heartbeat: 20 * time.Millisecond, DownAfter: time.Second,
		Store: st, Driver: localIn(t, ""), Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); ctl.Run(cctx) }()
	defer func() { cancel(); <-done }()
	wait.For(t, 10*time.Second, "ten beats", func() bool { return st.beats.Load() >= 10 })
	hs, err := real.Hosts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != 1 || hs[0].DownAt != nil || st.downs.Load() != 0 {
		t.Fatalf("hosts after the clock moved between beats: %+v (marked down %d times)", hs, st.downs.Load())
	}
}
