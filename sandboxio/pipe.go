package sandboxio

import (
	"io"
	"sync"
)

// coalescer lets the SFTP client's small writes share a channel write:
// pkg/sftp writes a write request's header and its data separately,
// which would be two SSH packets, and a sandbox's SSH server pays per
// packet. Write queues; one goroutine writes what has queued meanwhile.
// A write error is returned by the next Write; Close writes what is
// queued, then closes w.
type coalescer struct {
	w      io.WriteCloser
	mu     sync.Mutex
	more   sync.Cond
	room   sync.Cond
	queued []byte
	spare  []byte
	err    error
	closed bool
	done   chan struct{}
}

// maxCoalesced bounds what Write queues before it waits.
const maxCoalesced = 1 << 20

func newCoalescer(w io.WriteCloser) *coalescer {
	c := &coalescer{w: w, done: make(chan struct{})}
	c.more.L, c.room.L = &c.mu, &c.mu
	go c.writer()
	return c
}

func (c *coalescer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.queued) >= maxCoalesced && c.err == nil && !c.closed {
		c.room.Wait()
	}
	if c.err != nil {
		return 0, c.err
	}
	if c.closed {
		return 0, io.ErrClosedPipe
	}
	c.queued = append(c.queued, p...)
	c.more.Signal()
	return len(p), nil
}

func (c *coalescer) writer() {
	defer close(c.done)
	c.mu.Lock()
	for {
		for len(c.queued) == 0 && !c.closed {
			c.more.Wait()
		}
		if len(c.queued) == 0 { // closed, all written
			c.mu.Unlock()
			return
		}
		buf := c.queued
		c.queued, c.spare = c.spare[:0], nil
		c.mu.Unlock()
		_, err := c.w.Write(buf)
		c.mu.Lock()
		c.spare = buf
		c.room.Broadcast()
		if err != nil {
			c.err = err
			c.queued = nil
			c.mu.Unlock()
			return
		}
	}
}

func (c *coalescer) Close() error {
	c.mu.Lock()
	c.closed = true
	c.more.Signal()
	c.room.Broadcast()
	c.mu.Unlock()
	<-c.done
	return c.w.Close()
}
