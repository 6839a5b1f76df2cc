package edge

import (
	"testing"
	"time"
)

// A URL's bucket: a quarter second's worth at once, then each taker
// waits off the debt all takers ran up, at the rate; time refills it, up
// to the quarter second; a changed rate is a new bucket.
func TestByteBucket(t *testing.T) {
	var bs bandwidths
	b := bs.of("u1", 1000) // bytes a second
	t0 := b.at
	if w := b.debit(250, t0); w != 0 {
		t.Fatalf("the burst: wait %v, want none", w)
	}
	if w := b.debit(500, t0); w != 500*time.Millisecond {
		t.Fatalf("500 bytes past the burst: wait %v, want 500ms", w)
	}
	if w := b.debit(100, t0); w != 600*time.Millisecond {
		t.Fatalf("a second taker behind the first: wait %v, want 600ms", w)
	}
	if w := b.debit(100, t0.Add(time.Second)); w != 0 {
		t.Fatalf("a second later (1000 paid of a 600 debt): wait %v, want none", w)
	}
	if w := b.debit(400, t0.Add(10*time.Second)); w != 150*time.Millisecond {
		t.Fatalf("after a long idle spell the bucket holds 250, not more: wait %v, want 150ms", w)
	}
	if bs.of("u1", 1000) != b || bs.of("u1", 2000) == b || bs.of("u2", 0) != nil {
		t.Fatal("of: the same rate gives the same bucket, a new rate a new one, no cap none")
	}
}
