package api

import (
	"fmt"
	"net/http"
	"sync"
	"time"
)

// ipLimiter counts requests per IP in fixed windows. A request counts once,
// when it arrives.
type ipLimiter struct {
	limit  int
	window time.Duration

	mu    sync.Mutex
	start time.Time // of the current window
	count map[string]int
}

func newIPLimiter(limit int, window time.Duration) *ipLimiter {
	return &ipLimiter{limit: limit, window: window, count: map[string]int{}}
}

// take counts a request from ip at now, sets the RateLimit-* headers, and
// returns an error past the limit.
func (l *ipLimiter) take(ip string, now time.Time, h http.Header) *Error {
	l.mu.Lock()
	if now.Sub(l.start) >= l.window || now.Before(l.start) {
		l.start = now.Truncate(l.window)
		clear(l.count) // every IP's window ends together: memory stays bounded
	}
	l.count[ip]++
	n := l.count[ip]
	reset := l.start.Add(l.window).Sub(now)
	l.mu.Unlock()

	secs := int((reset + time.Second - 1) / time.Second)
	rateLimit{Limit: l.limit, Remaining: max(l.limit-n, 0), Reset: secs, Policy: fmt.Sprintf("%d;w=%d", l.limit, int(l.window/time.Second))}.set(h)
	if n > l.limit {
		e := errorf(http.StatusTooManyRequests, "ip_rate_limited", "too many requests from this address: %d per %d seconds", l.limit, int(l.window/time.Second))
		e.RetryAfter = max(secs, 1)
		return e
	}
	return nil
}
