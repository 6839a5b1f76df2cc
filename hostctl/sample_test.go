package hostctl_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"froog.tech/froog/hostctl"
	"froog.tech/froog/internal/testkit"
	"froog.tech/froog/internal/wait"
	"froog.tech/froog/store"
)

// TestStopKeepsLastProcesses: a stop reads the running sandbox's
// processes first (Options.Sample) and keeps them with their time; a
// stop whose reading fails keeps none, not the previous run's; and a
// sample goes ProcessesKept after it was read; with monitoring off
// nothing is read.
func TestStopKeepsLastProcesses(t *testing.T) {
	clk := &testkit.FakeClock{}
	var fail atomic.Bool
	var asked atomic.Int32
	sample := func(ctx context.Context, id string) (json.RawMessage, error) {
		asked.Add(1)
		if fail.Load() {
			return nil, errors.New("unreachable")
		}
		return json.RawMessage(`[{"pid":7,"name":"sleep"}]`), nil
	}
	r := newRig(t, nil, hostctl.Options{Now: clk.Now, Sample: sample})
	sb := r.waitState(r.create("box", func(s *store.Sandbox) { s.TTLSecs = 0 }).ID, store.StateRunning)
	if asked.Load() != 0 {
		t.Fatalf("a start read the processes %d times", asked.Load())
	}
	r.setDesired(sb.ID, store.StateStopped)
	sb = r.waitState(sb.ID, store.StateStopped)
	last := store.KeptProcesses(&sb, clk.Now())
	if last == nil || string(last.Processes) != `[{"pid":7,"name":"sleep"}]` || last.At.After(*sb.StoppedAt) || asked.Load() != 1 {
		t.Fatalf("after a stop: sample %+v (asked %d times), stopped at %v", last, asked.Load(), sb.StoppedAt)
	}

	// Kept ProcessesKept, then gone.
	clk.Advance(store.ProcessesKept - time.Minute)
	if got, _ := r.st.SandboxByID(ctx, sb.ID); got.LastProcesses == nil {
		t.Fatal("the sample went early")
	}
	clk.Advance(2 * time.Minute)
	wait.For(t, 15*time.Second, "the sample dropped after 7 days", func() bool {
		got, _ := r.st.SandboxByID(ctx, sb.ID)
		return got.LastProcesses == nil
	})

	// A run whose reading fails keeps none.
	r.setDesired(sb.ID, store.StateRunning)
	r.waitState(sb.ID, store.StateRunning)
	r.setDesired(sb.ID, store.StateStopped)
	sb = r.waitState(sb.ID, store.StateStopped)
	r.setDesired(sb.ID, store.StateRunning)
	r.waitState(sb.ID, store.StateRunning)
	fail.Store(true)
	r.setDesired(sb.ID, store.StateStopped)
	sb = r.waitState(sb.ID, store.StateStopped)
	if sb.LastProcesses != nil {
		t.Fatalf("a stop whose reading failed kept %+v", sb.LastProcesses)
	}

	// Monitoring off: nothing read, nothing kept.
	fail.Store(false)
	before := asked.Load()
	off := r.waitState(r.create("off", func(s *store.Sandbox) { s.TTLSecs, s.NoMonitoring = 0, true }).ID, store.StateRunning)
	r.setDesired(off.ID, store.StateStopped)
	if off = r.waitState(off.ID, store.StateStopped); off.LastProcesses != nil || asked.Load() != before {
		t.Fatalf("monitoring off: kept %+v, read %d times", off.LastProcesses, asked.Load()-before)
	}
}

// TestStopSamplesBesideTheCopy: a stop reads the processes and copies
// the background commands' output at once, so a slow one does not eat
// the other's time. Here each waits for the other to begin: one after
// the other, the first would wait out its bound and keep nothing.
func TestStopSamplesBesideTheCopy(t *testing.T) {
	sampling, copying := make(chan struct{}), make(chan struct{})
	meet := func(ctx context.Context, mine, theirs chan struct{}) error {
		close(mine)
		select {
		case <-theirs:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	sample := func(ctx context.Context, id string) (json.RawMessage, error) {
		if err := meet(ctx, sampling, copying); err != nil {
			return nil, err
		}
		return json.RawMessage(`[{"pid":7,"name":"sleep"}]`), nil
	}
	copyJobs := func(ctx context.Context, sb *store.Sandbox) error { return meet(ctx, copying, sampling) }
	r := newRig(t, nil, hostctl.Options{Sample: sample, CopyJobs: copyJobs})
	sb := r.waitState(r.create("box", func(s *store.Sandbox) { s.TTLSecs = 0 }).ID, store.StateRunning)
	r.setDesired(sb.ID, store.StateStopped)
	if sb = r.waitState(sb.ID, store.StateStopped); sb.LastProcesses == nil {
		t.Fatal("the stop kept no processes: its sample waited for the copy to begin")
	}
}
