package api

import (
	"context"
	"testing"
	"time"
)

// TestWaitSlots: a third taker waits for one of two slots, a cancelled
// one gives up, and a sandbox with no takers is forgotten.
func TestWaitSlots(t *testing.T) {
	var w waitSlots
	ctx := context.Background()
	r1, _ := w.take(ctx, "a", 2)
	r2, _ := w.take(ctx, "a", 2)
	got := make(chan func(), 1)
	go func() { r, _ := w.take(ctx, "a", 2); got <- r }()
	select {
	case <-got:
		t.Fatal("a third taker got one of two slots")
	case <-time.After(50 * time.Millisecond):
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := w.take(cctx, "a", 2); err == nil {
		t.Fatal("a cancelled taker got a slot")
	}
	r1()
	r3 := <-got
	r2()
	r3()
	if len(w.sem) != 0 {
		t.Fatalf("slots left: %v", w.sem)
	}
}
