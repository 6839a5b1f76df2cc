package edge

import (
	"context"
	"strings"
	"sync"
	"time"

	"froog.tech/froog/edge/route"
	"froog.tech/froog/internal/traffic"
)

// The owner's request rings: per URL, the last exchanges this edge saw,
// in memory only, bounded per URL and per edge, read by the API
// (Requests, Follow) through the small interface it declares. With
// capture on, an exchange also keeps its headers and the start of its
// bodies, redacted (capture.go), and may be sent again (replay.go).
//
// Each edge keeps its own rings: an exchange is recorded where it passed,
// once, by finish (core.go), whatever its protocol.

// The bounds.
const (
	// ringExchanges is how many exchanges a URL's ring keeps: a new one
	// takes the oldest's place.
	ringExchanges = 100
	// ringCaptured is how many captured bytes (headers and bodies) a
	// URL's ring keeps: past it, the oldest exchanges lose their capture
	// (their summaries stay).
	ringCaptured = 1 << 20
	// edgeTraffic is what every ring of one edge may hold together,
	// counted as entryCost and ringCost plus the strings and captures
	// they keep: past it, the edge's oldest exchanges go, whatever their
	// URL.
	edgeTraffic = 64 << 20
	// entryCost and ringCost are what an exchange and a ring are counted
	// beyond the bytes they keep (the structs, the lists).
	entryCost = 384
	ringCost  = 256
	// keptPath bounds the path and the query an exchange keeps; longer
	// ones are cut.
	keptPath = 2048
)

// entry is one exchange in a ring, linked in two lists: the edge's (for
// its bound) and its URL's.
type entry struct {
	x    traffic.Exchange
	seq  uint64 // the edge's order: Follow's cursor
	size int64  // counted against edgeTraffic, its capture included
	cap  int64  // its capture's bytes (against ringCaptured)
	r    *ring
	l    [2]links // in the edge's list (inEdge) and its ring's (inRing)
}

// The two lists an entry is in.
const (
	inEdge = iota
	inRing
)

// links are an entry's neighbours in one list.
type links struct{ older, newer *entry }

// list is one list of entries, oldest first; i says which of their
// links it uses.
type list struct {
	oldest, newest *entry
	i              int
}

func (l *list) push(e *entry) {
	e.l[l.i] = links{older: l.newest}
	if l.newest != nil {
		l.newest.l[l.i].newer = e
	} else {
		l.oldest = e
	}
	l.newest = e
}

func (l *list) unlink(e *entry) {
	lk := e.l[l.i]
	if lk.older != nil {
		lk.older.l[l.i].newer = lk.newer
	} else {
		l.oldest = lk.newer
	}
	if lk.newer != nil {
		lk.newer.l[l.i].older = lk.older
	} else {
		l.newest = lk.older
	}
	e.l[l.i] = links{}
}

// older and newer are e's neighbours in its ring.
func (e *entry) older() *entry { return e.l[inRing].older }
func (e *entry) newer() *entry { return e.l[inRing].newer }

// ring is one URL's exchanges.
type ring struct {
	urlID    string
	list     // inRing
	n        int
	captured int64
	// capture and public are the URL's as last seen: capture turned off
	// or a change of public/private drops the captures (follow).
	capture, public bool
	// wake is closed by the next exchange recorded; nil: nobody waits.
	wake chan struct{}
}

// rings are an edge's request rings.
type rings struct {
	mu    sync.Mutex
	byURL map[string]*ring
	all   list // inEdge
	bytes int64
	seq   uint64
}

// add records x in the ring of cur's URL (cur is the URL's route now).
// With the ring full, the oldest entry is reused: a ring that is full
// records without allocating.
func (t *rings) add(cur *route.Route, x *traffic.Exchange) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.ringOf(cur)
	var e *entry
	if r.n >= ringExchanges {
		e = r.oldest
		t.remove(e)
		*e = entry{}
	} else {
		e = new(entry)
	}
	t.seq++
	e.x, e.seq, e.r = *x, t.seq, r
	e.cap = captureSize(x.Capture)
	e.size = entryCost + e.cap + int64(len(x.ID)+len(x.ReplayOf)+len(x.Method)+len(x.Path)+len(x.Query))
	t.all.push(e)
	r.push(e)
	r.n++
	r.captured += e.cap
	t.bytes += e.size
	for o := r.oldest; r.captured > ringCaptured && o != nil; o = o.newer() {
		t.dropCapture(o)
	}
	for t.bytes > edgeTraffic && t.all.oldest != nil && t.all.oldest != e {
		o := t.all.oldest
		t.remove(o)
		if o.r.n == 0 && o.r.wake == nil {
			t.dropRing(o.r)
		}
	}
	if r.wake != nil {
		close(r.wake)
		r.wake = nil
	}
}

// ringOf is cur's URL's ring, made if there is none, its captures
// dropped if the URL changed (follow).
func (t *rings) ringOf(cur *route.Route) *ring {
	r := t.byURL[cur.URLID]
	if r == nil {
		if t.byURL == nil {
			t.byURL = map[string]*ring{}
		}
		r = &ring{urlID: cur.URLID, list: list{i: inRing}, capture: cur.Capture, public: cur.Public}
		t.byURL[cur.URLID] = r
		t.bytes += ringCost
		return r
	}
	t.follow(r, cur)
	return r
}

// follow brings r to its URL's route now: capture turned off, or the URL
// made public or private, drops every capture it keeps.
func (t *rings) follow(r *ring, cur *route.Route) {
	if r.captured > 0 && (!cur.Capture || cur.Public != r.public) {
		for e := r.oldest; e != nil; e = e.newer() {
			t.dropCapture(e)
		}
	}
	r.capture, r.public = cur.Capture, cur.Public
}

// remove takes e out of both lists.
func (t *rings) remove(e *entry) {
	r := e.r
	t.all.unlink(e)
	r.unlink(e)
	r.n--
	r.captured -= e.cap
	t.bytes -= e.size
}

// dropCapture forgets e's capture; its summary stays.
func (t *rings) dropCapture(e *entry) {
	if e.x.Capture == nil {
		return
	}
	e.r.captured -= e.cap
	t.bytes -= e.cap
	e.size -= e.cap
	e.cap, e.x.Capture = 0, nil
}

// dropRing forgets r and every exchange in it, and wakes its followers.
func (t *rings) dropRing(r *ring) {
	for r.oldest != nil {
		t.remove(r.oldest)
	}
	if t.byURL[r.urlID] == r {
		delete(t.byURL, r.urlID)
		t.bytes -= ringCost
	}
	if r.wake != nil {
		close(r.wake)
		r.wake = nil
	}
}

// sweep brings every ring to its URL's route now (look): a URL gone
// takes its ring with it; capture off, or public or private, its
// captures.
func (t *rings) sweep(look func(urlID string) *route.Route) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id, r := range t.byURL {
		if cur := look(id); cur == nil {
			t.dropRing(r)
		} else {
			t.follow(r, cur)
		}
	}
}

// usage is the bytes every ring holds together, as the bound counts them.
func (t *rings) usage() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.bytes
}

// KeepTraffic keeps the request rings in step with the route table until
// ctx ends: a URL removed drops its ring at once, and capture turned off
// or a change of public/private drops the URL's captures, whether or not
// a request or a read comes for it. It returns nil.
func (s *Server) KeepTraffic(ctx context.Context) error {
	for {
		changed := s.o.Routes.Changed() // before the sweep: no change slips between
		s.traffic.sweep(s.o.Routes.URL)
		select {
		case <-changed:
		case <-ctx.Done():
			return nil
		}
	}
}

// Requests gives a URL's recent exchanges on this edge, newest first
// (traffic.Query). A URL the route table does not hold has none.
func (s *Server) Requests(urlID string, q traffic.Query) ([]traffic.Exchange, error) {
	cur := s.o.Routes.URL(urlID)
	t := &s.traffic
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.byURL[urlID]
	if r == nil {
		if q.Before != "" {
			return nil, traffic.ErrNotFound
		}
		return []traffic.Exchange{}, nil
	}
	if cur == nil { // the URL is gone: so is what was kept of it
		t.dropRing(r)
		if q.Before != "" {
			return nil, traffic.ErrNotFound
		}
		return []traffic.Exchange{}, nil
	}
	t.follow(r, cur)
	e := r.newest
	if q.Before != "" {
		for e != nil && e.x.ID != q.Before {
			e = e.older()
		}
		if e == nil {
			return nil, traffic.ErrNotFound
		}
		e = e.older()
	}
	out := []traffic.Exchange{}
	for ; e != nil && (q.Limit <= 0 || len(out) < q.Limit); e = e.older() {
		out = append(out, e.x)
	}
	return out, nil
}

// Follow sends a URL's exchanges as this edge records them, oldest
// first: those in the ring after the one whose id is after (all of them
// when after is "" or no longer kept), then each new one, until ctx ends
// (nil), send fails (its error) or the URL goes (traffic.ErrNotFound).
func (s *Server) Follow(ctx context.Context, urlID, after string, send func(traffic.Exchange) error) error {
	t := &s.traffic
	var last uint64
	seen, first := false, true
	for {
		changed := s.o.Routes.Changed()
		cur := s.o.Routes.URL(urlID)
		var wake chan struct{}
		var batch []traffic.Exchange
		if cur == nil && seen {
			return traffic.ErrNotFound
		}
		if cur != nil {
			seen = true
			t.mu.Lock()
			r := t.ringOf(cur)
			if first {
				for e := r.newest; after != "" && e != nil; e = e.older() {
					if e.x.ID == after {
						last = e.seq
						break
					}
				}
				first = false
			}
			e := r.newest
			for e != nil && e.older() != nil && e.older().seq > last {
				e = e.older()
			}
			for ; e != nil; e = e.newer() {
				if e.seq > last {
					batch = append(batch, e.x)
					last = e.seq
				}
			}
			if len(batch) == 0 {
				if r.wake == nil {
					r.wake = make(chan struct{})
				}
				wake = r.wake
			}
			t.mu.Unlock()
		}
		for _, x := range batch {
			if err := send(x); err != nil {
				return err
			}
		}
		if len(batch) > 0 {
			continue
		}
		select {
		case <-wake: // nil while the table does not hold the URL yet
		case <-changed:
		case <-ctx.Done():
			return nil
		}
	}
}

// keep records rec in its URL's ring, once its exchange is over: from
// finish, for every protocol. A request that reached no URL (refused
// before its route was known, or the Starting page's own watch) is not
// kept, nor one whose URL is gone by now.
func (s *Server) keep(rec *record, total time.Duration) {
	if rec.rt == nil {
		return
	}
	cur := s.o.Routes.URL(rec.rt.URLID)
	if cur == nil {
		return
	}
	x := traffic.Exchange{ID: rec.id, ReplayOf: rec.replayOf, At: rec.start, Proto: rec.proto, Method: rec.method, Path: cut(rec.path), Query: cut(rec.query),
		Status: rec.status, Client: rec.ip, BytesIn: rec.bytesIn.Load(), BytesOut: rec.bytesOut.Load(), Dial: rec.dial, FirstByte: rec.firstByte, Total: total}
	if rec.cap != nil && cur.Capture && cur.Public == rec.rt.Public {
		rec.cap.redact(&x)
	}
	s.traffic.add(cur, &x)
}

// cut bounds a kept path or query (keptPath).
func cut(s string) string {
	if len(s) > keptPath {
		return s[:keptPath]
	}
	return s
}

// connect takes a connection to k for rec's request, from the pool or
// dialled, and notes how long a dial took.
func (s *Server) connect(ctx context.Context, k route.Port, rec *record) (*upConn, error) {
	start := time.Now()
	c, err := s.upstreams.get(ctx, k)
	if err == nil && !c.reused {
		rec.dial = time.Since(start)
	}
	return c, err
}

// keptTarget copies a request's path and its query without _token (the
// log's and the ring's), in one allocation: the head's bytes belong to
// the request.
func keptTarget(path, query string) (string, string) {
	q := stripQuery(query)
	if q == "" {
		return strings.Clone(path), ""
	}
	t := path + "?" + q
	return t[:len(path)], t[len(path)+1:]
}

// scrubToken takes the token the request came with (token; "" for
// none) out of the path and query it keeps, wherever it sits: the access
// log and the ring read them.
func (r *record) scrubToken(token string) {
	if token != "" {
		r.path = strings.ReplaceAll(r.path, token, traffic.Redacted)
		r.query = strings.ReplaceAll(r.query, token, traffic.Redacted)
	}
}
