package tunnel

import (
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// batchConn lets the SSH packets of many channels share a write. The SSH
// client writes one packet at a time under its own lock, one syscall
// each; here Write only queues the packet, and a goroutine writes
// whatever has queued meanwhile with one syscall. Under load that is one
// write for many requests, as OpenSSH's event loop does it. A write error
// is returned by the next Write, and the connection is closed.
type batchConn struct {
	net.Conn

	mu     sync.Mutex
	more   sync.Cond // the writer waits for packets
	room   sync.Cond // Write waits for the queue to drain below maxQueued
	queued []byte
	spare  []byte
	err    error
	// writing: a write is under way (inline or the writer's); lastWrite
	// is when the last one ended.
	writing   bool
	lastWrite time.Time

	raw syscall.RawConn // for quick ACKs; nil where the conn is not TCP

	// ended is set before the SSH client can learn that the connection
	// is over (a read error, or Close): see deadlineConn.readChannel.
	ended atomic.Bool
}

// maxQueued bounds what Write queues before it waits: the channels'
// windows, not this queue, are the flow control.
const maxQueued = 1 << 20

func newBatchConn(c net.Conn) *batchConn {
	b := &batchConn{Conn: c}
	if tc, ok := c.(*net.TCPConn); ok {
		b.raw, _ = tc.SyscallConn()
	}
	b.more.L, b.room.L = &b.mu, &b.mu
	go b.writer()
	return b
}

func (b *batchConn) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for len(b.queued) >= maxQueued && b.err == nil {
		b.room.Wait()
	}
	if b.err != nil {
		return 0, b.err
	}
	if !b.writing && len(b.queued) == 0 && time.Since(b.lastWrite) > idleWrite {
		// An idle connection: write at once rather than wake the writer
		// (a goroutine handoff, a futex wake, on every request at a
		// modest rate). Under load writes come closer than idleWrite and
		// batch.
		b.writing = true
		b.mu.Unlock()
		_, err := b.Conn.Write(p)
		b.mu.Lock()
		b.writing, b.lastWrite = false, time.Now()
		if err != nil {
			b.fail(err)
			return 0, err
		}
		if len(b.queued) > 0 {
			b.more.Signal()
		}
		return len(p), nil
	}
	b.queued = append(b.queued, p...)
	if !b.writing {
		b.more.Signal()
	}
	return len(p), nil
}

// idleWrite is how long a connection goes without a write to count as
// idle, when a write goes out inline.
const idleWrite = 200 * time.Microsecond

func (b *batchConn) writer() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		for (len(b.queued) == 0 || b.writing) && b.err == nil {
			b.more.Wait()
		}
		if b.err != nil {
			return
		}
		out := b.queued
		b.queued, b.spare = b.spare[:0], nil
		b.room.Broadcast()
		b.writing = true
		b.mu.Unlock()
		_, err := b.Conn.Write(out)
		b.mu.Lock()
		b.writing, b.lastWrite = false, time.Now()
		if cap(out) <= 4*maxQueued {
			b.spare = out[:0]
		}
		if err != nil {
			b.fail(err)
		}
	}
}

// fail records err for every later Write and ends the connection.
func (b *batchConn) fail(err error) {
	b.ended.Store(true)
	if b.err == nil {
		b.err = err
		b.Conn.Close()
	}
	b.more.Broadcast()
	b.room.Broadcast()
}

// Read reads, then asks the kernel to acknowledge at once. OpenSSH's sshd
// leaves Nagle's algorithm on for connections without a terminal, so a
// small reply it sends while an earlier one is unacknowledged waits for
// our ACK, which Linux delays up to 40 ms. Quick ACKs remove that stall
// (the edge's p99 in make bench went from 44 ms to 7 ms). The setting
// lapses by itself, so it is asked for again, after every read that
// emptied the socket: a read that filled p left more waiting, so the
// server is sending full segments, which Nagle does not hold, and we
// read again at once (a download's reads, a setsockopt fewer each).
func (b *batchConn) Read(p []byte) (int, error) {
	n, err := b.Conn.Read(p)
	if err != nil {
		b.ended.Store(true)
	}
	if b.raw != nil && n < len(p) {
		b.raw.Control(quickACK)
	}
	return n, err
}

func (b *batchConn) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil {
		return nil
	}
	b.fail(net.ErrClosed)
	return nil
}
