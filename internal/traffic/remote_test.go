package traffic_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"froog.tech/froog/internal/traffic"
)

// fakeEdge is one edge's rings in memory: one URL's list, newest first.
type fakeEdge struct{ list []traffic.Exchange }

func (f *fakeEdge) Requests(urlID string, q traffic.Query) ([]traffic.Exchange, error) {
	if urlID != "u1" {
		return []traffic.Exchange{}, nil
	}
	return f.list, nil
}

func (f *fakeEdge) Follow(ctx context.Context, urlID, after string, send func(traffic.Exchange) error) error {
	start := len(f.list) - 1 // the oldest; after the one named, as an edge does
	if i := slices.IndexFunc(f.list, func(x traffic.Exchange) bool { return x.ID == after }); i >= 0 {
		start = i - 1
	}
	for i := start; i >= 0; i-- {
		if err := send(f.list[i]); err != nil {
			return err
		}
	}
	return traffic.ErrNotFound // the URL went
}

func (f *fakeEdge) Replay(ctx context.Context, urlID, id string) (traffic.Exchange, error) {
	for _, x := range f.list {
		if x.ID == id {
			if x.Capture == nil {
				return traffic.Exchange{}, traffic.ErrNotCaptured
			}
			return traffic.Exchange{ID: "new-" + id, ReplayOf: id, Client: x.Client, Capture: x.Capture}, nil
		}
	}
	return traffic.Exchange{}, traffic.ErrNotFound
}

// Two edges' Handlers read through one Remote: the lists merged newest
// first and paged; followed, every edge's exchanges, and the end once
// the URL is gone; a replay reaches the edge that keeps the exchange;
// a wrong key reads nothing.
func TestRemote(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	x := func(id string, sec int, captured bool) traffic.Exchange {
		e := traffic.Exchange{ID: id, At: at.Add(time.Duration(sec) * time.Second), Client: netip.MustParseAddr("192.0.2.1"), Dial: -1}
		if captured {
			e.Capture = &traffic.Capture{Request: traffic.Message{Headers: []traffic.Header{{Name: "A", Value: "b"}}, Body: []byte{0, 1, 2}}}
		}
		return e
	}
	one := &fakeEdge{list: []traffic.Exchange{x("a3", 5, true), x("a1", 1, false)}}
	two := &fakeEdge{list: []traffic.Exchange{x("b4", 7, false), x("b2", 3, true)}}
	var edges []string
	for _, f := range []*fakeEdge{one, two} {
		srv := httptest.NewServer(traffic.Handler(f, "k3y"))
		t.Cleanup(srv.Close)
		edges = append(edges, srv.URL)
	}
	rm := &traffic.Remote{Edges: edges, Key: "k3y"}
	ids := func(l []traffic.Exchange) string {
		var s []string
		for _, x := range l {
			s = append(s, x.ID)
		}
		return strings.Join(s, ",")
	}
	tests := []struct {
		q    traffic.Query
		want string
	}{
		{traffic.Query{}, "b4,a3,b2,a1"},
		{traffic.Query{Limit: 2}, "b4,a3"},
		{traffic.Query{Before: "a3", Limit: 1}, "b2"},
	}
	for _, tc := range tests {
		got, err := rm.Requests("u1", tc.q)
		if err != nil || ids(got) != tc.want {
			t.Errorf("Requests(%+v): got %s, %v; want %s", tc.q, ids(got), err, tc.want)
		}
	}
	if got, _ := rm.Requests("u1", traffic.Query{}); got[1].Capture == nil || !slices.Equal(got[1].Capture.Request.Body, []byte{0, 1, 2}) || got[1].Client.String() != "192.0.2.1" {
		t.Errorf("the capture over the wire: %+v", got[1])
	}
	if _, err := rm.Requests("u1", traffic.Query{Before: "zz"}); !errors.Is(err, traffic.ErrNotFound) {
		t.Errorf("before an id no edge keeps: %v", err)
	}

	var followed []string
	err := rm.Follow(context.Background(), "u1", "", func(x traffic.Exchange) error { followed = append(followed, x.ID); return nil })
	slices.Sort(followed)
	if !errors.Is(err, traffic.ErrNotFound) || strings.Join(followed, ",") != "a1,a3,b2,b4" {
		t.Errorf("Follow: got %v, %v", followed, err)
	}

	// Followed again from the last event a client saw, a3 of edge one:
	// edge one goes on after it, edge two with what ended after it did,
	// nothing twice. From an id no edge keeps, everything.
	for _, tc := range []struct{ after, want string }{{"a3", "b4"}, {"b2", "a3,b4"}, {"gone", "a1,a3,b2,b4"}} {
		followed = nil
		rm.Follow(context.Background(), "u1", tc.after, func(x traffic.Exchange) error { followed = append(followed, x.ID); return nil })
		slices.Sort(followed)
		if got := strings.Join(followed, ","); got != tc.want {
			t.Errorf("Follow after %s: got %s, want %s", tc.after, got, tc.want)
		}
	}

	if r, err := rm.Replay(context.Background(), "u1", "b2"); err != nil || r.ReplayOf != "b2" {
		t.Errorf("Replay b2: got %+v, %v", r, err)
	}
	if _, err := rm.Replay(context.Background(), "u1", "a1"); !errors.Is(err, traffic.ErrNotCaptured) {
		t.Errorf("Replay of one not captured: %v", err)
	}
	if _, err := rm.Replay(context.Background(), "u1", "zz"); !errors.Is(err, traffic.ErrNotFound) {
		t.Errorf("Replay of one no edge keeps: %v", err)
	}

	wrong := &traffic.Remote{Edges: edges, Key: "nope"}
	if _, err := wrong.Requests("u1", traffic.Query{}); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("a wrong key: %v", err)
	}
	if _, err := wrong.Replay(context.Background(), "u1", "b2"); err == nil || errors.Is(err, traffic.ErrNotFound) {
		t.Errorf("a wrong key's replay: %v", err)
	}
}
