package edge

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// fakeDeadlineWriter counts the read deadlines set on it.
type fakeDeadlineWriter struct {
	http.ResponseWriter
	set int
}

func (w *fakeDeadlineWriter) SetReadDeadline(time.Time) error { w.set++; return nil }

// The request body's writer may read (and pace) the body after the
// handler has returned; the read deadline it sets then does not reach
// net/http, whose stream is gone (it dereferenced nil).
func TestNoReadDeadlineAfterTheHandler(t *testing.T) {
	w := &fakeDeadlineWriter{ResponseWriter: httptest.NewRecorder()}
	x := &h2Exchange{w: w}
	if err := x.setReadDeadline(time.Now()); err != nil || w.set != 1 {
		t.Fatalf("while the handler runs: %v, %d deadlines set", err, w.set)
	}
	x.end()
	if err := x.setReadDeadline(time.Now()); err != errExchangeEnded || w.set != 1 {
		t.Fatalf("after the handler: %v, %d deadlines set; want errExchangeEnded and none more", err, w.set)
	}
}
