package testkit

import (
	"sync"
	"time"
)

// FakeClock is a clock a test moves by hand, for code that takes a Now.
// From NewFakeClock it stands still until Advance moves it; the zero
// FakeClock follows real time shifted by what Advance added (for code
// that also waits on real timers, whose deadlines it computes from Now).
// It is safe for concurrent use.
type FakeClock struct {
	mu    sync.Mutex
	at    time.Time // when standing still
	still bool
	off   time.Duration // when following real time
}

// NewFakeClock is a clock that stands at at until moved.
func NewFakeClock(at time.Time) *FakeClock {
	return &FakeClock{at: at, still: true}
}

// Now is the clock's time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.still {
		return c.at
	}
	return time.Now().Add(c.off)
}

// Advance moves the clock d forward.
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at = c.at.Add(d)
	c.off += d
}
