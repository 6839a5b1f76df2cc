package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// SandboxUpdater is the part of a Store that starts sandboxes.
type SandboxUpdater interface {
	UpdateSandbox(ctx context.Context, id string, fn func(*Sandbox, *AuditEvent) error, ev *AuditEvent) (Sandbox, error)
}

// errAlreadyRunning ends AutoStart's update without writing: the
// sandbox is already meant to run.
var errAlreadyRunning = errors.New("already meant to run")

// StartRefusedError is an auto-start the sandbox's state refuses (it is
// in error, or being deleted). Limits refuse with a LimitError.
type StartRefusedError struct{ State string }

func (e *StartRefusedError) Error() string {
	return fmt.Sprintf("the sandbox cannot start on its own: it is %s", e.State)
}

// AutoStart asks for a stopped sandbox to run, as a start over the API
// does (the store applies the same limits), for a request that needs it
// running: a visit to one of its URLs, or an API call. ev is the audit
// event to record (its Action is set to sandbox.auto_start); it is
// written once: when the sandbox is already meant to run (another
// request, or another edge, asked first), nothing is written and started
// is false. A sandbox in error is refused with a StartRefusedError: it
// needs its owner's start.
func AutoStart(ctx context.Context, s SandboxUpdater, id string, ev *AuditEvent, at time.Time) (started bool, err error) {
	ev.Action = "sandbox.auto_start"
	_, err = s.UpdateSandbox(ctx, id, func(sb *Sandbox, ev *AuditEvent) error {
		switch {
		case sb.DeletedAt != nil || sb.DesiredState == StateDeleted:
			return &StartRefusedError{State: StateDeleted}
		case sb.DesiredState == StateRunning:
			return errAlreadyRunning
		case sb.State == StateError:
			return &StartRefusedError{State: sb.State}
		case Erasing(sb):
			return &StartRefusedError{State: "being erased (it was stopped with snapshots off)"}
		case sb.DiskExpiredAt != nil:
			return &StartRefusedError{State: "without a disk (it stayed stopped over 14 days)"}
		}
		if ev.Target == "" {
			ev.Target = sb.Name
		}
		sb.DesiredState, sb.UpdatedAt = StateRunning, at
		return nil
	}, ev)
	if errors.Is(err, errAlreadyRunning) {
		return false, nil
	}
	return err == nil, err
}
