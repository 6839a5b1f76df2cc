package traffic

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"
)

// The rings across processes: an edge serves its own (Handler) on an
// internal listener, and an API apart from the edges reads every edge's
// (Remote), merged. The wire is this file's alone: JSON of Exchange, one
// a line while following.

// Source is one edge's rings, or several edges' (Remote).
type Source interface {
	Requests(urlID string, q Query) ([]Exchange, error)
	Follow(ctx context.Context, urlID, after string, send func(Exchange) error) error
	Replay(ctx context.Context, urlID, id string) (Exchange, error)
}

// followLine is one line of a followed list: an exchange, or the end of
// the URL.
type followLine struct {
	Exchange *Exchange `json:"exchange,omitempty"`
	Gone     bool      `json:"gone,omitempty"`
}

// Handler serves src to the API processes that run apart from this edge:
// GET /requests?url=ID&limit=N&before=ID (JSON), GET /follow?url=ID&after=ID
// (a line of JSON each), POST /replay?url=ID&id=ID; every request with
// Authorization: Bearer key. 404: not kept (ErrNotFound); 409: not
// captured (ErrNotCaptured).
func Handler(src Source, key string) http.Handler {
	want := []byte("Bearer " + key)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if key == "" || subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		q := r.URL.Query()
		urlID := q.Get("url")
		var x any
		var err error
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/requests":
			limit, _ := strconv.Atoi(q.Get("limit"))
			x, err = src.Requests(urlID, Query{Limit: limit, Before: q.Get("before")})
		case r.Method == http.MethodGet && r.URL.Path == "/follow":
			follow(w, r, src, urlID, q.Get("after"))
			return
		case r.Method == http.MethodPost && r.URL.Path == "/replay":
			x, err = src.Replay(r.Context(), urlID, q.Get("id"))
		default:
			http.NotFound(w, r)
			return
		}
		switch {
		case errors.Is(err, ErrNotFound):
			http.Error(w, err.Error(), http.StatusNotFound)
		case errors.Is(err, ErrNotCaptured):
			http.Error(w, err.Error(), http.StatusConflict)
		case err != nil:
			http.Error(w, err.Error(), http.StatusInternalServerError)
		default:
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(x)
		}
	})
}

func follow(w http.ResponseWriter, r *http.Request, src Source, urlID, after string) {
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	rc.Flush()
	enc := json.NewEncoder(w)
	err := src.Follow(r.Context(), urlID, after, func(x Exchange) error {
		if err := enc.Encode(followLine{Exchange: &x}); err != nil {
			return err
		}
		return rc.Flush()
	})
	if errors.Is(err, ErrNotFound) {
		enc.Encode(followLine{Gone: true})
	}
}

// Remote is several edges' rings, each read through its Handler: the
// Source of an API that runs apart from the edges. An edge that does not
// answer is left out; only when none answers is it an error.
type Remote struct {
	Edges  []string // each edge's Handler, as http://HOST:PORT
	Key    string
	Client *http.Client // nil: http.DefaultClient
}

func (rm *Remote) client() *http.Client {
	if rm.Client != nil {
		return rm.Client
	}
	return http.DefaultClient
}

// call sends one request to an edge and decodes its JSON answer into out.
func (rm *Remote) call(ctx context.Context, method, edge, path string, v url.Values, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, edge+path+"?"+v.Encode(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+rm.Key)
	res, err := rm.client().Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	switch res.StatusCode {
	case http.StatusOK:
		return json.Unmarshal(b, out)
	case http.StatusNotFound:
		return ErrNotFound
	case http.StatusConflict:
		return ErrNotCaptured
	}
	return fmt.Errorf("edge %s: %s: %s", edge, res.Status, bytes.TrimSpace(b))
}

// askFor bounds how long an edge may take to give its list: one that
// hangs is left out, as one that refuses.
const askFor = 10 * time.Second

// Requests merges every edge's exchanges of the URL, newest first, then
// pages them.
func (rm *Remote) Requests(urlID string, q Query) ([]Exchange, error) {
	var all []Exchange
	var errs []error
	for _, e := range rm.Edges {
		var list []Exchange
		ctx, cancel := context.WithTimeout(context.Background(), askFor)
		err := rm.call(ctx, http.MethodGet, e, "/requests", url.Values{"url": {urlID}}, &list)
		cancel()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		all = append(all, list...)
	}
	if len(errs) == len(rm.Edges) && len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	slices.SortStableFunc(all, func(a, b Exchange) int { return b.At.Compare(a.At) })
	if q.Before != "" {
		i := slices.IndexFunc(all, func(x Exchange) bool { return x.ID == q.Before })
		if i < 0 {
			return nil, ErrNotFound
		}
		all = all[i+1:]
	}
	if q.Limit > 0 && len(all) > q.Limit {
		all = all[:q.Limit]
	}
	if all == nil {
		all = []Exchange{}
	}
	return all, nil
}

// Follow follows the URL on every edge at once, sending each exchange as
// one arrives. after names an exchange on one edge, which goes on after
// it; the others, which do not keep it, go on with what ended after it
// did (as the edges' clocks tell), so a client that follows again from
// its last event gets nothing twice. When no edge keeps after any more,
// every edge starts with all it keeps. It ends with ctx (nil), with
// send's error, or when every edge has ended, ErrNotFound when one said
// the URL was gone.
func (rm *Remote) Follow(ctx context.Context, urlID, after string, send func(Exchange) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	holder, since := rm.find(ctx, urlID, after)
	lines := make(chan followLine)
	var wg sync.WaitGroup
	for i, e := range rm.Edges {
		var from time.Time
		if holder >= 0 && i != holder {
			from = since
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rm.followOne(ctx, e, url.Values{"url": {urlID}, "after": {after}}, from, lines)
		}()
	}
	ended := make(chan struct{})
	go func() { wg.Wait(); close(ended) }()
	gone := false
	for {
		select {
		case l := <-lines:
			if l.Gone {
				gone = true
				continue
			}
			if err := send(*l.Exchange); err != nil {
				return err
			}
		case <-ended:
			if gone {
				return ErrNotFound
			}
			return errors.New("no edge follows the URL")
		case <-ctx.Done():
			return nil
		}
	}
}

// find is the index of the edge that keeps exchange id of the URL, and
// when that exchange ended; -1 when none keeps it (or id is "").
func (rm *Remote) find(ctx context.Context, urlID, id string) (int, time.Time) {
	if id == "" {
		return -1, time.Time{}
	}
	for i, e := range rm.Edges {
		var list []Exchange
		actx, cancel := context.WithTimeout(ctx, askFor)
		err := rm.call(actx, http.MethodGet, e, "/requests", url.Values{"url": {urlID}}, &list)
		cancel()
		if err != nil {
			continue
		}
		if j := slices.IndexFunc(list, func(x Exchange) bool { return x.ID == id }); j >= 0 {
			return i, list[j].At.Add(list[j].Total)
		}
	}
	return -1, time.Time{}
}

// followOne reads one edge's followed list into lines until it ends,
// leaving out the exchanges that ended by from (none when from is zero).
func (rm *Remote) followOne(ctx context.Context, edge string, v url.Values, from time.Time, lines chan<- followLine) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, edge+"/follow?"+v.Encode(), nil)
	if err != nil {
		return
	}
	req.Header.Set("Authorization", "Bearer "+rm.Key)
	res, err := rm.client().Do(req)
	if err != nil {
		return
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return
	}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l followLine
		if json.Unmarshal(sc.Bytes(), &l) != nil || l.Exchange == nil && !l.Gone {
			return
		}
		if x := l.Exchange; x != nil && !from.IsZero() && !x.At.Add(x.Total).After(from) {
			continue
		}
		select {
		case lines <- l:
		case <-ctx.Done():
			return
		}
	}
}

// Replay asks each edge in turn: the one that keeps the exchange sends
// it again.
func (rm *Remote) Replay(ctx context.Context, urlID, id string) (Exchange, error) {
	err := ErrNotFound
	for _, e := range rm.Edges {
		var x Exchange
		switch e := rm.call(ctx, http.MethodPost, e, "/replay", url.Values{"url": {urlID}, "id": {id}}, &x); {
		case e == nil:
			return x, nil
		case errors.Is(e, ErrNotCaptured):
			return Exchange{}, e
		case !errors.Is(e, ErrNotFound):
			err = e
		}
	}
	return Exchange{}, err
}

// KeyFrom is the key edges and API processes share for the rings'
// Handler, made from the secret key file they share: a key of its own,
// so that it opens nothing else.
func KeyFrom(secret []byte) string {
	h := sha256.Sum256(append([]byte("froog edge traffic\x00"), secret...))
	return hex.EncodeToString(h[:])
}
