package store

import (
	"context"
	"sync"
	"time"
)

// Kinds of change published on the feed.
const (
	KindSandbox     = "sandbox"
	KindURL         = "url"
	KindURLToken    = "url_token"
	KindDesktopLink = "desktop_link"
	KindSnapshot    = "snapshot"
)

// Change is one committed change to a sandbox, URL, URL token or desktop
// link. It carries the record as it is after the change, or only its id
// when Deleted.
type Change struct {
	Seq         int64        `json:"seq"`
	Kind        string       `json:"kind"`
	ID          string       `json:"id"`
	Deleted     bool         `json:"deleted,omitempty"`
	Sandbox     *Sandbox     `json:"sandbox,omitempty"`
	URL         *URL         `json:"url,omitempty"`
	URLToken    *URLToken    `json:"url_token,omitempty"`
	DesktopLink *DesktopLink `json:"desktop_link,omitempty"`
	Snapshot    *Snapshot    `json:"snapshot,omitempty"`
}

// Feed publishes every committed change, in commit order.
type Feed interface {
	// Subscribe reads every change committed after sequence number after;
	// a negative after means from now on. Load a snapshot after taking
	// Head, then subscribe from that head, and nothing is missed.
	Subscribe(ctx context.Context, after int64) (*Subscription, error)
	// Head is the sequence number of the newest committed change.
	Head(ctx context.Context) (int64, error)
}

// ChangeLog is what an implementation gives Subscription: ordered reads of
// its change log, and a signal when something new may have committed.
type ChangeLog interface {
	ChangesAfter(ctx context.Context, after int64, limit int) ([]Change, error)
	Head(ctx context.Context) (int64, error)
	// Changed returns a channel that is closed at the next commit (or at
	// anything after which the log should be read again).
	Changed() <-chan struct{}
}

// Subscription is a cursor over a ChangeLog. It is not safe for use by
// several goroutines at once; each subscriber has its own.
type Subscription struct {
	log     ChangeLog
	after   int64
	pending []Change
	// poll bounds how long Next trusts the Changed signal alone.
	poll time.Duration
}

// NewSubscription starts a cursor after seq (negative: at the head).
func NewSubscription(ctx context.Context, log ChangeLog, after int64) (*Subscription, error) {
	if after < 0 {
		h, err := log.Head(ctx)
		if err != nil {
			return nil, err
		}
		after = h
	}
	return &Subscription{log: log, after: after, poll: 5 * time.Second}, nil
}

// Next returns the next change, waiting for one until ctx ends.
func (s *Subscription) Next(ctx context.Context) (Change, error) {
	for len(s.pending) == 0 {
		changed := s.log.Changed() // before reading, so no commit slips between
		cs, err := s.log.ChangesAfter(ctx, s.after, 256)
		if err != nil {
			return Change{}, err
		}
		if len(cs) > 0 {
			s.pending = cs
			break
		}
		t := time.NewTimer(s.poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return Change{}, ctx.Err()
		case <-changed:
		case <-t.C:
		}
		t.Stop()
	}
	c := s.pending[0]
	s.pending = s.pending[1:]
	s.after = c.Seq
	return c, nil
}

// Buffered is how many changes Next can return without reading the log.
func (s *Subscription) Buffered() int { return len(s.pending) }

// Seq is the sequence number of the last change Next returned.
func (s *Subscription) Seq() int64 { return s.after }

// Signal is a broadcast: Changed hands out a channel that the next Wake
// closes. The zero value is ready to use.
type Signal struct {
	mu sync.Mutex
	ch chan struct{}
}

// Changed returns the channel the next Wake closes.
func (s *Signal) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

// Wake wakes everyone waiting on Changed.
func (s *Signal) Wake() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
}
