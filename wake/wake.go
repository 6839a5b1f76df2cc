package wake

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"froog.tech/froog/store"
)

// The timeouts of a wait, from the docs: a request to a URL is held up
// to URLTimeout, an API call that meets a stopped sandbox waits up to
// CallTimeout, and wait waits for its own timeout_secs (WaitTimeout when
// it gives none).
const (
	URLTimeout  = 20 * time.Second
	CallTimeout = 60 * time.Second
	WaitTimeout = 60 * time.Second
)

// startTimeout bounds the store's write of one start: the ask outlives
// the asker that made it, so that every other asker gets its answer.
const startTimeout = 20 * time.Second

// Between two dials of a port that does not answer yet (an app still
// starting) the wait backs off from firstRedial to lastRedial: a port
// has no feed, and the feed still ends the wait early when the sandbox
// stops meanwhile.
const (
	firstRedial = 20 * time.Millisecond
	lastRedial  = 250 * time.Millisecond
)

// Sandbox is what a wait needs of a sandbox's state.
type Sandbox struct {
	State        string
	DesiredState string
	AutoStart    bool
	// UpdatedAt is the record's last write: a record written after this
	// wait's own start that is not meant to run is a stop, even when the
	// feed never showed the start itself.
	UpdatedAt time.Time
}

// Feed is the change feed as a wait reads it: a sandbox as the feed last
// showed it, and a signal when the feed next moves. A waiter takes
// Changed, then reads Sandbox, then sleeps on the channel, so that no
// change slips between the read and the sleep.
type Feed interface {
	// Sandbox gives the sandbox as the feed last showed it; ok is false
	// when the feed knows nothing of it (then the asker's Known holds).
	Sandbox(id string) (sb Sandbox, ok bool)
	// Changed returns a channel closed when the feed next moves.
	Changed() <-chan struct{}
}

// Dialer opens a connection to a port inside a sandbox (package tunnel).
type Dialer interface {
	DialContext(ctx context.Context, sandboxID string, port int) (net.Conn, error)
}

// Options configure a Waker.
type Options struct {
	// Store takes the intent to start (store.AutoStart). Required.
	Store store.SandboxUpdater
	// Feed says when the sandbox runs. Required.
	Feed Feed
	// Dialer reaches the port of an ask with one; nil: asks with a port
	// are refused.
	Dialer Dialer
	// Now is the clock of the audit events; nil means time.Now.
	Now func() time.Time
}

// Waker starts sandboxes and waits for them. It is safe for concurrent
// use; its zero value is not.
type Waker struct {
	o      Options
	mu     sync.Mutex
	starts map[string]*startCall
}

type startCall struct {
	done chan struct{}
	at   time.Time // the start's write, when it made one
	err  error
}

// New checks the options and builds a Waker; it starts nothing.
func New(o Options) (*Waker, error) {
	var errs []error
	if o.Store == nil {
		errs = append(errs, errors.New("wake: a store is required"))
	}
	if o.Feed == nil {
		errs = append(errs, errors.New("wake: a feed is required"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Waker{o: o, starts: map[string]*startCall{}}, nil
}

// Ask is one "start it and wait until it answers".
type Ask struct {
	SandboxID string
	// Port is the port that must accept a connection; 0: running is
	// enough.
	Port int
	// Known is the sandbox as the asker read it; the feed's word
	// replaces it once the feed has one.
	Known Sandbox
	// Audit is the sandbox.auto_start event recorded if this ask is the
	// one that starts the sandbox (who asked: a key, a public URL).
	// Required when Known is not meant to run.
	Audit *store.AuditEvent
}

// ErrNotAutoStart refuses an ask for a sandbox that is not meant to run
// and has no auto_start.
var ErrNotAutoStart = errors.New("the sandbox is not running and does not start on its own")

// FailedError ends a wait for a sandbox that will not run: it is in
// error, being deleted, or was stopped meanwhile.
type FailedError struct{ State string }

func (e *FailedError) Error() string {
	return fmt.Sprintf("the sandbox did not start: it is %s", e.State)
}

// Start asks for the sandbox to run, once for all the asks that do so at
// the same time, and returns without waiting for it. A sandbox already
// meant to run is left as it is. It returns ErrNotAutoStart, the store's
// refusal (*store.StartRefusedError, a limit), or ctx's error.
func (w *Waker) Start(ctx context.Context, a Ask) error {
	_, err := w.start(ctx, a)
	return err
}

// start is Start that also returns when the store wrote the start: zero
// when the sandbox was meant to run already.
func (w *Waker) start(ctx context.Context, a Ask) (time.Time, error) {
	if a.Known.DesiredState == store.StateRunning {
		return time.Time{}, nil
	}
	if !a.Known.AutoStart {
		return time.Time{}, ErrNotAutoStart
	}
	w.mu.Lock()
	call := w.starts[a.SandboxID]
	if call == nil {
		call = &startCall{done: make(chan struct{})}
		w.starts[a.SandboxID] = call
		ev := *a.Audit
		go func() {
			// Not the asker's context: the start outlives an asker that
			// leaves, so that the others waiting on it get its answer.
			sctx, cancel := context.WithTimeout(context.Background(), startTimeout)
			defer cancel()
			at := w.o.Now()
			var started bool
			started, call.err = store.AutoStart(sctx, w.o.Store, a.SandboxID, &ev, at)
			if started {
				call.at = at
			}
			w.mu.Lock()
			delete(w.starts, a.SandboxID)
			w.mu.Unlock()
			close(call.done)
		}()
	}
	w.mu.Unlock()
	select {
	case <-call.done:
		return call.at, call.err
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	}
}

// Wait starts the sandbox if it must (Start), waits until the feed says
// it runs, then, for an ask with a port, until a dial reaches the port.
// It returns nil then, or Start's errors, a *FailedError, or ctx's error
// when ctx ends first (its deadline is the asker's timeout).
func (w *Waker) Wait(ctx context.Context, a Ask) error {
	if a.Port != 0 && w.o.Dialer == nil {
		return errors.New("wake: no dialer to reach a port")
	}
	startedAt, err := w.start(ctx, a)
	if err != nil {
		return err
	}
	// meant: the feed has shown the sandbox meant to run, or a write
	// after this wait's start, so a desired state other than running is
	// a stop, not the feed's lag behind the start.
	meant := a.Known.DesiredState == store.StateRunning
	redial := firstRedial
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		changed := w.o.Feed.Changed() // before the read: no change slips between
		sb, ok := w.o.Feed.Sandbox(a.SandboxID)
		if !ok {
			sb = a.Known
		}
		if sb.DesiredState == store.StateRunning || !startedAt.IsZero() && sb.UpdatedAt.After(startedAt) {
			meant = true
		}
		var retry <-chan time.Time
		switch {
		case sb.State == store.StateError || sb.DesiredState == store.StateDeleted:
			return &FailedError{State: sb.State}
		case meant && sb.DesiredState != store.StateRunning:
			return &FailedError{State: sb.State}
		case sb.State == store.StateRunning || !ok && a.Known.State == "":
			// Running (or unknown to everyone: the tunnel has the last
			// word).
			if a.Port == 0 {
				return nil
			}
			c, err := w.o.Dialer.DialContext(ctx, a.SandboxID, a.Port)
			if err == nil {
				c.Close()
				return nil
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if timer == nil {
				timer = time.NewTimer(redial)
			} else {
				timer.Reset(redial)
			}
			retry = timer.C
			redial = min(2*redial, lastRedial)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		case <-retry:
		}
	}
}
