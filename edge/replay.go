package edge

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"froog.tech/froog/edge/route"
	"froog.tech/froog/internal/requestid"
	"froog.tech/froog/internal/traffic"
	"froog.tech/froog/names"
)

// Replay: a captured request sent again, through the same pipeline as a
// client's (strip, X-Forwarded-*, the inbox, the hold that wakes a
// stopped sandbox with auto-start, the proxy, the ring), marked for the
// app with Froog-Replay and in the ring with the id it replays. The API
// has checked the caller owns the URL: a replay carries no URL token and
// is not held to the URL's policy (addresses, rate).

// replayHeader tells the app a request is a replay, and of which
// exchange; the edge drops any a client sends (replacedHeaders).
const replayHeader = "Froog-Replay"

// Replay sends the request of a URL's captured exchange id again and
// returns the new exchange, recorded in the ring. The request is the
// captured one: method, path, query, body, and its headers but those the
// capture redacted (cookies, credentials: the app gets none) and those
// the edge sets itself. traffic.ErrNotFound: the ring keeps no such
// exchange, or the URL is gone; traffic.ErrNotCaptured: it was not
// captured whole.
func (s *Server) Replay(ctx context.Context, urlID, id string) (traffic.Exchange, error) {
	cur := s.o.Routes.URL(urlID)
	if cur == nil {
		return traffic.Exchange{}, traffic.ErrNotFound
	}
	old, ok := s.traffic.find(cur, id)
	if !ok {
		return traffic.Exchange{}, traffic.ErrNotFound
	}
	cp := old.Capture
	if cp == nil || cp.Request.Truncated {
		return traffic.Exchange{}, traffic.ErrNotCaptured
	}
	host := names.Host(cur.Host, s.domain)
	target := old.Path
	if old.Query != "" {
		target += "?" + old.Query
	}
	r, err := http.NewRequestWithContext(ctx, old.Method, "https://"+host+target, bytes.NewReader(cp.Request.Body))
	if err != nil || !strings.HasPrefix(target, "/") {
		return traffic.Exchange{}, fmt.Errorf("%w: its target cannot be sent again", traffic.ErrNotCaptured)
	}
	for _, h := range cp.Request.Headers {
		if replayable(h) {
			r.Header.Add(h.Name, h.Value)
		}
	}
	r.Host, r.ContentLength = host, int64(len(cp.Request.Body))
	r.RemoteAddr = netip.AddrPortFrom(old.Client, 0).String()
	x := &h2Exchange{s: s, w: &replayWriter{h: http.Header{}}, r: r}
	f := &x.f
	f.rec = record{id: requestid.New(), start: time.Now(), proto: old.Proto, status: 200, dial: -1, firstByte: -1, replayOf: id}
	f.c.tokenCookies = f.cookies[:0]
	if !x.head(&f.c, &f.hp) {
		return traffic.Exchange{}, fmt.Errorf("%w: its headers cannot be sent again", traffic.ErrNotCaptured)
	}
	f.rec.host, f.rec.method, f.rec.ip = f.c.host, f.c.method, f.c.ip
	f.rec.path, f.rec.query = keptTarget(f.c.path, f.c.query)
	f.d = decision{rt: cur, port: cur.PortFor(f.c.path), host: host, wake: true}
	f.rec.rt = cur
	s.pass(x, f)
	if nx, ok := s.traffic.find(cur, f.rec.id); ok {
		return nx, nil
	}
	// Dropped already (a flood of exchanges since): its summary.
	return traffic.Exchange{ID: f.rec.id, ReplayOf: id, At: f.rec.start, Proto: f.rec.proto, Method: f.rec.method, Path: f.rec.path, Query: f.rec.query,
		Status: f.rec.status, Client: f.rec.ip, BytesIn: f.rec.bytesIn.Load(), BytesOut: f.rec.bytesOut.Load(), Dial: f.rec.dial, FirstByte: f.rec.firstByte, Total: time.Since(f.rec.start)}, nil
}

// replayable reports whether a captured request header goes with its
// replay: not one the capture redacted (the app gets no cookie or
// credential from a replay), nor one the edge or the codec sets.
func replayable(h traffic.Header) bool {
	if strings.Contains(h.Value, traffic.Redacted) {
		return false
	}
	for _, n := range []string{"Host", "Content-Length", "Transfer-Encoding", "Cookie", "Authorization", "Proxy-Authorization"} {
		if strings.EqualFold(h.Name, n) {
			return false
		}
	}
	return true
}

// find copies a URL's exchange out of its ring (brought to cur first).
func (t *rings) find(cur *route.Route, id string) (traffic.Exchange, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.byURL[cur.URLID]
	if r == nil {
		return traffic.Exchange{}, false
	}
	t.follow(r, cur)
	for e := r.newest; e != nil; e = e.older() {
		if e.x.ID == id {
			return e.x, true
		}
	}
	return traffic.Exchange{}, false
}

// replayWriter takes a replay's answer: the ring's record of it (capture
// on) is what the caller reads, so the body goes nowhere else.
type replayWriter struct {
	h      http.Header
	status int
}

func (w *replayWriter) Header() http.Header         { return w.h }
func (w *replayWriter) WriteHeader(status int)      { w.status = status }
func (w *replayWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *replayWriter) Flush()                      {}
