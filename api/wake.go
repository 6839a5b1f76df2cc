package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"froog.tech/froog/store"
	"froog.tech/froog/wake"
)

// Waker starts a stopped sandbox that has auto_start and waits until it
// runs and, for an ask with a port, until the port answers (package
// wake, following the change feed).
type Waker interface {
	Wait(ctx context.Context, a wake.Ask) error
}

var _ Waker = (*wake.Waker)(nil)

// errStarting answers a call whose sandbox is still starting.
var errStarting = &Error{Status: http.StatusServiceUnavailable, Code: "sandbox_starting",
	Message: "the sandbox is starting; try again in a few seconds", RetryAfter: 5}

// errWaitedOut is await's: the timeout passed first.
var errWaitedOut = errors.New("the sandbox did not answer in time")

// awake returns sb running. A sandbox that is not running but has
// auto_start is started (one sandbox.auto_start event, by the key, with
// the limits of a start: a refusal is the start's error) and waited for
// up to wake.CallTimeout; then the call gets 503 sandbox_starting.
// Without auto_start the call is refused (409), as it always was.
func (s *Server) awake(r *http.Request, sb *store.Sandbox) (*store.Sandbox, error) {
	if sb.State == store.StateRunning {
		return sb, nil
	}
	err := s.await(r, sb, 0, wake.CallTimeout)
	if errors.Is(err, errWaitedOut) {
		return nil, errStarting
	}
	if err != nil {
		return nil, err
	}
	cur, err := s.store.SandboxByID(r.Context(), sb.ID)
	if err != nil {
		return nil, err
	}
	if cur.State != store.StateRunning { // stopped again since the feed said it ran
		return nil, errorf(http.StatusConflict, "conflict", "sandbox %q is not running (it is %s)", sb.Name, cur.State)
	}
	return &cur, nil
}

// await starts sb when it is not meant to run and has auto_start, and
// waits up to timeout until it runs and, when port is not 0, until the
// port accepts a connection through the tunnel. It returns errWaitedOut
// when the timeout passes first.
func (s *Server) await(r *http.Request, sb *store.Sandbox, port int, timeout time.Duration) error {
	if s.waker == nil {
		return errorf(http.StatusServiceUnavailable, "unavailable", "this API cannot start or wait for sandboxes")
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	err := s.waker.Wait(ctx, wake.Ask{SandboxID: sb.ID, Port: port,
		Known: wake.Sandbox{State: sb.State, DesiredState: sb.DesiredState, AutoStart: sb.AutoStart, UpdatedAt: sb.UpdatedAt},
		Audit: s.audit(r, "sandbox.auto_start", sb.Name, map[string]string{})})
	var (
		refused *store.StartRefusedError
		failed  *wake.FailedError
	)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, wake.ErrNotAutoStart):
		return errorf(http.StatusConflict, "conflict", "sandbox %q is not running (it is %s)", sb.Name, sb.State)
	case errors.As(err, &refused):
		return errorf(http.StatusConflict, "conflict", "sandbox %q cannot start on its own: it is %s", sb.Name, refused.State)
	case errors.As(err, &failed):
		return errorf(http.StatusConflict, "conflict", "sandbox %q did not start (it is %s)", sb.Name, failed.State)
	case r.Context().Err() != nil:
		return r.Context().Err()
	case ctx.Err() != nil:
		return errWaitedOut
	}
	return err
}
