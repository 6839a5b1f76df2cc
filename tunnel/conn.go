package tunnel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ssh"
)

// deadline is a settable deadline: wait returns a channel closed once it
// has passed (the pattern of net.Pipe).
type deadline struct {
	mu     sync.Mutex
	timer  *time.Timer
	cancel chan struct{}
}

func newDeadline() *deadline { return &deadline{cancel: make(chan struct{})} }

func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil && !d.timer.Stop() {
		<-d.cancel // the timer fired: wait for it to close cancel
	}
	d.timer = nil
	closed := isClosed(d.cancel)
	if t.IsZero() {
		if closed {
			d.cancel = make(chan struct{})
		}
		return
	}
	if dur := time.Until(t); dur > 0 {
		if closed {
			d.cancel = make(chan struct{})
		}
		ch := d.cancel
		d.timer = time.AfterFunc(dur, func() { close(ch) })
		return
	}
	if !closed {
		close(d.cancel)
	}
}

// active reports whether a deadline is set (pending or passed).
func (d *deadline) active() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.timer != nil || isClosed(d.cancel)
}

func (d *deadline) wait() chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cancel
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// deadlineConn gives a channel connection working deadlines. Without
// deadlines it reads and writes in place; once a read deadline is set,
// reads come from a goroutine that drains the channel, and while a write
// deadline is set, writes run in a goroutine; each side waits on its
// deadline too.
type deadlineConn struct {
	net.Conn
	onClose func()
	ended   func() bool // whether the SSH connection under the channel is over

	// viaReader: a read deadline has been set, so reads come through the
	// reader goroutine from now on. Until then they happen in place.
	viaReader atomic.Bool
	readOnce  sync.Once
	chunks    chan chunk
	readErr   error   // set before chunks is closed
	cur       *[]byte // the chunk left is in, back to its pool once read
	left      []byte
	rd, wd    *deadline

	writeMu   sync.Mutex // one write at a time, also past a timed-out one
	closeOnce sync.Once
	closed    chan struct{}
}

func newDeadlineConn(c net.Conn, onClose func(), ended func() bool) *deadlineConn {
	return &deadlineConn{Conn: c, onClose: onClose, ended: ended, chunks: make(chan chunk, 4), rd: newDeadline(), wd: newDeadline(), closed: make(chan struct{})}
}

// Chunk buffers come from two pools: a small one while the channel
// trickles (an idle websocket's reader waits holding only that) and a
// large one once a read fills the small one (a download); the reader
// moves between them by what the last read brought. A chunk goes back to
// its pool once Read has copied all of it out.
const (
	smallChunk = 2 << 10
	largeChunk = 32 << 10
)

var (
	smallChunks = sync.Pool{New: func() any { b := make([]byte, smallChunk); return &b }}
	largeChunks = sync.Pool{New: func() any { b := make([]byte, largeChunk); return &b }}
)

func putChunk(b *[]byte) {
	if cap(*b) == largeChunk {
		largeChunks.Put(b)
	} else {
		smallChunks.Put(b)
	}
}

type chunk struct {
	buf *[]byte // the pooled buffer
	n   int
}

func (c *deadlineConn) reader() {
	defer close(c.chunks)
	large := false
	for {
		var buf *[]byte
		if large {
			buf = largeChunks.Get().(*[]byte)
		} else {
			buf = smallChunks.Get().(*[]byte)
		}
		n, err := c.readChannel((*buf)[:cap(*buf)])
		large = n == cap(*buf)
		if n > 0 {
			select {
			case c.chunks <- chunk{buf, n}:
			case <-c.closed:
				putChunk(buf)
				return
			}
		} else {
			putChunk(buf)
		}
		if err != nil {
			c.readErr = err
			return
		}
	}
}

func (c *deadlineConn) Read(p []byte) (int, error) {
	if !c.viaReader.Load() {
		// No read deadline yet: read in place, no goroutine. (A deadline
		// set while such a read waits holds from the next read on.)
		return c.readChannel(p)
	}
	c.readOnce.Do(func() { go c.reader() })
	if len(c.left) == 0 {
		if isClosed(c.rd.wait()) {
			return 0, os.ErrDeadlineExceeded
		}
		select {
		case ch, ok := <-c.chunks:
			if !ok {
				return 0, c.readErr
			}
			c.cur, c.left = ch.buf, (*ch.buf)[:ch.n]
		case <-c.rd.wait():
			return 0, os.ErrDeadlineExceeded
		case <-c.closed:
			return 0, net.ErrClosed
		}
	}
	n := copy(p, c.left)
	c.left = c.left[n:]
	if len(c.left) == 0 {
		putChunk(c.cur)
		c.cur, c.left = nil, nil
	}
	return n, nil
}

// ErrConnectionLost is what a channel's reader gets, instead of io.EOF,
// when the channel ended because its SSH connection did. x/crypto/ssh
// ends every channel of a dead connection with io.EOF, the same as a
// clean end; a proxy reading a body that ends with its connection (no
// Content-Length, not chunked) would then pass a cut body on as
// complete.
var ErrConnectionLost = fmt.Errorf("the sandbox's SSH connection was lost: %w", io.ErrUnexpectedEOF)

// readChannel reads from the channel, telling a lost connection from the
// sandbox's end of the stream. The connection is marked ended before the
// SSH client sees it end, so the mark is there by the time the channel
// says EOF.
func (c *deadlineConn) readChannel(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if errors.Is(err, io.EOF) && c.ended != nil && c.ended() {
		err = ErrConnectionLost
	}
	return n, err
}

func (c *deadlineConn) Write(p []byte) (int, error) {
	if !c.wd.active() {
		// No deadline: write in place, no goroutine.
		c.writeMu.Lock()
		defer c.writeMu.Unlock()
		return c.Conn.Write(p)
	}
	if isClosed(c.wd.wait()) {
		return 0, os.ErrDeadlineExceeded
	}
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		c.writeMu.Lock()
		defer c.writeMu.Unlock()
		n, err := c.Conn.Write(p)
		done <- result{n, err}
	}()
	select {
	case r := <-done:
		return r.n, r.err
	case <-c.wd.wait():
		return 0, os.ErrDeadlineExceeded
	case <-c.closed:
		return 0, net.ErrClosed
	}
}

func (c *deadlineConn) SetDeadline(t time.Time) error {
	c.SetReadDeadline(t)
	c.wd.set(t)
	return nil
}

func (c *deadlineConn) SetReadDeadline(t time.Time) error {
	if !t.IsZero() {
		c.viaReader.Store(true)
	}
	c.rd.set(t)
	return nil
}

func (c *deadlineConn) SetWriteDeadline(t time.Time) error { c.wd.set(t); return nil }

func (c *deadlineConn) Close() error {
	err := net.ErrClosed
	c.closeOnce.Do(func() {
		close(c.closed)
		err = c.Conn.Close()
		if c.onClose != nil {
			c.onClose()
		}
	})
	return err
}

// CloseWrite half-closes the channel, when the underlying conn can.
func (c *deadlineConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// openDirect opens a direct-tcpip channel to 127.0.0.1:port in the
// sandbox, as ssh.Client.DialContext does, but without the goroutine that
// copies the channel's extended data into io.Discard for as long as the
// channel is open: with its 8 KiB buffer and its stack it was a third of
// an idle websocket's memory. A direct-tcpip channel carries no extended
// data (RFC 4254 §7.2); what a sandbox sends there anyway is held within
// the channel's window, which it shares with the data, so it can stall
// only its own channel and holds no more than a slow reader's data can.
// The channel's requests (none are defined) are still answered.
func openDirect(ctx context.Context, c *ssh.Client, port int) (net.Conn, error) {
	msg := ssh.Marshal(&struct {
		Host       string
		Port       uint32
		OriginHost string
		OriginPort uint32
	}{"127.0.0.1", uint32(port), "0.0.0.0", 0})
	type opened struct {
		ch  ssh.Channel
		err error
	}
	done := make(chan opened, 1)
	go func() {
		ch, reqs, err := c.OpenChannel("direct-tcpip", msg)
		if err == nil {
			go ssh.DiscardRequests(reqs)
		}
		done <- opened{ch, err}
	}()
	select {
	case o := <-done:
		if o.err != nil {
			return nil, o.err
		}
		return channelConn{o.ch}, nil
	case <-ctx.Done():
		go func() {
			if o := <-done; o.err == nil {
				o.ch.Close()
			}
		}()
		return nil, ctx.Err()
	}
}

// channelConn is a channel as a net.Conn; deadlineConn gives it its
// deadlines.
type channelConn struct{ ssh.Channel }

var zeroAddr = &net.TCPAddr{IP: net.IPv4zero}

func (channelConn) LocalAddr() net.Addr              { return zeroAddr }
func (channelConn) RemoteAddr() net.Addr             { return zeroAddr }
func (channelConn) SetDeadline(time.Time) error      { return errors.ErrUnsupported }
func (channelConn) SetReadDeadline(time.Time) error  { return errors.ErrUnsupported }
func (channelConn) SetWriteDeadline(time.Time) error { return errors.ErrUnsupported }
