package hostctl

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"froog.tech/froog/store"
)

// A start says how far it has got: the driver's Start calls
// ReportProgress as it goes ("booting: the kernel", "the guest's SSH
// server answers"), and hostctl writes the latest on the sandbox
// (StartStage), for the API and the edge's Starting page. A driver that
// reports nothing leaves the stage empty: starting is all there is to say.

type progressKey struct{}

// ReportProgress tells the start that ctx belongs to how far it has got,
// in a few words. It is cheap to call often (only changes are written, at
// most one every progressEvery); outside a start it does nothing.
func ReportProgress(ctx context.Context, stage string) {
	if p, ok := ctx.Value(progressKey{}).(*progress); ok {
		p.report(stage)
	}
}

// progressEvery bounds the writes of one start's stage.
const progressEvery = 500 * time.Millisecond

// progress writes one start's stage on its sandbox.
type progress struct {
	c  *Controller
	id string

	mu      sync.Mutex
	done    bool
	pending string // reported, not written yet
	written string
	at      time.Time // of the last write
}

// startProgress gives ctx, a start's, a reporter for sandbox id; end
// writes what is still pending and stops it.
func (c *Controller) startProgress(ctx context.Context, id string) (context.Context, func()) {
	p := &progress{c: c, id: id}
	ctx = context.WithValue(ctx, progressKey{}, p)
	return ctx, func() { p.end(ctx) }
}

func (p *progress) report(stage string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return
	}
	p.pending = stage
	if stage == p.written || time.Since(p.at) < progressEvery {
		return
	}
	p.write(context.Background())
}

func (p *progress) end(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.done && p.pending != p.written {
		p.write(context.WithoutCancel(ctx))
	}
	p.done = true
}

// write stores the pending stage; p.mu is held. The stage is written
// only while the sandbox is starting: a report that comes late must not
// outlive its start.
func (p *progress) write(ctx context.Context) {
	stage := p.pending
	p.written, p.at = stage, time.Now()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := p.c.o.Store.UpdateSandbox(ctx, p.id, func(s *store.Sandbox, _ *store.AuditEvent) error {
		if s.State == store.StateStarting {
			s.StartStage = stage
		}
		return nil
	}, nil)
	if err != nil {
		// Progress is for people watching: a write that fails costs the
		// start nothing.
		p.c.o.Logger.Debug("writing a start's stage", slog.String("sandbox", p.id), slog.String("error", err.Error()))
	}
}
