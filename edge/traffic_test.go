package edge

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"froog.tech/froog/edge/route"
	"froog.tech/froog/internal/traffic"
	"froog.tech/froog/store"
)

// seenApp answers with what it got (method, target, Froog-Replay, body)
// and sets a cookie from the one it got; it keeps the last request.
type seenApp struct {
	mu   sync.Mutex
	last string
}

func (a *seenApp) serve(ctx *fasthttp.RequestCtx) {
	got := fmt.Sprintf("%s %s replay=%q body=%q", ctx.Method(), ctx.Request.Header.RequestURI(), ctx.Request.Header.Peek("Froog-Replay"), ctx.Request.Body())
	a.mu.Lock()
	a.last = got
	a.mu.Unlock()
	ctx.Response.Header.Set("Set-Cookie", "sess="+string(ctx.Request.Header.Cookie("sid"))+"; Path=/; HttpOnly")
	ctx.Response.Header.Set("Content-Type", "text/plain")
	ctx.WriteString(got)
}

func (a *seenApp) seen() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.last
}

// setRoute replaces a fake table's route for host with edit's copy, as
// the feed publishes a changed URL (routes are never changed in place).
func setRoute(f *fakeRoutes, host string, edit func(*route.Route)) {
	f.mu.Lock()
	rt := *f.routes[host]
	edit(&rt)
	f.routes[host] = &rt
	f.mu.Unlock()
	f.changed.Wake()
}

// The ring keeps every exchange of a URL, newest first, over both
// protocols, with its summary only while capture is off: no _token, no
// header, no body.
func TestTrafficRing(t *testing.T) {
	t.Parallel()
	app := &seenApp{}
	s, _, _ := newFakeEdge(t, app.serve)
	through(t, s, "h1", "GET", "app.froog.test", "/one?a=1&_token="+benchToken, nil, "")
	through(t, s, "h2", "POST", "app.froog.test", "/two?b=2", []field{{"Cookie", "sid=abcdefgh12345; __Host-froog_url=" + benchToken}}, "hello")
	through(t, s, "h1", "GET", "app.froog.test", "/three", nil, "")
	through(t, s, "h1", "GET", "pub.froog.test", "/elsewhere", nil, "")
	got, err := s.Requests("u1", traffic.Query{})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		method, path, query string
		status              int
	}{{"GET", "/three", "", 401}, {"POST", "/two", "b=2", 200}, {"GET", "/one", "a=1", 302}}
	if len(got) != len(want) {
		t.Fatalf("got %d exchanges, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		x := got[i]
		if x.Method != w.method || x.Path != w.path || x.Query != w.query || x.Status != w.status {
			t.Errorf("exchange %d: got %s %s ?%s %d, want %s %s ?%s %d", i, x.Method, x.Path, x.Query, x.Status, w.method, w.path, w.query, w.status)
		}
		if x.Capture != nil {
			t.Errorf("exchange %d: captured with capture off", i)
		}
		if x.Client.String() != "192.0.2.1" || x.ID == "" || x.Total <= 0 {
			t.Errorf("exchange %d: client %s, id %q, total %v", i, x.Client, x.ID, x.Total)
		}
	}
	if x := got[1]; x.BytesIn != 5 || x.BytesOut == 0 || x.FirstByte <= 0 || x.Proto != "HTTP/2.0" {
		t.Errorf("the proxied exchange: bytes in %d out %d, first byte %v, proto %s", x.BytesIn, x.BytesOut, x.FirstByte, x.Proto)
	}
	if x := got[2]; x.FirstByte != -1 || x.Dial != -1 {
		t.Errorf("the edge's own answer: dial %v, first byte %v, want -1 and -1", x.Dial, x.FirstByte)
	}
	// Paging: newest first, limit and before.
	page, err := s.Requests("u1", traffic.Query{Limit: 1, Before: got[0].ID})
	if err != nil || len(page) != 1 || page[0].ID != got[1].ID {
		t.Fatalf("before %s limit 1: got %+v, %v; want %s", got[0].ID, page, err, got[1].ID)
	}
	if _, err := s.Requests("u1", traffic.Query{Before: "req_gone"}); !errors.Is(err, traffic.ErrNotFound) {
		t.Fatalf("before an id not kept: got %v, want ErrNotFound", err)
	}
	if other, _ := s.Requests("u2", traffic.Query{}); len(other) != 1 || other[0].Path != "/elsewhere" {
		t.Fatalf("the other URL's ring: got %+v", other)
	}
}

// With capture on: headers and bodies are kept, redacted; a replay sends
// the request again to the app, marked, and is kept marked; capture
// turned off drops what was captured, and keeps nothing new.
func TestTrafficCaptureAndReplay(t *testing.T) {
	t.Parallel()
	for _, proto := range []string{"h1", "h2"} {
		t.Run(proto, func(t *testing.T) {
			t.Parallel()
			app := &seenApp{}
			s, rts, _ := newFakeEdge(t, app.serve)
			setRoute(rts, "app.froog.test", func(rt *route.Route) { rt.Capture = true })
			hdr := []field{{"Cookie", "sid=cookie-secret-1; __Host-froog_url=" + benchToken}, {"Authorization", "Bearer auth-secret-2"},
				{"Froog-Replay", "forged"}, {"X-Note", "keep me"}}
			a, _ := through(t, s, proto, "PUT", "app.froog.test", "/items/7?x=1", hdr, `{"n":7,"token":"`+benchToken+`"}`)
			if a.status != 200 {
				t.Fatalf("status %d: %s", a.status, a.body)
			}
			if seen := app.seen(); !strings.Contains(seen, `replay=""`) {
				t.Fatalf("a client's Froog-Replay reached the app: %s", seen)
			}
			list, _ := s.Requests("u1", traffic.Query{})
			if len(list) != 1 || list[0].Capture == nil {
				t.Fatalf("got %+v, want one captured exchange", list)
			}
			x := list[0]
			dump := fmt.Sprintf("%+v", x)
			for _, secret := range []string{benchToken, "cookie-secret-1", "auth-secret-2"} {
				if strings.Contains(dump, secret) {
					t.Errorf("the record holds %q: %s", secret, dump)
				}
			}
			req := x.Capture.Request
			if v := header(req.Headers, "Cookie"); v != "sid="+traffic.Redacted {
				t.Errorf("Cookie: got %q", v)
			}
			if v := header(req.Headers, "Authorization"); v != traffic.Redacted {
				t.Errorf("Authorization: got %q", v)
			}
			if v := header(req.Headers, "X-Note"); v != "keep me" {
				t.Errorf("X-Note: got %q", v)
			}
			if v := header(x.Capture.Response.Headers, "Set-Cookie"); v != "sess="+traffic.Redacted+"; Path=/; HttpOnly" {
				t.Errorf("Set-Cookie: got %q", v)
			}
			if string(req.Body) != `{"n":7,"token":"`+traffic.Redacted+`"}` || req.Truncated {
				t.Errorf("request body: got %q (truncated %v)", req.Body, req.Truncated)
			}
			if !strings.Contains(string(x.Capture.Response.Body), "PUT /items/7?x=1") {
				t.Errorf("response body: got %q", x.Capture.Response.Body)
			}

			rx, err := s.Replay(context.Background(), "u1", x.ID)
			if err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprintf(`PUT /items/7?x=1 replay=%q body=%q`, x.ID, req.Body)
			if seen := app.seen(); seen != want {
				t.Fatalf("the app got %s, want %s", seen, want)
			}
			if rx.ReplayOf != x.ID || rx.Status != 200 || rx.Capture == nil || header(rx.Capture.Request.Headers, "Froog-Replay") != x.ID {
				t.Fatalf("the replay's record: %+v", rx)
			}
			if list, _ := s.Requests("u1", traffic.Query{Limit: 1}); list[0].ID != rx.ID {
				t.Fatalf("the ring's newest is %s, want the replay %s", list[0].ID, rx.ID)
			}
			if _, err := s.Replay(context.Background(), "u1", "req_none"); !errors.Is(err, traffic.ErrNotFound) {
				t.Fatalf("replay of an unknown id: got %v", err)
			}

			// Capture off: the captures go, the summaries stay, nothing
			// new is captured, and nothing can be replayed.
			setRoute(rts, "app.froog.test", func(rt *route.Route) { rt.Capture = false })
			through(t, s, proto, "GET", "app.froog.test", "/after", hdr[:1], "")
			list, _ = s.Requests("u1", traffic.Query{})
			if len(list) != 3 {
				t.Fatalf("got %d exchanges, want 3", len(list))
			}
			for _, x := range list {
				if x.Capture != nil {
					t.Errorf("%s %s: still captured with capture off", x.Method, x.Path)
				}
			}
			if _, err := s.Replay(context.Background(), "u1", x.ID); !errors.Is(err, traffic.ErrNotCaptured) {
				t.Fatalf("replay with capture off: got %v, want ErrNotCaptured", err)
			}
			if n := s.traffic.usage(); n > ringCost+3*(entryCost+100) {
				t.Fatalf("the rings count %d bytes with no capture", n)
			}
		})
	}
}

func header(hs []traffic.Header, name string) string {
	for _, h := range hs {
		if strings.EqualFold(h.Name, name) {
			return h.Value
		}
	}
	return ""
}

// A URL made public (or private) loses its captures; a URL removed, its
// ring; both whether or not a request comes (KeepTraffic).
func TestTrafficFollowsTheURL(t *testing.T) {
	t.Parallel()
	s, rts, _ := newFakeEdge(t, okApp)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.KeepTraffic(ctx) }()
	defer func() { cancel(); <-done }()
	setRoute(rts, "pub.froog.test", func(rt *route.Route) { rt.Capture = true })
	through(t, s, "h1", "POST", "pub.froog.test", "/a", nil, "body")
	if l, _ := s.Requests("u2", traffic.Query{}); len(l) != 1 || l[0].Capture == nil {
		t.Fatalf("got %+v, want one captured", l)
	}
	setRoute(rts, "pub.froog.test", func(rt *route.Route) { rt.Public = false })
	waitFor(t, "the captures dropped", func() bool { return s.traffic.usage() < ringCost+entryCost+100 })
	rts.mu.Lock()
	delete(rts.routes, "pub.froog.test")
	rts.mu.Unlock()
	rts.changed.Wake()
	waitFor(t, "the ring dropped", func() bool { return s.traffic.usage() == 0 })
	if _, err := s.Requests("u2", traffic.Query{Before: "x"}); !errors.Is(err, traffic.ErrNotFound) {
		t.Fatalf("a removed URL: got %v", err)
	}
}

// waitFor polls cond until it holds, for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10 s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Follow sends what the ring has, then each new exchange as it comes,
// and ends when the URL goes.
func TestTrafficFollow(t *testing.T) {
	t.Parallel()
	s, rts, _ := newFakeEdge(t, okApp)
	through(t, s, "h1", "GET", "pub.froog.test", "/before", nil, "")
	got := make(chan traffic.Exchange, 10)
	done := make(chan error, 1)
	go func() {
		done <- s.Follow(context.Background(), "u2", "", func(x traffic.Exchange) error { got <- x; return nil })
	}()
	if x := <-got; x.Path != "/before" {
		t.Fatalf("first: got %s, want /before", x.Path)
	}
	through(t, s, "h2", "GET", "pub.froog.test", "/live", nil, "")
	if x := <-got; x.Path != "/live" {
		t.Fatalf("second: got %s, want /live", x.Path)
	}
	rts.mu.Lock()
	delete(rts.routes, "pub.froog.test")
	rts.mu.Unlock()
	rts.changed.Wake()
	if err := <-done; !errors.Is(err, traffic.ErrNotFound) {
		t.Fatalf("the URL removed: Follow returned %v, want ErrNotFound", err)
	}
	// No sweeper runs here: the read itself drops what the URL kept.
	if l, err := s.Requests("u2", traffic.Query{}); err != nil || len(l) != 0 || s.traffic.usage() != 0 {
		t.Fatalf("the URL removed: got %d exchanges, %v; the rings count %d bytes", len(l), err, s.traffic.usage())
	}
}

// The bounds: a URL's ring keeps 100 exchanges and 1 MiB of captures;
// the edge's rings together keep what their bound allows, the oldest
// exchanges dropped first, whatever their URL.
func TestTrafficBounds(t *testing.T) {
	t.Parallel()
	var tr rings
	rt := &route.Route{URLID: "u1", Capture: true}
	big := &traffic.Capture{Request: traffic.Message{Body: make([]byte, traffic.MaxBody)}, Response: traffic.Message{Body: make([]byte, traffic.MaxBody)}}
	for i := range 1000 {
		tr.add(rt, &traffic.Exchange{ID: fmt.Sprint(i), Capture: big})
	}
	r := tr.byURL["u1"]
	if r.n != ringExchanges || r.captured > ringCaptured || r.newest.x.ID != "999" || r.oldest.x.ID != "900" {
		t.Fatalf("one URL: %d exchanges, %d captured bytes, newest %s, oldest %s", r.n, r.captured, r.newest.x.ID, r.oldest.x.ID)
	}
	if r.newest.x.Capture == nil || r.oldest.x.Capture != nil {
		t.Fatal("the newest lost its capture, or the oldest kept it")
	}
	// Many URLs: the edge's bound, oldest first.
	for i := range 5000 {
		tr.add(&route.Route{URLID: fmt.Sprint("v", i), Capture: true}, &traffic.Exchange{ID: fmt.Sprint(i), Capture: big})
		if tr.bytes > edgeTraffic {
			t.Fatalf("after %d URLs: %d bytes, over %d", i, tr.bytes, edgeTraffic)
		}
	}
	if tr.byURL["u1"] != nil || tr.byURL["v0"] != nil || tr.byURL["v4999"] == nil {
		t.Fatal("the edge's bound did not drop the oldest exchanges first")
	}
	var sum int64
	for _, r := range tr.byURL {
		sum += ringCost
		for e := r.oldest; e != nil; e = e.newer() {
			sum += e.size
		}
	}
	if sum != tr.bytes {
		t.Fatalf("the count is %d, the entries add up to %d", tr.bytes, sum)
	}
}

// A flood of captured requests to one URL, through the pipeline: the
// heap does not grow with it (the ring keeps 1 MiB of captures).
func TestTrafficFloodHeap(t *testing.T) {
	// Not parallel: it reads the process's heap.
	s, rts, _ := newFakeEdge(t, (&seenApp{}).serve)
	setRoute(rts, "pub.froog.test", func(rt *route.Route) { rt.Capture = true })
	body := strings.Repeat("x", 16<<10)
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	flood := func(n int) {
		for range n {
			if a, _ := through(t, s, "h2", "POST", "pub.froog.test", "/flood", nil, body); a.status != 200 {
				t.Fatalf("status %d", a.status)
			}
		}
	}
	flood(200) // the ring full: its captures at their bound
	before := heap()
	flood(3000) // 3000 × 16 KiB sent, 3000 × 20 KiB captured
	after := heap()
	if after > before+4<<20 {
		t.Fatalf("the heap grew from %d to %d bytes over the flood", before, after)
	}
	if n := s.traffic.usage(); n > ringCaptured+ringCost+ringExchanges*(entryCost+64) {
		t.Fatalf("the ring counts %d bytes", n)
	}
	l, _ := s.Requests("u2", traffic.Query{})
	if len(l) != ringExchanges {
		t.Fatalf("got %d exchanges, want %d", len(l), ringExchanges)
	}
	t.Logf("heap before %d, after %d; the ring counts %d bytes", before, after, s.traffic.usage())
}

// With capture off, recording an exchange in a full ring allocates
// nothing: a few fields are copied.
func TestTrafficKeepAllocs(t *testing.T) {
	// Not parallel: testing.AllocsPerRun refuses to run beside others.
	s, rts, _ := newFakeEdge(t, okApp)
	rts.mu.Lock()
	rt := rts.routes["pub.froog.test"]
	rts.mu.Unlock()
	rec := &record{id: "req_1", start: time.Now(), proto: "HTTP/1.1", method: "GET", path: "/x", status: 200, rt: rt, dial: -1, firstByte: -1}
	for range ringExchanges {
		s.keep(rec, time.Millisecond)
	}
	if n := testing.AllocsPerRun(200, func() { s.keep(rec, time.Millisecond) }); n != 0 {
		t.Fatalf("keep allocates %v times a record with capture off", n)
	}
}

// froog_edge_traffic_bytes reads what the rings hold, as their bound
// counts it.
func TestTrafficMetric(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	rts := &fakeRoutes{routes: map[string]*route.Route{"pub.froog.test": {URLID: "u2", Host: "pub", SandboxID: "sb1", Port: 8080, Public: true}},
		boxes: map[string]*route.Sandbox{"sb1": {ID: "sb1", State: store.StateRunning, DesiredState: store.StateRunning, Endpoint: "h:22"}}}
	s, err := New(Options{Routes: rts, Dialer: &fakePipeDialer{app: okApp}, Sandboxes: fakeNoStarts{}, RateLimit: -1, Registerer: reg,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return nil, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	through(t, s, "h1", "GET", "pub.froog.test", "/", nil, "")
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "froog_edge_traffic_bytes" {
			if got, want := f.GetMetric()[0].GetGauge().GetValue(), float64(s.traffic.usage()); got != want || got == 0 {
				t.Fatalf("froog_edge_traffic_bytes %v, want %v (not 0)", got, want)
			}
			return
		}
	}
	t.Fatal("no froog_edge_traffic_bytes")
}

// A replay for a sandbox that is not running is held, as a client's
// request is, and reaches the app once the sandbox runs.
func TestTrafficReplayHeld(t *testing.T) {
	t.Parallel()
	app := &seenApp{}
	s, rts, _ := newFakeEdge(t, app.serve)
	setRoute(rts, "pub.froog.test", func(rt *route.Route) { rt.Capture = true })
	through(t, s, "h2", "POST", "pub.froog.test", "/hook", nil, "payload")
	list, _ := s.Requests("u2", traffic.Query{})
	if len(list) != 1 || list[0].Capture == nil {
		t.Fatalf("got %+v, want one captured", list)
	}
	rts.mu.Lock()
	rts.boxes["sb1"] = &route.Sandbox{ID: "sb1", State: store.StateStopped, DesiredState: store.StateRunning, AutoStart: true}
	rts.mu.Unlock()
	type result struct {
		x   traffic.Exchange
		err error
	}
	done := make(chan result, 1)
	go func() {
		x, err := s.Replay(context.Background(), "u2", list[0].ID)
		done <- result{x, err}
	}()
	reg := prometheus.NewRegistry()
	reg.MustRegister(s.m.held)
	held := func() bool {
		fs, err := reg.Gather()
		return err == nil && len(fs) == 1 && fs[0].GetMetric()[0].GetGauge().GetValue() == 1
	}
	waitFor(t, "the replay held", held)
	rts.mu.Lock()
	rts.boxes["sb1"] = &route.Sandbox{ID: "sb1", State: store.StateRunning, DesiredState: store.StateRunning, AutoStart: true, Endpoint: "h:22"}
	rts.mu.Unlock()
	rts.changed.Wake()
	r := <-done
	if r.err != nil || r.x.Status != 200 || r.x.ReplayOf != list[0].ID {
		t.Fatalf("the held replay: %+v, %v", r.x, r.err)
	}
	if want := fmt.Sprintf(`POST /hook replay=%q body="payload"`, list[0].ID); app.seen() != want {
		t.Fatalf("the app got %s, want %s", app.seen(), want)
	}
}
