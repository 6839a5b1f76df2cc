package edge

import (
	"io"
	"sync"
	"time"
)

// A URL's bandwidth cap (route.Policy.BytesPerSecond, the owner's
// bandwidth_mbit): the bodies of all its requests and answers on this
// edge, both ways, and its websockets' bytes share one bucket, which a
// read that overdraws waits to pay back. Each edge keeps its own buckets:
// a URL served by two edges may get up to twice its cap (the store is
// not asked per byte).

// bandwidthBurst is how much of a second's worth a bucket holds: what a
// URL that was idle may send at once.
const bandwidthBurst = 0.25

// byteBucket is one URL's byte budget.
type byteBucket struct {
	rate float64 // bytes a second
	mu   sync.Mutex
	have float64 // may go below 0: a debt the next takers wait off
	at   time.Time
	last time.Time // its last use, for the sweep
}

// take counts n bytes against b and waits until they are paid for: the
// debt, shared by every taker, over the rate. It returns how long it
// waited.
func (b *byteBucket) take(n int) time.Duration {
	if b == nil || n <= 0 {
		return 0
	}
	wait := b.debit(n, time.Now())
	if wait > 0 {
		time.Sleep(wait)
	}
	return wait
}

// debit counts n bytes at now and says how long their taker waits.
func (b *byteBucket) debit(n int, now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.have = min(b.have+now.Sub(b.at).Seconds()*b.rate, b.rate*bandwidthBurst) - float64(n)
	b.at, b.last = now, now
	if b.have >= 0 {
		return 0
	}
	return time.Duration(-b.have / b.rate * float64(time.Second))
}

// bandwidths holds the buckets of URLs, by URL id: a route is remade at
// every change of its URL, and its bucket outlives it (a new rate, a new
// bucket).
type bandwidths struct {
	mu sync.Mutex
	m  map[string]*byteBucket
}

// maxByteBuckets is how many buckets are kept before idle ones go.
const maxByteBuckets = 4096

// of is URL id's bucket at rate bytes a second; nil for no cap.
func (bs *bandwidths) of(id string, rate int64) *byteBucket {
	if rate <= 0 {
		return nil
	}
	bs.mu.Lock()
	defer bs.mu.Unlock()
	b := bs.m[id]
	if b == nil || b.rate != float64(rate) {
		if bs.m == nil {
			bs.m = map[string]*byteBucket{}
		}
		if b == nil && len(bs.m) >= maxByteBuckets {
			bs.sweep(time.Now())
		}
		now := time.Now()
		b = &byteBucket{rate: float64(rate), have: float64(rate) * bandwidthBurst, at: now, last: now}
		bs.m[id] = b
	}
	return b
}

// sweep forgets the buckets idle for a second or more: full again, the
// same as new. bs.mu is held.
func (bs *bandwidths) sweep(now time.Time) {
	for id, b := range bs.m {
		b.mu.Lock()
		idle := now.Sub(b.last) >= time.Second
		b.mu.Unlock()
		if idle {
			delete(bs.m, id)
		}
	}
}

// capped reads r at b's pace (a websocket's direction).
type capped struct {
	r io.Reader
	b *byteBucket
}

func (c capped) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.b.take(n)
	return n, err
}

// capReader is r at b's pace, or r itself when there is no cap.
func capReader(r io.Reader, b *byteBucket) io.Reader {
	if b == nil {
		return r
	}
	return capped{r, b}
}
