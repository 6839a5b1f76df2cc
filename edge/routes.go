package edge

import (
	"context"
	"log/slog"
	"maps"
	"sync/atomic"
	"time"

	"froog.tech/froog/store"
)

// Store is what the edge reads.
type Store interface {
	store.Feed
	AllURLs(ctx context.Context) ([]store.URL, error)
	AllURLTokens(ctx context.Context, now time.Time) ([]store.URLToken, error)
	SandboxByID(ctx context.Context, id string) (store.Sandbox, error)
}

// route is what the edge knows of one URL. Routes are never changed once
// published: a change makes a new one.
type route struct {
	urlID     string
	accountID string
	host      string // the label
	sandboxID string
	port      int
	public    bool
	tokenHash string
	// viewers maps a viewer token's hash to its expiry.
	viewers map[string]time.Time
}

// table is one version of the route table.
type table struct {
	byHost map[string]*route
	byURL  map[string]*route
	// tokenURL maps a viewer token's id to its URL, for deletions, which
	// carry only the id.
	tokenURL map[string]string
}

func newTable() *table {
	return &table{byHost: map[string]*route{}, byURL: map[string]*route{}, tokenURL: map[string]string{}}
}

// clone copies the maps (not the routes, which are immutable).
func (t *table) clone() *table {
	return &table{byHost: maps.Clone(t.byHost), byURL: maps.Clone(t.byURL), tokenURL: maps.Clone(t.tokenURL)}
}

func (t *table) putURL(u *store.URL) {
	old := t.byURL[u.ID]
	r := &route{urlID: u.ID, accountID: u.AccountID, host: u.Hostname, sandboxID: u.SandboxID, port: u.Port, public: u.Public, tokenHash: u.TokenHash, viewers: map[string]time.Time{}}
	if old != nil {
		delete(t.byHost, old.host) // a renamed URL's old address stops at once
		if !u.Public {
			r.viewers = old.viewers
		}
	}
	t.byURL[u.ID], t.byHost[u.Hostname] = r, r
}

func (t *table) deleteURL(id string) {
	if old := t.byURL[id]; old != nil {
		delete(t.byHost, old.host)
		delete(t.byURL, id)
	}
}

// withViewers replaces a route by a copy whose viewers edit changed.
func (t *table) withViewers(urlID string, edit func(map[string]time.Time)) {
	old := t.byURL[urlID]
	if old == nil {
		return
	}
	r := *old
	r.viewers = maps.Clone(old.viewers)
	edit(r.viewers)
	t.byURL[urlID], t.byHost[r.host] = &r, &r
}

func (t *table) putToken(tok *store.URLToken, now time.Time) {
	t.tokenURL[tok.ID] = tok.URLID
	t.withViewers(tok.URLID, func(v map[string]time.Time) {
		if tok.Live(now) {
			v[tok.Hash] = tok.ExpiresAt
		} else {
			delete(v, tok.Hash)
		}
	})
}

func (t *table) deleteToken(id string, hash string) {
	urlID, ok := t.tokenURL[id]
	if !ok {
		return
	}
	delete(t.tokenURL, id)
	t.withViewers(urlID, func(v map[string]time.Time) {
		if hash != "" {
			delete(v, hash)
		}
	})
}

// routes holds the current table and keeps it current.
type routes struct {
	store  Store
	domain string
	log    *slog.Logger
	now    func() time.Time
	cur    atomic.Pointer[table]
	// current: the table follows the feed (false from a store error until
	// the next successful load).
	current atomic.Bool
	// tokenHash remembers each viewer token's hash, for deletions.
	tokenHash map[string]string
	ready     chan struct{}
	// published is told of every table put in place.
	published func(*table)
}

func (rs *routes) publish(t *table) {
	rs.cur.Store(t)
	if rs.published != nil {
		rs.published(t)
	}
}

// lookup finds the route of a Host header; it takes no lock and, for a
// lowercase host, allocates nothing.
func (rs *routes) lookup(host string) *route {
	label := parseHost(host, rs.domain)
	if label == "" {
		return nil
	}
	t := rs.cur.Load()
	if t == nil {
		return nil
	}
	return t.byHost[label]
}

// load reads every URL and token and publishes a fresh table; it returns
// the feed position the table is current to.
func (rs *routes) load(ctx context.Context) (int64, error) {
	head, err := rs.store.Head(ctx)
	if err != nil {
		return 0, err
	}
	urls, err := rs.store.AllURLs(ctx)
	if err != nil {
		return 0, err
	}
	now := rs.now()
	toks, err := rs.store.AllURLTokens(ctx, now)
	if err != nil {
		return 0, err
	}
	t := newTable()
	rs.tokenHash = map[string]string{}
	for i := range urls {
		t.putURL(&urls[i])
	}
	for i := range toks {
		t.putToken(&toks[i], now)
		rs.tokenHash[toks[i].ID] = toks[i].Hash
	}
	rs.publish(t)
	return head, nil
}

// run loads the table and follows the feed until ctx ends, reloading
// after a gap or an error.
func (rs *routes) run(ctx context.Context) {
	for ctx.Err() == nil {
		err := rs.follow(ctx)
		if ctx.Err() != nil {
			return
		}
		rs.log.Warn("route table: reloading", slog.String("error", err.Error()))
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (rs *routes) follow(ctx context.Context) error {
	rs.current.Store(false)
	head, err := rs.load(ctx)
	if err != nil {
		return err
	}
	rs.current.Store(true)
	defer rs.current.Store(false)
	select {
	case <-rs.ready:
	default:
		close(rs.ready)
	}
	sub, err := rs.store.Subscribe(ctx, head)
	if err != nil {
		return err
	}
	for {
		c, err := sub.Next(ctx)
		if err != nil {
			return err // a gap or a store error: reload
		}
		t := rs.cur.Load().clone()
		rs.apply(t, c)
		// Take what the same read brought too, and publish once.
		for sub.Buffered() > 0 {
			more, err := sub.Next(ctx)
			if err != nil {
				return err
			}
			rs.apply(t, more)
		}
		rs.publish(t)
	}
}

func (rs *routes) apply(t *table, c store.Change) {
	switch c.Kind {
	case store.KindURL:
		if c.Deleted {
			t.deleteURL(c.ID)
		} else {
			t.putURL(c.URL)
		}
	case store.KindURLToken:
		if c.Deleted {
			t.deleteToken(c.ID, rs.tokenHash[c.ID])
			delete(rs.tokenHash, c.ID)
		} else {
			rs.tokenHash[c.ID] = c.URLToken.Hash
			t.putToken(c.URLToken, rs.now())
		}
	}
}
