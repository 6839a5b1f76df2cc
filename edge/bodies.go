package edge

import (
	"errors"
	"io"
	"sync/atomic"
	"time"
)

// A body as the edge reads it, a request's from the client or an
// answer's from the sandbox: counted for the log, a request's paced (the
// client must keep sending), and both capped by the URL's bandwidth
// (bandwidth.go).

// countingReader counts what is read through it into n, and keeps the
// first error other than io.EOF: for a request body, the client's. For
// a request body it also keeps the client moving (deadline set): each
// read must bring bytes within BodyIdleTimeout, and past that long from
// the first read the body must average MinBodyRate, or it fails with
// errBodyTooSlow. Upgraded connections (websockets) have no body. n is
// atomic: HTTP/2's request body may still be read by the proxy's writer
// while the exchange is logged.
type countingReader struct {
	r   io.Reader
	n   *atomic.Int64
	err error

	deadline func(time.Time) error // nil: no pace (a response body)
	idle     time.Duration
	rate     float64 // bytes a second
	start    time.Time
	bw       *byteBucket // the URL's bandwidth cap (bandwidth.go); nil: none
	tap      *bodyTap    // the exchange's capture (capture.go); nil: none
}

// errBodyTooSlow: a client sent its request body too slowly.
var errBodyTooSlow = errors.New("request body too slow")

func (c *countingReader) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err // some callers drop an error that comes with bytes
	}
	if c.deadline != nil {
		now := time.Now()
		if c.start.IsZero() {
			c.start = now
		}
		c.deadline(now.Add(c.idle))
	}
	n, err := c.r.Read(p)
	total := c.n.Add(int64(n))
	c.tap.write(p[:n])
	// The cap's wait is the edge's, not the client's slowness.
	c.start = c.start.Add(c.bw.take(n))
	if err != nil && err != io.EOF {
		c.err = err
	}
	if c.deadline != nil && err == nil {
		if el := time.Since(c.start); el > c.idle && float64(total) < c.rate*el.Seconds() {
			c.err = errBodyTooSlow // returned by the next Read
		}
	}
	return n, err
}

// paced makes c a request body's reader, paced by the edge's options;
// deadline sets the read deadline of the client's connection or stream.
func (s *Server) paced(c *countingReader, deadline func(time.Time) error) {
	c.deadline, c.idle, c.rate = deadline, s.o.BodyIdleTimeout, s.o.MinBodyRate
}
