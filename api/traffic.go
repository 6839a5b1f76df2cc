package api

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"froog.tech/froog/internal/traffic"
)

// A URL's recent traffic as its owner reads it: the exchanges the edge
// keeps in its request ring (GET …/requests, newest first, or followed
// live as server-sent events), and a captured request sent again (POST
// …/requests/{id}/replay).
//
// The rings are the edge's, in its memory: they are many small writes a
// second that only their owner reads, and nothing captured may be
// written to disk, so they do not go through the store (its change feed
// would carry every exchange to every process). The API asks the edges
// instead, through Traffic, which froogd wires to the edge of its own
// process (froogd dev) or, apart from the edges (froogd api
// --edge-traffic), to every edge's internal listener, merged
// (internal/traffic's Remote). An API with neither answers 501
// traffic_unavailable.

// Traffic is the request rings of an edge (package edge implements it).
type Traffic interface {
	// Requests gives a URL's exchanges, newest first
	// (traffic.ErrNotFound: q.Before is not kept).
	Requests(urlID string, q traffic.Query) ([]traffic.Exchange, error)
	// Follow sends the exchanges kept after the one whose id is after
	// (all kept, for ""), then each new one, until ctx ends (nil), send
	// fails, or the URL goes (traffic.ErrNotFound).
	Follow(ctx context.Context, urlID, after string, send func(traffic.Exchange) error) error
	// Replay sends a captured exchange's request again and returns the
	// new exchange (traffic.ErrNotFound, traffic.ErrNotCaptured).
	Replay(ctx context.Context, urlID, id string) (traffic.Exchange, error)
}

// The requests list's limit, default and most.
const (
	defaultRequests = 50
	maxRequests     = 100
)

type exchangeView struct {
	ID       string    `json:"id"`
	ReplayOf string    `json:"replay_of,omitempty"`
	At       time.Time `json:"at"`
	Proto    string    `json:"proto"`
	Method   string    `json:"method"`
	Path     string    `json:"path"`
	Query    string    `json:"query"`
	Status   int       `json:"status"`
	Client   string    `json:"client"`
	BytesIn  int64     `json:"bytes_in"`
	BytesOut int64     `json:"bytes_out"`
	// The stages, in milliseconds; null: the stage did not happen.
	DialMs      *float64     `json:"dial_ms"`
	FirstByteMs *float64     `json:"first_byte_ms"`
	TotalMs     float64      `json:"total_ms"`
	Captured    bool         `json:"captured"`
	Request     *messageView `json:"request,omitempty"`
	Response    *messageView `json:"response,omitempty"`
}

type messageView struct {
	Headers []headerView `json:"headers"`
	// Body is the text of the body's first bytes when they are UTF-8,
	// else their base64 (BodyEncoding says which).
	Body         string `json:"body"`
	BodyEncoding string `json:"body_encoding"`
	Truncated    bool   `json:"truncated"`
}

type headerView struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func stageMillis(d time.Duration) *float64 {
	if d < 0 {
		return nil
	}
	ms := millis(d)
	return &ms
}

func viewExchange(x *traffic.Exchange) exchangeView {
	v := exchangeView{ID: x.ID, ReplayOf: x.ReplayOf, At: x.At.UTC(), Proto: x.Proto, Method: x.Method, Path: x.Path, Query: x.Query,
		Status: x.Status, BytesIn: x.BytesIn, BytesOut: x.BytesOut, DialMs: stageMillis(x.Dial), FirstByteMs: stageMillis(x.FirstByte),
		TotalMs: millis(x.Total), Captured: x.Capture != nil}
	if x.Client.IsValid() {
		v.Client = x.Client.String()
	}
	if c := x.Capture; c != nil {
		v.Request, v.Response = viewMessage(&c.Request), viewMessage(&c.Response)
	}
	return v
}

func viewMessage(m *traffic.Message) *messageView {
	v := &messageView{Headers: make([]headerView, len(m.Headers)), Body: string(m.Body), BodyEncoding: "text", Truncated: m.Truncated}
	for i, h := range m.Headers {
		v.Headers[i] = headerView{Name: h.Name, Value: h.Value}
	}
	if !utf8.Valid(m.Body) {
		v.Body, v.BodyEncoding = base64.StdEncoding.EncodeToString(m.Body), "base64"
	}
	return v
}

// errNoTraffic: this API has no edge to ask.
var errNoTraffic = errorf(http.StatusNotImplemented, "traffic_unavailable",
	"this API has no edge to ask for URLs' traffic, which the edges keep in their own memory: run froogd api with --edge-traffic naming the edges' --traffic-addr")

// wantsEvents reports whether a requests list is to be followed live:
// ?follow=1, or Accept: text/event-stream.
func wantsEvents(r *http.Request) bool {
	f := r.URL.Query().Get("follow")
	return f == "1" || f == "true" || strings.Contains(r.Header.Get("Accept"), "text/event-stream")
}

func (s *Server) listRequests(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	limit := defaultRequests
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxRequests {
			return invalid("limit must be a number from 1 to %d", maxRequests)
		}
		limit = n
	}
	if f := q.Get("follow"); f != "" && f != "1" && f != "true" && f != "0" && f != "false" {
		return invalid("follow must be 1 or 0")
	}
	before, after := q.Get("before"), q.Get("after")
	if before != "" && after != "" {
		return invalid("before and after go one at a time: before pages back, after follows on")
	}
	sb, u, err := s.urlFor(r)
	if err != nil {
		return err
	}
	if s.traffic == nil {
		return errNoTraffic
	}
	if wantsEvents(r) {
		if before != "" {
			return invalid("before pages back through the list; a followed list starts after an id (after, or Last-Event-ID)")
		}
		if after == "" {
			after = r.Header.Get("Last-Event-ID")
		}
		return s.followRequests(w, r, u.ID, after)
	}
	if after != "" {
		return invalid("after starts a followed list (follow=1); a list pages back with before")
	}
	list, err := s.traffic.Requests(u.ID, traffic.Query{Limit: limit, Before: before})
	if errors.Is(err, traffic.ErrNotFound) {
		return errorf(http.StatusNotFound, "not_found", "port %d of %s keeps no request %q (the ring keeps the last %d)", u.Port, sb.Name, before, maxRequests)
	}
	if err != nil {
		return err
	}
	out := make([]exchangeView, len(list))
	for i := range list {
		out[i] = viewExchange(&list[i])
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// followRequests streams a URL's exchanges as server-sent events: one
// "request" event each (its id the exchange's, for Last-Event-ID), and an
// "end" event when the URL goes.
func (s *Server) followRequests(w http.ResponseWriter, r *http.Request, urlID, after string) error {
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	rc.Flush()
	err := s.traffic.Follow(r.Context(), urlID, after, func(x traffic.Exchange) error {
		b, err := json.Marshal(viewExchange(&x))
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "id: %s\nevent: request\ndata: %s\n\n", x.ID, b); err != nil {
			return err
		}
		return rc.Flush()
	})
	if errors.Is(err, traffic.ErrNotFound) {
		fmt.Fprintf(w, "event: end\ndata: {\"reason\":\"url_removed\"}\n\n")
		rc.Flush()
	}
	return nil // the answer has begun: a failed write is the client gone
}

func (s *Server) replayRequest(w http.ResponseWriter, r *http.Request) error {
	sb, u, err := s.urlFor(r)
	if err != nil {
		return err
	}
	if s.traffic == nil {
		return errNoTraffic
	}
	id := r.PathValue("id")
	x, err := s.traffic.Replay(r.Context(), u.ID, id)
	switch {
	case errors.Is(err, traffic.ErrNotFound):
		return errorf(http.StatusNotFound, "not_found", "port %d of %s keeps no request %q", u.Port, sb.Name, id)
	case errors.Is(err, traffic.ErrNotCaptured):
		return errorf(http.StatusConflict, "not_captured", "request %q was not captured whole (capture was off, its capture was dropped, or its body was longer than %d bytes): only captured requests can be sent again", id, traffic.MaxBody)
	case err != nil:
		return err
	}
	writeJSON(w, http.StatusOK, viewExchange(&x))
	return nil
}
