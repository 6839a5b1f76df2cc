package edge

import (
	"math"
	"net/netip"
	"sync"
	"time"
)

// limiter is a token bucket per client address: rate requests a second
// on average, burst at once. A page that loads hundreds of modules fits
// in the burst; a flood does not reach the sandbox.
type limiter struct {
	rate, burst float64
	shards      [32]limitShard
}

type limitShard struct {
	mu      sync.Mutex
	buckets map[netip.Addr]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

// maxBuckets bounds a shard; past it, full buckets (idle addresses) go.
const maxBuckets = 4096

func newLimiter(rate float64, burst int) *limiter {
	l := &limiter{rate: rate, burst: float64(max(burst, 1))}
	for i := range l.shards {
		l.shards[i].buckets = map[netip.Addr]*bucket{}
	}
	return l
}

// allow takes one request from ip's bucket. When it is empty it says how
// many seconds until there is one again.
func (l *limiter) allow(ip netip.Addr, now time.Time) (bool, int) {
	a := ip.As16()
	sh := &l.shards[(a[15]^a[13]^a[11]^a[7])%byte(len(l.shards))]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	b := sh.buckets[ip]
	if b == nil {
		if len(sh.buckets) >= maxBuckets {
			l.sweep(sh, now)
		}
		b = &bucket{tokens: l.burst, last: now}
		sh.buckets[ip] = b
	}
	b.tokens = math.Min(l.burst, b.tokens+now.Sub(b.last).Seconds()*l.rate)
	b.last = now
	if b.tokens < 1 {
		return false, int(math.Ceil((1 - b.tokens) / l.rate))
	}
	b.tokens--
	return true, 0
}

// sweep drops the buckets that have filled up again: forgetting them
// changes nothing.
func (l *limiter) sweep(sh *limitShard, now time.Time) {
	for ip, b := range sh.buckets {
		if b.tokens+now.Sub(b.last).Seconds()*l.rate >= l.burst {
			delete(sh.buckets, ip)
		}
	}
}
