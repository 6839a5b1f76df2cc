package wait_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"froog.tech/froog/internal/wait"
)

func TestUntil(t *testing.T) {
	tests := []struct {
		name    string
		holdsAt int // the call from which cond holds; 0: never
		timeout time.Duration
		want    bool
	}{
		{"at once", 1, time.Second, true},
		{"after a few polls", 5, 10 * time.Second, true},
		{"never", 0, 50 * time.Millisecond, false},
		{"checked once with no time", 1, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			start := time.Now()
			got := wait.Until(tt.timeout, func() bool { calls++; return tt.holdsAt > 0 && calls >= tt.holdsAt })
			took := time.Since(start)
			if got != tt.want {
				t.Fatalf("got %v, want %v (after %d calls)", got, tt.want, calls)
			}
			if got && calls != tt.holdsAt {
				t.Errorf("got %d calls, want %d: it goes on polling after cond held", calls, tt.holdsAt)
			}
			if !got && took < tt.timeout {
				t.Errorf("gave up after %v, before the timeout of %v", took, tt.timeout)
			}
			if tt.holdsAt == 5 && took > 2*time.Second {
				t.Errorf("five polls took %v: the poll is too slow", took)
			}
		})
	}
}

// UntilEvery polls no faster than its period once it has backed off:
// over 300 ms at a period of 100 ms, a few polls, not Until's dozens.
func TestUntilEveryPacesThePoll(t *testing.T) {
	calls := 0
	if wait.UntilEvery(300*time.Millisecond, 100*time.Millisecond, func() bool { calls++; return false }) {
		t.Fatal("a condition that never holds held")
	}
	// 1, 2, 4, ... 64 ms, then every 100: at most 10 calls in 300 ms.
	if calls < 3 || calls > 10 {
		t.Fatalf("%d polls in 300 ms at a period of 100 ms", calls)
	}
}

// fakeTB records Fatalf instead of ending the test.
type fakeTB struct {
	testing.TB
	fatal atomic.Value
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.fatal.Store(fmt.Sprintf(format, args...))
}

func TestFor(t *testing.T) {
	ok := &fakeTB{TB: t}
	wait.For(ok, time.Second, "true", func() bool { return true })
	if msg := ok.fatal.Load(); msg != nil {
		t.Fatalf("a condition that held failed the test: %v", msg)
	}
	never := &fakeTB{TB: t}
	wait.For(never, 10*time.Millisecond, "the port listens", func() bool { return false })
	if msg, _ := never.fatal.Load().(string); msg != "after 10ms: never the port listens" {
		t.Fatalf("got %q, want the test failed saying what never happened", msg)
	}
}
