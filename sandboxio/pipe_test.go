package sandboxio

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"
)

// fakeWriteCloser records what reaches it, failing after failAt bytes
// (0: never).
type fakeWriteCloser struct {
	mu     sync.Mutex
	b      bytes.Buffer
	writes int
	failAt int
	closed bool
}

func (r *fakeWriteCloser) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failAt > 0 && r.b.Len()+len(p) > r.failAt {
		return 0, errors.New("broken")
	}
	r.writes++
	return r.b.Write(p)
}

func (r *fakeWriteCloser) Close() error { r.mu.Lock(); r.closed = true; r.mu.Unlock(); return nil }

// TestCoalescer: every byte arrives once and in order, Close writes what
// is queued first, and a write error reaches the writer.
func TestCoalescer(t *testing.T) {
	t.Parallel()
	rec := &fakeWriteCloser{}
	c := newCoalescer(rec)
	var want bytes.Buffer
	for i := range 5000 {
		p := []byte(fmt.Sprintf("header-%d|", i))
		want.Write(p)
		c.Write(p)
		data := bytes.Repeat([]byte{byte(i)}, i%700)
		want.Write(data)
		c.Write(data)
	}
	c.Close()
	if !bytes.Equal(rec.b.Bytes(), want.Bytes()) || !rec.closed {
		t.Fatalf("got %d bytes (closed %v), want %d", rec.b.Len(), rec.closed, want.Len())
	}
	t.Logf("%d writes for 10,000", rec.writes)

	// Past 1 MiB queued, Write waits for the writer, which fails: the
	// error comes back by then at the latest.
	broken := newCoalescer(&fakeWriteCloser{failAt: 10})
	var err error
	for i := 0; i < 300000 && err == nil; i++ {
		_, err = broken.Write([]byte("0123456789"))
	}
	if err == nil {
		t.Fatal("a broken writer's error never came back")
	}
	broken.Close()
	if _, err := broken.Write([]byte("x")); err == nil {
		t.Fatal("a write after Close worked")
	}
}
