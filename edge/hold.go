package edge

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"froog.tech/froog/edge/route"
	"froog.tech/froog/store"
	"froog.tech/froog/wake"
)

// Auto-start: a request for a stopped sandbox whose auto_start is on asks
// for a start through the store (as the API's start does, with its
// limits, and one audit event however many requests and edges ask), and
// is held until the sandbox runs and its port answers, up to HoldTimeout:
// package wake, reading the route table (which the change feed pushes
// to) and dialing through the tunnel. Concurrent requests for one sandbox
// on this edge share one ask; edges sharing a store share the one start
// the store lets through.

// Sandboxes is what the edge writes to the store: the intent to start.
type Sandboxes interface {
	store.SandboxUpdater
}

// maxHeldBody bounds the body of a request held while its sandbox
// starts: it waits in memory.
const maxHeldBody = 1 << 20

// maxDrainedBody bounds what the edge reads away of a body too large to
// hold before it answers.
const maxDrainedBody = 16 << 20

var (
	errStarting = problem{status: 503, code: "sandbox_starting", title: "Starting…",
		message: "This sandbox was asleep and is starting. The page follows its start and shows the app as soon as it answers.", reload: true, retryAfter: 5}
	errStartFailed = problem{status: 503, code: "sandbox_start_failed", title: "The start failed",
		message: "This sandbox could not start. Its owner can see why, and start it again."}
	// errUnavailable says nothing of why: the visitor is not the owner.
	errUnavailable = problem{status: 503, code: "unavailable", title: "Not available",
		message: "This address cannot be served right now."}
)

// starts is the edge's waker (package wake): it coalesces the asks of
// this edge for one sandbox.
type starts struct{ w *wake.Waker }

// tableFeed is the route table as wake reads it.
type tableFeed struct{ r Routes }

func (f tableFeed) Sandbox(id string) (wake.Sandbox, bool) {
	sb := f.r.Sandbox(id)
	if sb == nil {
		return wake.Sandbox{}, false
	}
	return wakeSandbox(sb), true
}

func (f tableFeed) Changed() <-chan struct{} { return f.r.Changed() }

func wakeSandbox(sb *route.Sandbox) wake.Sandbox {
	return wake.Sandbox{State: sb.State, DesiredState: sb.DesiredState, AutoStart: sb.AutoStart, UpdatedAt: sb.UpdatedAt}
}

// newStarts builds the edge's waker.
func newStarts(o *Options) (starts, error) {
	w, err := wake.New(wake.Options{Store: o.Sandboxes, Feed: tableFeed{o.Routes}, Dialer: o.Dialer, Now: o.Now})
	return starts{w: w}, err
}

// needsHold reports whether a request for rt must wait for its sandbox:
// the route table says it is not running. A sandbox the table does not
// know (yet) is not held: the tunnel has the last word.
func (s *Server) needsHold(rt *route.Route) (*route.Sandbox, bool) {
	sb := s.o.Routes.Sandbox(rt.SandboxID)
	if sb == nil || sb.State == store.StateRunning {
		return nil, false
	}
	return sb, true
}

// ask is wake's ask for a request to port of rt's sandbox: the port the
// request needs (rt's own, or one of its path routes').
func (s *Server) ask(rt *route.Route, port int, sb *route.Sandbox, requestID string) wake.Ask {
	return wake.Ask{SandboxID: rt.SandboxID, Port: port, Known: wakeSandbox(sb),
		Audit: &store.AuditEvent{AccountID: rt.AccountID, At: s.o.Now(), Actor: "public-url", ActorLabel: rt.Host, RequestID: requestID,
			Detail: map[string]string{"port": itoa(port)}}}
}

// hold wakes rt's sandbox if it may (wake: the request carried a valid
// token, or the URL is public) and waits until port answers. It
// returns nil when the request may go on, or the problem to answer with.
func (s *Server) hold(ctx context.Context, rt *route.Route, port int, sb *route.Sandbox, wake bool, requestID string) *problem {
	if !sb.AutoStart {
		return &errStopped // today's notice: only auto_start holds
	}
	if !wake {
		return &errStopped // a private URL never wakes a sandbox for a stranger
	}
	start := time.Now()
	s.m.held.Inc()
	defer func() {
		s.m.held.Dec()
		s.m.holdTime.Observe(time.Since(start).Seconds())
	}()
	ctx, cancel := context.WithTimeout(ctx, s.o.HoldTimeout)
	defer cancel()
	err := s.starts.w.Wait(ctx, s.ask(rt, port, sb, requestID))
	switch {
	case err == nil:
		s.m.autoStarts.WithLabelValues("started").Inc()
		return nil
	case ctx.Err() != nil:
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			s.m.autoStarts.WithLabelValues("timed_out").Inc()
		} // else the client went away
		return s.starting(rt, port, time.Since(start))
	}
	if p := s.startFailed(rt, err); p != nil {
		s.m.autoStarts.WithLabelValues("failed").Inc()
		return p
	}
	s.m.autoStarts.WithLabelValues("refused").Inc()
	s.o.Logger.Warn("auto-start refused", slog.String("request_id", requestID), slog.String("sandbox", rt.SandboxID), slog.String("error", err.Error()))
	return &errUnavailable
}

// startFailed is the page of a wait that ended because the start failed
// (the sandbox is in error): at which stage, not why (the error is the
// owner's to read, in the API); nil for any other end.
func (s *Server) startFailed(rt *route.Route, err error) *problem {
	var failed *wake.FailedError
	if !errors.As(err, &failed) || failed.State != store.StateError {
		return nil
	}
	p := errStartFailed
	if sb := s.o.Routes.Sandbox(rt.SandboxID); sb != nil && sb.StartStage != "" {
		p.message = "This sandbox could not start (at " + sb.StartStage + "). Its owner can see why, and start it again."
	}
	return &p
}

// starting is the Starting page of a request to port of rt's sandbox,
// held for waited, with where its start is now.
func (s *Server) starting(rt *route.Route, port int, waited time.Duration) *problem {
	p := errStarting
	st := startOf(s.o.Routes.Sandbox(rt.SandboxID), port, false)
	st.waited = int(waited.Seconds())
	p.start = &st
	return &p
}

// tooLargeToHold answers a request whose body is too large to wait in
// memory: 503 sandbox_starting (its sender retries after Retry-After),
// and the sandbox is asked to start so that the retry finds it running.
func (s *Server) tooLargeToHold(rt *route.Route, port int, sb *route.Sandbox, wake bool, requestID string) *problem {
	if !wake || !sb.AutoStart {
		return &errStopped
	}
	if sb.DesiredState != store.StateRunning {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), s.o.HoldTimeout)
			defer cancel()
			if err := s.starts.w.Start(ctx, s.ask(rt, port, sb, requestID)); err != nil {
				s.o.Logger.Warn("auto-start refused", slog.String("request_id", requestID), slog.String("sandbox", rt.SandboxID), slog.String("error", err.Error()))
			}
		}()
	}
	return s.starting(rt, port, 0)
}
