package hostctl_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"froog.tech/froog/hostctl"
	"froog.tech/froog/internal/wait"
	"froog.tech/froog/store"
)

// fakeReportingDriver reports the stages it is given, one at a time, and
// ends each start as the test says: a fake because the point is a start
// held at a chosen stage, which a real boot passes by its own clock.
type fakeReportingDriver struct {
	stages chan string
	end    chan error
	mu     sync.Mutex
	ctx    context.Context // the last start's
}

func (d *fakeReportingDriver) Start(ctx context.Context, _ *store.Sandbox, _ []string) (hostctl.Endpoint, error) {
	d.mu.Lock()
	d.ctx = ctx
	d.mu.Unlock()
	for {
		select {
		case s := <-d.stages:
			hostctl.ReportProgress(ctx, s)
		case err := <-d.end:
			return hostctl.Endpoint{Host: "127.0.0.1", Port: 2222, HostKey: "ssh-ed25519 AAAA"}, err
		}
	}
}
func (d *fakeReportingDriver) Stop(context.Context, *store.Sandbox) error   { return nil }
func (d *fakeReportingDriver) Delete(context.Context, *store.Sandbox) error { return nil }

// A start's stages reach the store while it starts; a start that fails
// keeps the stage it failed in, one that runs or stops clears it; a
// report after its start has ended writes nothing.
func TestStartStages(t *testing.T) {
	drv := &fakeReportingDriver{stages: make(chan string), end: make(chan error)}
	r := newRig(t, drv, hostctl.Options{})
	sb := r.create("box", nil)
	stage := func(want string) {
		t.Helper()
		var got store.Sandbox
		if !wait.Until(10*time.Second, func() bool {
			got, _ = r.st.SandboxByID(ctx, sb.ID)
			return got.StartStage == want
		}) {
			t.Fatalf("start stage %q (state %s), want %q", got.StartStage, got.State, want)
		}
	}
	drv.stages <- "booting: the kernel"
	stage("booting: the kernel")
	if got, _ := r.st.SandboxByID(ctx, sb.ID); got.State != store.StateStarting {
		t.Fatalf("state %s while the driver starts it, want starting", got.State)
	}
	drv.stages <- "booting: systemd's start-up" // within progressEvery of the last: written at the end
	drv.end <- errors.New("the boot stalled")
	r.waitState(sb.ID, store.StateError)
	stage("booting: systemd's start-up")

	r.setDesired(sb.ID, store.StateRunning) // a new start begins with no stage
	drv.stages <- "resuming"
	stage("resuming")
	drv.end <- nil
	r.waitState(sb.ID, store.StateRunning)
	stage("")
	time.Sleep(600 * time.Millisecond) // past progressEvery: a report now is not held back
	drv.mu.Lock()
	hostctl.ReportProgress(drv.ctx, "late") // the start is over; a write would be done on return
	drv.mu.Unlock()
	if got, _ := r.st.SandboxByID(ctx, sb.ID); got.StartStage != "" {
		t.Fatalf("a report after its start ended wrote %q", got.StartStage)
	}

	r.setDesired(sb.ID, store.StateStopped)
	r.waitState(sb.ID, store.StateStopped)
	stage("")
}
