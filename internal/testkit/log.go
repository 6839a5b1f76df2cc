package testkit

import (
	"io"
	"sync"
	"testing"
)

// LogWriter writes into tb's output (shown when the test fails, or with
// -v), for the log of a server the test runs. It is tb.Output, but for
// one thing: writes after the test has ended are dropped, where
// tb.Output's would panic the binary, because a goroutine the test could
// not stop (a library's background job) may still log.
func LogWriter(tb testing.TB) io.Writer {
	w := &testLog{out: tb.Output()}
	tb.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	return w
}

type testLog struct {
	out  io.Writer
	mu   sync.Mutex
	done bool
}

func (w *testLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return len(p), nil
	}
	return w.out.Write(p)
}
