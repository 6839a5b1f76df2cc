// Package traffic is the shape of a URL's recent traffic as its owner
// reads it: one exchange's record, the query that pages through them and
// the errors of reading or replaying one. The edge keeps the records (its
// request rings) and the API shows them; this package holds the types
// both name, so that neither imports the other, and the wire between
// them when they run in different processes (remote.go: an edge's
// Handler, and the API's Remote over several edges).
package traffic

import (
	"errors"
	"net/netip"
	"time"
)

// Exchange is one request to a URL and its answer, as the edge recorded
// it. Its strings hold no URL token (the query's _token is gone) and,
// when captured, no cookie, Authorization or token value.
type Exchange struct {
	ID string // the request's X-Request-Id
	// ReplayOf is the id of the exchange this one replayed; "": none.
	ReplayOf string
	At       time.Time // when the request came
	Proto    string    // HTTP/1.1, HTTP/2.0, HTTP/3.0
	Method   string
	Path     string // as sent, without the query
	Query    string // as sent, without _token; "": none
	Status   int
	Client   netip.Addr // the connection's source
	// The bodies' bytes, as they passed the edge.
	BytesIn, BytesOut int64
	// Dial is how long the dial to the app took; -1: none was made (a
	// pooled connection, or the request never went to the app).
	Dial time.Duration
	// FirstByte is from the request's start to the app's answer's head;
	// -1: no answer came from the app.
	FirstByte time.Duration
	Total     time.Duration // from the request's start to its end
	// Capture is what the edge kept of the request and the answer when
	// the URL's owner turned capture on; nil: none.
	Capture *Capture
}

// Capture is the part of an exchange kept only when capture is on: the
// headers, redacted, and the start of each body.
type Capture struct {
	Request, Response Message
}

// Message is one side's captured headers and body.
type Message struct {
	Headers []Header
	Body    []byte // the first MaxBody bytes
	// Truncated: the body was longer than what is kept.
	Truncated bool
}

// Header is one header field, in the order it came.
type Header struct{ Name, Value string }

// MaxBody is how much of each body a capture keeps.
const MaxBody = 10 << 10

// Redacted is what a secret's value reads as in a capture.
const Redacted = "[redacted]"

// Query pages through a URL's exchanges, newest first.
type Query struct {
	Limit int // at most this many; 0: all there are
	// Before, when set, is an exchange's id: only older ones are given.
	Before string
}

var (
	// ErrNotFound: no such exchange (or URL) is kept.
	ErrNotFound = errors.New("no such exchange is kept")
	// ErrNotCaptured: the exchange was not captured whole (capture was
	// off, its capture was dropped, or its request body was cut), so it
	// cannot be sent again.
	ErrNotCaptured = errors.New("the exchange was not captured whole")
)
