package wake

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"froog.tech/froog/store"
)

// Follower is a Feed over a store's change feed, for a process that
// keeps no route table (the API). It knows the sandboxes that changed
// since it was made; of the others, the asker's read holds until they
// change. Run follows.
type Follower struct {
	feed  store.Feed
	sig   store.Signal
	start int64 // the feed's head when the Follower was made

	mu sync.Mutex
	m  map[string]Sandbox
}

var _ Feed = (*Follower)(nil)

// maxFollowed bounds what a Follower remembers: past it, it starts over.
const maxFollowed = 100_000

// NewFollower builds a Follower of feed from the feed's head as it is
// now: every change after it reaches the Follower once Run runs, however
// late Run's goroutine begins, so that an ask whose read follows
// NewFollower misses no change. It starts nothing.
func NewFollower(ctx context.Context, feed store.Feed) (*Follower, error) {
	head, err := feed.Head(ctx)
	if err != nil {
		return nil, fmt.Errorf("wake: read the feed's head: %w", err)
	}
	return &Follower{feed: feed, start: head, m: map[string]Sandbox{}}, nil
}

// Sandbox gives the sandbox as its last change showed it.
func (f *Follower) Sandbox(id string) (Sandbox, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sb, ok := f.m[id]
	return sb, ok
}

// Changed returns a channel closed at the next change the Follower
// applies.
func (f *Follower) Changed() <-chan struct{} { return f.sig.Changed() }

// Run follows the feed from NewFollower's head until ctx ends, subscribing again
// after an error: from where it was, or, after a gap in the feed
// (store.ErrFeedGap), from the head, with what it knew forgotten (the
// askers' reads hold until the next change). It returns ctx's error.
func (f *Follower) Run(ctx context.Context) error {
	after := f.start
	for {
		err := f.follow(ctx, &after)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, store.ErrFeedGap) {
			after = -1
			f.forget()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (f *Follower) follow(ctx context.Context, after *int64) error {
	sub, err := f.feed.Subscribe(ctx, *after)
	if err != nil {
		return err
	}
	for {
		c, err := sub.Next(ctx)
		if err != nil {
			return err
		}
		*after = c.Seq
		if c.Kind != store.KindSandbox {
			continue
		}
		f.mu.Lock()
		if len(f.m) >= maxFollowed {
			f.m = map[string]Sandbox{} // the askers' reads hold until the next change
		}
		if c.Deleted || c.Sandbox == nil || c.Sandbox.DeletedAt != nil {
			f.m[c.ID] = Sandbox{State: store.StateDeleted, DesiredState: store.StateDeleted}
		} else {
			f.m[c.ID] = Sandbox{State: c.Sandbox.State, DesiredState: c.Sandbox.DesiredState, AutoStart: c.Sandbox.AutoStart, UpdatedAt: c.Sandbox.UpdatedAt}
		}
		f.mu.Unlock()
		if sub.Buffered() == 0 {
			f.sig.Wake()
		}
	}
}

// forget drops what the Follower knew, after a gap in the feed.
func (f *Follower) forget() {
	f.mu.Lock()
	f.m = map[string]Sandbox{}
	f.mu.Unlock()
	f.sig.Wake()
}
