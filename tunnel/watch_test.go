package tunnel_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"froog.tech/froog/store"
	"froog.tech/froog/tunnel"
)

// fakeFlakyFeed is a store whose change feed refuses the first few
// subscriptions, as Postgres does while it is down.
type fakeFlakyFeed struct {
	store.Feed
	refuse atomic.Int32
}

func (f *fakeFlakyFeed) Subscribe(ctx context.Context, after int64) (*store.Subscription, error) {
	if f.refuse.Add(-1) >= 0 {
		return nil, errors.New("fake: the store is away")
	}
	return f.Feed.Subscribe(ctx, after)
}

// Watch outlives a store that is away: it does not return (which would end
// the process serving the connections), and follows the feed once the
// store is back.
func TestWatchWaitsForTheStore(t *testing.T) {
	r := newRig(t, tunnel.Options{})
	feed := &fakeFlakyFeed{Feed: r.store}
	feed.refuse.Store(2)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.tun.Watch(ctx, feed) }()
	for deadline := time.Now().Add(10 * time.Second); feed.refuse.Load() >= 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("Watch did not try the feed again")
		}
		select {
		case err := <-done:
			t.Fatalf("Watch returned while the store was away: %v", err)
		default:
		}
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Watch did not return when its context ended")
	}
}
