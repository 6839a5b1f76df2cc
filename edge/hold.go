package edge

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"froog.tech/froog/edge/route"
	"froog.tech/froog/store"
)

// Auto-start: a request for a stopped sandbox whose auto_start is on asks
// for a start through the store (as the API's start does, with its
// limits, and one audit event however many requests and edges ask), and
// is held until the sandbox runs and its port answers, up to HoldTimeout.
// Concurrent requests for one sandbox on this edge share one ask; edges
// sharing a store share the one start the store lets through.

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

// holdPoll is how often a held request looks again at the sandbox's
// state and port.
const holdPoll = 50 * time.Millisecond

var (
	errStarting = problem{status: 503, code: "sandbox_starting", title: "Starting…",
		message: "This sandbox was asleep and is starting. The page reloads by itself in a few seconds.", reload: true, retryAfter: 5}
	// errUnavailable says nothing of why: the visitor is not the owner.
	errUnavailable = problem{status: 503, code: "unavailable", title: "Not available",
		message: "This address cannot be served right now."}
)

// starts coalesces the asks of one edge for one sandbox.
type starts struct {
	mu sync.Mutex
	m  map[string]*startCall
}

type startCall struct {
	done chan struct{}
	err  error
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

// hold wakes rt's sandbox if it may (wake: the request carried a valid
// token, or the URL is public) and waits until its port answers. It
// returns nil when the request may go on, or the problem to answer with.
func (s *Server) hold(ctx context.Context, rt *route.Route, sb *route.Sandbox, wake bool, requestID string) *problem {
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
	if sb.DesiredState != store.StateRunning {
		if err := s.askStart(ctx, rt, requestID); err != nil {
			if ctx.Err() != nil {
				s.m.autoStarts.WithLabelValues("timed_out").Inc()
				return &errStarting
			}
			s.m.autoStarts.WithLabelValues("refused").Inc()
			s.o.Logger.Warn("auto-start refused", slog.String("request_id", requestID), slog.String("sandbox", rt.SandboxID), slog.String("error", err.Error()))
			return &errUnavailable
		}
	}
	t := time.NewTicker(holdPoll)
	defer t.Stop()
	for {
		if cur := s.o.Routes.Sandbox(rt.SandboxID); cur == nil || cur.State == store.StateRunning {
			if c, err := s.dial(ctx, rt.SandboxID, rt.Port); err == nil {
				c.Close()
				s.m.autoStarts.WithLabelValues("started").Inc()
				return nil
			}
		} else if cur.State == store.StateError || cur.DesiredState == store.StateDeleted {
			s.m.autoStarts.WithLabelValues("refused").Inc()
			s.o.Logger.Warn("auto-start failed", slog.String("request_id", requestID), slog.String("sandbox", rt.SandboxID), slog.String("state", cur.State))
			return &errUnavailable
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				s.m.autoStarts.WithLabelValues("timed_out").Inc()
			} // else the client went away
			return &errStarting
		case <-t.C:
		}
	}
}

// askStart records the intent to start rt's sandbox, once for all the
// requests of this edge that ask at the same time.
func (s *Server) askStart(ctx context.Context, rt *route.Route, requestID string) error {
	s.starts.mu.Lock()
	if s.starts.m == nil {
		s.starts.m = map[string]*startCall{}
	}
	call := s.starts.m[rt.SandboxID]
	if call == nil {
		call = &startCall{done: make(chan struct{})}
		s.starts.m[rt.SandboxID] = call
		go func() {
			// Not the request's context: the ask outlives a client that
			// leaves, so that the others waiting on it get its answer.
			actx, cancel := context.WithTimeout(context.Background(), s.o.HoldTimeout)
			defer cancel()
			ev := &store.AuditEvent{AccountID: rt.AccountID, At: s.o.Now(), Actor: "public-url", ActorLabel: rt.Host, RequestID: requestID,
				Detail: map[string]string{"port": itoa(rt.Port)}}
			_, call.err = store.AutoStart(actx, s.o.Sandboxes, rt.SandboxID, ev, s.o.Now())
			s.starts.mu.Lock()
			delete(s.starts.m, rt.SandboxID)
			s.starts.mu.Unlock()
			close(call.done)
		}()
	}
	s.starts.mu.Unlock()
	select {
	case <-call.done:
		return call.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// tooLargeToHold answers a request whose body is too large to wait in
// memory: 503 sandbox_starting (its sender retries after Retry-After),
// and the sandbox is asked to start so that the retry finds it running.
func (s *Server) tooLargeToHold(rt *route.Route, sb *route.Sandbox, wake bool, requestID string) *problem {
	if !wake || !sb.AutoStart {
		return &errStopped
	}
	if sb.DesiredState != store.StateRunning {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), s.o.HoldTimeout)
			defer cancel()
			if err := s.askStart(ctx, rt, requestID); err != nil {
				s.o.Logger.Warn("auto-start refused", slog.String("request_id", requestID), slog.String("sandbox", rt.SandboxID), slog.String("error", err.Error()))
			}
		}()
	}
	return &errStarting
}
