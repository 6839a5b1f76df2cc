package api_test

import (
	"bufio"
	"context"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"froog.tech/froog/api"
	"froog.tech/froog/internal/traffic"
	"froog.tech/froog/store"
)

// fakeTraffic is an edge's request rings in memory, one URL's list each;
// it notes what it was asked.
type fakeTraffic struct {
	mu       sync.Mutex
	byURL    map[string][]traffic.Exchange // newest first
	asked    []string                      // url ids asked, in order
	replayed []string
}

func (f *fakeTraffic) Requests(urlID string, q traffic.Query) ([]traffic.Exchange, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, urlID)
	list := f.byURL[urlID]
	if q.Before != "" {
		i := 0
		for i < len(list) && list[i].ID != q.Before {
			i++
		}
		if i == len(list) {
			return nil, traffic.ErrNotFound
		}
		list = list[i+1:]
	}
	if q.Limit > 0 && len(list) > q.Limit {
		list = list[:q.Limit]
	}
	return list, nil
}

func (f *fakeTraffic) Follow(ctx context.Context, urlID, after string, send func(traffic.Exchange) error) error {
	f.mu.Lock()
	list := f.byURL[urlID]
	f.mu.Unlock()
	for i := len(list) - 1; i >= 0; i-- {
		if err := send(list[i]); err != nil {
			return err
		}
	}
	return traffic.ErrNotFound // as if the URL were removed: the stream ends
}

func (f *fakeTraffic) Replay(ctx context.Context, urlID, id string) (traffic.Exchange, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, x := range f.byURL[urlID] {
		if x.ID != id {
			continue
		}
		if x.Capture == nil {
			return traffic.Exchange{}, traffic.ErrNotCaptured
		}
		f.replayed = append(f.replayed, id)
		return traffic.Exchange{ID: "req_new", ReplayOf: id, Method: x.Method, Path: x.Path, Status: 200, Dial: -1, FirstByte: time.Millisecond, Capture: x.Capture}, nil
	}
	return traffic.Exchange{}, traffic.ErrNotFound
}

// capture is off by default, on when asked (and audited), kept when
// absent, off again when the URL changes between public and private, and
// on or off by PATCH without a new token.
func TestURLCapture(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "box"}).want(t, 202, "")
		var u struct {
			URL     string `json:"url"`
			Capture *bool  `json:"capture"`
		}
		e.do("POST", "/v1/sandboxes/box/urls", e.admin, map[string]any{"port": 3000}).want(t, 201, "").json(t, &u)
		if u.Capture == nil || *u.Capture {
			t.Fatalf("a new URL: capture %v, want false", u.Capture)
		}
		e.do("POST", "/v1/sandboxes/box/urls", e.admin, map[string]any{"port": 3000, "capture": "yes"}).want(t, 400, "")
		e.do("POST", "/v1/sandboxes/box/urls", e.admin, map[string]any{"port": 3000, "capture": true}).want(t, 200, "").json(t, &u)
		if !*u.Capture || !storedURL(t, e, "box", 3000).Capture {
			t.Fatal("capture true: not on")
		}
		e.do("POST", "/v1/sandboxes/box/urls", e.admin, map[string]any{"port": 3000}).want(t, 200, "").json(t, &u)
		if !*u.Capture {
			t.Fatal("capture absent turned it off")
		}
		e.do("POST", "/v1/sandboxes/box/urls", e.admin, map[string]any{"port": 3000, "public": true}).want(t, 200, "").json(t, &u)
		if *u.Capture || storedURL(t, e, "box", 3000).Capture {
			t.Fatal("made public: capture still on")
		}
		link := e.do("PATCH", "/v1/sandboxes/box/urls/3000", e.admin, map[string]any{"capture": true}).want(t, 200, "")
		link.json(t, &u)
		if !*u.Capture {
			t.Fatal("PATCH capture true: not on")
		}
		e.do("PATCH", "/v1/sandboxes/box/urls/3000", e.admin, map[string]any{"capture": 1}).want(t, 400, "")
		var events struct {
			Events []struct {
				Action string
				Detail map[string]string
			} `json:"events"`
		}
		e.do("GET", "/v1/audit?limit=50", e.admin, nil).want(t, 200, "").json(t, &events)
		var got []string
		for _, ev := range events.Events {
			if c, ok := ev.Detail["capture"]; ok {
				got = append(got, ev.Action+" "+c)
			}
		}
		// Newest first: the PATCH, the change to public, the POST on.
		if want := []string{"url.update true", "url.update false", "url.update true"}; strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("audited capture changes: got %v, want %v", got, want)
		}
	})
}

// The requests routes: what the edge keeps, as JSON or server-sent
// events; malformed queries refused before the edge is asked; a key's
// scope and actions; an API without an edge says so.
func TestURLRequests(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			ft := &fakeTraffic{byURL: map[string][]traffic.Exchange{}}
			e := newEnv(t, b.open(t), api.Options{Traffic: ft})
			e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "box"}).want(t, 202, "")
			e.do("POST", "/v1/sandboxes", e.admin, map[string]any{"name": "other"}).want(t, 202, "")
			e.do("POST", "/v1/sandboxes/box/urls", e.admin, map[string]any{"port": 3000, "capture": true}).want(t, 201, "")
			e.do("POST", "/v1/sandboxes/box/urls", e.admin, map[string]any{"port": 4000}).want(t, 201, "")
			urlID := storedURL(t, e, "box", 3000).ID
			captured := &traffic.Capture{
				Request:  traffic.Message{Headers: []traffic.Header{{Name: "Cookie", Value: "sid=" + traffic.Redacted}}, Body: []byte(`{"a":1}`)},
				Response: traffic.Message{Body: []byte{0xff, 0x00}, Truncated: true},
			}
			ft.byURL[urlID] = []traffic.Exchange{
				{ID: "req_3", Method: "GET", Path: "/c", Status: 200, Client: netip.MustParseAddr("192.0.2.1"), Dial: -1, FirstByte: -1, Total: 2 * time.Millisecond},
				{ID: "req_2", Method: "POST", Path: "/b", Query: "x=1", Status: 201, Dial: time.Millisecond, FirstByte: 3 * time.Millisecond, Total: 4 * time.Millisecond, Capture: captured},
				{ID: "req_1", Method: "GET", Path: "/a", Status: 404, Dial: -1, FirstByte: -1},
			}
			reader := e.key("reader", "sandbox.read")
			elsewhere := e.keyWith("elsewhere", func(k *store.APIKey) { k.Sandboxes = []string{"other"} }, "*")
			noRead := e.key("none", "account.read")
			const list, replay = "/v1/sandboxes/box/urls/3000/requests", "/v1/sandboxes/box/urls/3000/requests/req_2/replay"
			tests := []struct {
				name, method, path, key string
				status                  int
				code                    string
			}{
				{"the list", "GET", list, reader, 200, ""},
				{"limit 0", "GET", list + "?limit=0", reader, 400, "invalid_value"},
				{"limit 101", "GET", list + "?limit=101", reader, 400, "invalid_value"},
				{"limit not a number", "GET", list + "?limit=ten", reader, 400, "invalid_value"},
				{"follow 2", "GET", list + "?follow=2", reader, 400, "invalid_value"},
				{"before and after", "GET", list + "?before=req_2&after=req_1", reader, 400, "invalid_value"},
				{"after without follow", "GET", list + "?after=req_1", reader, 400, "invalid_value"},
				{"follow with before", "GET", list + "?follow=1&before=req_2", reader, 400, "invalid_value"},
				{"before an id not kept", "GET", list + "?before=req_9", reader, 404, "not_found"},
				{"a port with no URL", "GET", "/v1/sandboxes/box/urls/5000/requests", reader, 404, "not_found"},
				{"a port out of range", "GET", "/v1/sandboxes/box/urls/70000/requests", reader, 400, "invalid_value"},
				{"no such sandbox", "GET", "/v1/sandboxes/nobox/urls/3000/requests", reader, 404, "not_found"},
				{"a key for another sandbox", "GET", list, elsewhere, 403, "api_key_sandbox_forbidden"},
				{"a key without sandbox.read", "GET", list, noRead, 403, ""},
				{"no key", "GET", list, "", 401, ""},
				{"replay with sandbox.read alone", "POST", replay, reader, 403, ""},
				{"replay from a key for another sandbox", "POST", replay, elsewhere, 403, "api_key_sandbox_forbidden"},
				{"replay of an id not kept", "POST", "/v1/sandboxes/box/urls/3000/requests/req_9/replay", e.admin, 404, "not_found"},
				{"replay of one not captured", "POST", "/v1/sandboxes/box/urls/3000/requests/req_3/replay", e.admin, 409, "not_captured"},
				{"replay", "POST", replay, e.admin, 200, ""},
			}
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) { e.do(tc.method, tc.path, tc.key, nil).want(t, tc.status, tc.code) })
			}
			if len(ft.replayed) != 1 || ft.replayed[0] != "req_2" {
				t.Fatalf("replays the edge was asked: %v", ft.replayed)
			}
			for _, id := range ft.asked {
				if id != urlID {
					t.Fatalf("the edge was asked for URL %s, want only %s", id, urlID)
				}
			}

			var got []struct {
				ID          string   `json:"id"`
				Query       string   `json:"query"`
				DialMs      *float64 `json:"dial_ms"`
				FirstByteMs *float64 `json:"first_byte_ms"`
				Captured    bool     `json:"captured"`
				Request     *struct {
					Headers []struct{ Name, Value string } `json:"headers"`
					Body    string                         `json:"body"`
				} `json:"request"`
				Response *struct {
					Body         string `json:"body"`
					BodyEncoding string `json:"body_encoding"`
					Truncated    bool   `json:"truncated"`
				} `json:"response"`
			}
			e.do("GET", list+"?limit=2", reader, nil).want(t, 200, "").json(t, &got)
			if len(got) != 2 || got[0].ID != "req_3" || got[1].ID != "req_2" || got[0].DialMs != nil || got[0].Captured || got[0].Request != nil {
				t.Fatalf("limit 2: got %+v", got)
			}
			if x := got[1]; !x.Captured || x.Query != "x=1" || *x.DialMs != 1 || *x.FirstByteMs != 3 || x.Request.Body != `{"a":1}` ||
				x.Request.Headers[0].Value != "sid="+traffic.Redacted || x.Response.BodyEncoding != "base64" || x.Response.Body != "/wA=" || !x.Response.Truncated {
				t.Fatalf("the captured exchange: got %+v", x)
			}
			e.do("GET", list+"?before=req_2", reader, nil).want(t, 200, "").json(t, &got)
			if len(got) != 1 || got[0].ID != "req_1" {
				t.Fatalf("before req_2: got %+v", got)
			}

			// Followed: each exchange an event, oldest first, then the end.
			for _, how := range []struct{ query, accept string }{{"?follow=1", ""}, {"", "text/event-stream"}} {
				res := e.do("GET", list+how.query, reader, nil, "Accept", how.accept).want(t, 200, "")
				if ct := res.header.Get("Content-Type"); ct != "text/event-stream" {
					t.Fatalf("%s %s: Content-Type %q", how.query, how.accept, ct)
				}
				var ids []string
				sc := bufio.NewScanner(strings.NewReader(string(res.body)))
				for sc.Scan() {
					if id, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
						ids = append(ids, id)
					}
				}
				if strings.Join(ids, ",") != "req_1,req_2,req_3" || !strings.HasSuffix(string(res.body), "event: end\ndata: {\"reason\":\"url_removed\"}\n\n") {
					t.Fatalf("%s %s: got %s", how.query, how.accept, res.body)
				}
			}

			// An API without an edge: 501, once the URL is known.
			bare := newEnv(t, b.open(t), api.Options{})
			bare.do("POST", "/v1/sandboxes", bare.admin, map[string]any{"name": "box"}).want(t, 202, "")
			bare.do("GET", list, bare.admin, nil).want(t, 404, "not_found")
			bare.do("POST", "/v1/sandboxes/box/urls", bare.admin, map[string]any{"port": 3000}).want(t, 201, "")
			bare.do("GET", list, bare.admin, nil).want(t, 501, "traffic_unavailable")
			bare.do("POST", replay, bare.admin, nil).want(t, 501, "traffic_unavailable")
		})
	}
}

var _ api.Traffic = (*fakeTraffic)(nil)
