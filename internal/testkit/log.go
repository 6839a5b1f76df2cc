package testkit

import (
	"strings"
	"sync"
	"testing"
)

// LogWriter is an io.Writer into tb's log (shown when the test fails, or
// with -v), one log line a write, for the log of a server the test runs.
// Writes after the test has ended are dropped: a goroutine the test
// could not stop (a library's background job) must not panic the binary
// by logging into a finished test.
func LogWriter(tb testing.TB) *TestLog {
	w := &TestLog{tb: tb}
	tb.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	return w
}

// TestLog is LogWriter's writer.
type TestLog struct {
	tb   testing.TB
	mu   sync.Mutex
	done bool
}

func (w *TestLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.tb.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}
