package route

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"froog.tech/froog/names"
	"froog.tech/froog/store"
)

// Store is what the table reads.
type Store interface {
	store.Feed
	AllURLs(ctx context.Context) ([]store.URL, error)
	AllURLTokens(ctx context.Context, now time.Time) ([]store.URLToken, error)
	AllSandboxes(ctx context.Context) ([]store.Sandbox, error)
}

// Route is what the edge knows of one URL. Routes are never changed once
// published: a change makes a new one. Read its fields, never write them.
type Route struct {
	URLID     string
	AccountID string
	Host      string // the label
	SandboxID string
	Port      int
	Public    bool
	TokenHash string
	Inbox     *store.Inbox // the URL's webhook inbox, or nil
	// ShowPorts: every visitor the URL lets in may be told which ports
	// listen when its own does not (store.URL.ShowPorts).
	ShowPorts bool
	// Capture: the edge keeps the headers and the start of the bodies of
	// the URL's exchanges for its owner (store.URL.Capture).
	Capture bool
	// Policy is what the URL's owner allows of its visitors; nil: none.
	Policy *Policy
	// paths: the URL's path prefixes to other ports, the longest first
	// (PortFor).
	paths []pathRoute
	// viewers maps a viewer token's hash to its expiry.
	viewers map[string]time.Time
}

// Check reports whether tok opens the route, and for a viewer token how
// long it has left.
func (rt *Route) Check(tok string, now time.Time) (time.Duration, bool) {
	if tok == "" || len(tok) > 256 {
		return 0, false
	}
	h := store.HashSecret(tok)
	if rt.TokenHash != "" && h == rt.TokenHash {
		return 0, true
	}
	if exp, ok := rt.viewers[h]; ok && now.Before(exp) {
		return exp.Sub(now), true
	}
	return 0, false
}

// NewRoute makes the route of u with its viewer tokens live at now, as
// the table does.
func NewRoute(u *store.URL, viewers []store.URLToken, now time.Time) *Route {
	r := &Route{URLID: u.ID, AccountID: u.AccountID, Host: u.Hostname, SandboxID: u.SandboxID, Port: u.Port, Public: u.Public, TokenHash: u.TokenHash, Inbox: u.Inbox, ShowPorts: u.ShowPorts, Capture: u.Capture, Policy: newPolicy(u), paths: newPaths(u), viewers: map[string]time.Time{}}
	for _, v := range viewers {
		if v.Live(now) && !u.Public {
			r.viewers[v.Hash] = v.ExpiresAt
		}
	}
	return r
}

// Sandbox is what the table knows of a sandbox that is not deleted.
type Sandbox struct {
	ID, AccountID, Name string
	State, DesiredState string
	AutoStart           bool
	// StartedAt is when it last started (zero: never): each start is a
	// new run.
	StartedAt time.Time
	// UpdatedAt is the record's last write.
	UpdatedAt time.Time
	// Endpoint is where the tunnel reaches it: SSH host:port and host
	// key. With StartedAt it says when pooled connections are stale.
	Endpoint string
	// StartStage is how far its start has got (store.Sandbox.StartStage).
	StartStage string
	// SetupRunning: the account's setup runs in it since its start
	// (store.Sandbox.SetupStatus).
	SetupRunning bool
}

// table is one version of the route table.
type table struct {
	byHost layer[string, *Route]
	byURL  layer[string, *Route]
	// tokenURL maps a viewer token's id to its URL, for deletions, which
	// carry only the id.
	tokenURL  layer[string, string]
	sandboxes layer[string, *Sandbox]
	// ports counts the routes that point at each sandbox port: a URL's
	// own port and its path routes' (another URL may own one of those).
	ports layer[Port, int]
}

// Port is a port inside a sandbox.
type Port struct {
	SandboxID string
	Port      int
}

func newTable() *table {
	return &table{byHost: newLayer[string, *Route](), byURL: newLayer[string, *Route](), tokenURL: newLayer[string, string](),
		sandboxes: newLayer[string, *Sandbox](), ports: newLayer[Port, int]()}
}

// clone is a new version of the table (the routes, immutable, are
// shared; so are the maps' bases, see layer).
func (t *table) clone() *table {
	return &table{byHost: t.byHost.clone(), byURL: t.byURL.clone(), tokenURL: t.tokenURL.clone(), sandboxes: t.sandboxes.clone(), ports: t.ports.clone()}
}

// heavy reports whether some map's changes have grown enough to flatten.
func (t *table) heavy() bool {
	return t.byHost.heavy() || t.byURL.heavy() || t.tokenURL.heavy() || t.sandboxes.heavy() || t.ports.heavy()
}

// flat is the same table with every map flattened.
func (t *table) flat() *table {
	return &table{byHost: t.byHost.flat(), byURL: t.byURL.flat(), tokenURL: t.tokenURL.flat(), sandboxes: t.sandboxes.flat(), ports: t.ports.flat()}
}

func (t *table) putURL(u *store.URL) {
	old := t.byURL.at(u.ID)
	r := NewRoute(u, nil, time.Time{})
	if old != nil {
		t.byHost.del(old.Host) // a renamed URL's old address stops at once
		t.countPorts(old, -1)
		if !u.Public {
			r.viewers = old.viewers
		}
	}
	t.byURL.set(u.ID, r)
	t.byHost.set(u.Hostname, r)
	t.countPorts(r, +1)
}

// countPorts adds n to the count of each port r points at.
func (t *table) countPorts(r *Route, n int) {
	t.countPort(Port{r.SandboxID, r.Port}, n)
	for _, p := range r.paths {
		t.countPort(Port{r.SandboxID, p.port}, n)
	}
}

func (t *table) countPort(p Port, n int) {
	if c := t.ports.at(p) + n; c > 0 {
		t.ports.set(p, c)
	} else {
		t.ports.del(p)
	}
}

func (t *table) deleteURL(id string) {
	if old := t.byURL.at(id); old != nil {
		t.byHost.del(old.Host)
		t.byURL.del(id)
		t.countPorts(old, -1)
	}
}

// withViewers replaces a route by a copy whose viewers edit changed.
func (t *table) withViewers(urlID string, edit func(map[string]time.Time)) {
	old := t.byURL.at(urlID)
	if old == nil {
		return
	}
	r := *old
	r.viewers = maps.Clone(old.viewers)
	edit(r.viewers)
	t.byURL.set(urlID, &r)
	t.byHost.set(r.Host, &r)
}

func (t *table) putToken(tok *store.URLToken, now time.Time) {
	t.tokenURL.set(tok.ID, tok.URLID)
	t.withViewers(tok.URLID, func(v map[string]time.Time) {
		if tok.Live(now) {
			v[tok.Hash] = tok.ExpiresAt
		} else {
			delete(v, tok.Hash)
		}
	})
}

func (t *table) deleteToken(id string, hash string) {
	urlID, ok := t.tokenURL.get(id)
	if !ok {
		return
	}
	t.tokenURL.del(id)
	t.withViewers(urlID, func(v map[string]time.Time) {
		if hash != "" {
			delete(v, hash)
		}
	})
}

func (t *table) putSandbox(sb *store.Sandbox) {
	if sb.DeletedAt != nil {
		t.sandboxes.del(sb.ID)
		return
	}
	s := &Sandbox{ID: sb.ID, AccountID: sb.AccountID, Name: sb.Name, State: sb.State, DesiredState: sb.DesiredState, AutoStart: sb.AutoStart,
		UpdatedAt: sb.UpdatedAt, Endpoint: net.JoinHostPort(sb.SSHHost, strconv.Itoa(sb.SSHPort)) + " " + sb.SSHHostKey, StartStage: sb.StartStage,
		SetupRunning: sb.SetupStatus == store.SetupRunning}
	if sb.StartedAt != nil {
		s.StartedAt = *sb.StartedAt
	}
	t.sandboxes.set(sb.ID, s)
}

// Options configure a Table.
type Options struct {
	Store  Store  // required
	Domain string // the public-URL domain; required
	// Registerer gets the table's metrics; nil registers none.
	Registerer prometheus.Registerer
	Logger     *slog.Logger     // nil discards
	Now        func() time.Time // nil means time.Now
}

// Table holds the current routes and keeps them current from the store's
// change feed. Readers take no lock.
type Table struct {
	o   Options
	cur atomic.Pointer[table]
	// current: the table follows the feed (false from a store error until
	// the next successful load).
	current atomic.Bool
	// tokenHash remembers each viewer token's hash, for deletions.
	tokenHash map[string]string
	ready     chan struct{}
	routes    prometheus.Gauge
	// seq is the feed position the published table is current to; rt
	// reads through to the store on a miss (readthrough.go).
	seq atomic.Int64
	rt  readThrough
}

// New checks the options and builds an empty table; it starts nothing.
func New(o Options) (*Table, error) {
	var errs []error
	if o.Store == nil {
		errs = append(errs, errors.New("route: a store is required"))
	}
	if o.Domain == "" {
		errs = append(errs, errors.New("route: a domain is required"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	o.Domain = strings.ToLower(strings.TrimSuffix(o.Domain, "."))
	t := &Table{o: o, ready: make(chan struct{}),
		routes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "froog_edge_routes", Help: "URLs in the route table."})}
	if o.Registerer != nil {
		o.Registerer.MustRegister(t.routes)
	}
	t.cur.Store(newTable())
	return t, nil
}

// Domain is the public-URL domain, lowercase.
func (t *Table) Domain() string { return t.o.Domain }

// Ready is closed once the table has loaded.
func (t *Table) Ready() <-chan struct{} { return t.ready }

// Current reports whether the table follows the store (false while the
// store is unreachable: the table still serves the routes it knows).
func (t *Table) Current() bool { return t.current.Load() }

// Lookup finds the route of a Host header; it takes no lock and, for a
// lowercase host, allocates nothing.
func (t *Table) Lookup(host string) *Route {
	label := names.Label(host, t.o.Domain)
	if label == "" {
		return nil
	}
	tb := t.cur.Load()
	return tb.byHost.at(label)
}

// URL finds the route of a URL by its id, or nil.
func (t *Table) URL(id string) *Route {
	tb := t.cur.Load()
	return tb.byURL.at(id)
}

// Sandbox gives what the table knows of a sandbox, or nil.
func (t *Table) Sandbox(id string) *Sandbox {
	tb := t.cur.Load()
	return tb.sandboxes.at(id)
}

// Running reports whether a sandbox runs, and since when (its current
// run: a session made before it belongs to an earlier run).
func (t *Table) Running(id string) (since time.Time, ok bool) {
	sb := t.Sandbox(id)
	if sb == nil || sb.State != store.StateRunning {
		return time.Time{}, false
	}
	return sb.StartedAt, true
}

// RunningIn lists an account's running sandboxes (for its wall).
func (t *Table) RunningIn(accountID string) []Sandbox {
	var out []Sandbox
	tb := t.cur.Load()
	for _, sb := range tb.sandboxes.all() {
		if sb.AccountID == accountID && sb.State == store.StateRunning {
			out = append(out, *sb)
		}
	}
	return out
}

// Serves reports whether some route still points at a sandbox's port.
func (t *Table) Serves(p Port) bool {
	tb := t.cur.Load()
	_, ok := tb.ports.get(p)
	return ok
}

// ErrUnknownName and ErrNotCurrent are Owner's refusals.
var (
	ErrUnknownName = errors.New("no URL holds this name")
	ErrNotCurrent  = errors.New("the route table is not current: the store is unreachable")
)

// Owner says which account's URL holds the host name, from the table in
// memory; certificates are ordered only for such names. A name the table
// does not have is looked for again once the table has caught up with
// the store (readthrough.go): a URL made a moment ago has a certificate
// at once. While the table does not follow the store it refuses every
// name.
func (t *Table) Owner(name string) (string, error) {
	if !t.current.Load() {
		return "", ErrNotCurrent
	}
	id, err := t.owner(name)
	if err != ErrUnknownName {
		return id, err
	}
	t.lookAgain(name, func() bool {
		id, err = t.owner(name)
		return err != ErrUnknownName
	})
	return id, err
}

// Recheck is for a request the table as it is refuses, which a change
// committed a moment ago may let in (a URL or a viewer token just made):
// it looks host up again once the table has caught up with the store,
// and returns the route it has then. ok says whether a route lets the
// request in; key names what was missing (the host, or the host and a
// token's hash), for lookAgain.
func (t *Table) Recheck(host, key string, ok func(*Route) bool) *Route {
	rt := t.Lookup(host)
	if t.current.Load() {
		t.lookAgain(key, func() bool {
			rt = t.Lookup(host)
			return ok(rt)
		})
	}
	return rt
}

// owner is Owner from the table as it is.
func (t *Table) owner(name string) (string, error) {
	if v, ok := names.ParseView(names.Label(name, t.o.Domain)); ok {
		if v.Kind == names.ViewWall {
			// An account the table knows: it has a sandbox. (Walls are
			// rare next to requests; the scan is for certificates only.)
			tb := t.cur.Load()
			for _, sb := range tb.sandboxes.all() {
				if sb.AccountID == v.ID {
					return v.ID, nil
				}
			}
			return "", ErrUnknownName
		}
		if sb := t.Sandbox(v.ID); sb != nil {
			return sb.AccountID, nil
		}
		return "", ErrUnknownName
	}
	rt := t.Lookup(name)
	if rt == nil {
		return "", ErrUnknownName
	}
	return rt.AccountID, nil
}

func (t *Table) publish(tb *table) {
	t.cur.Store(tb)
	t.routes.Set(float64(tb.byURL.len()))
}

// load reads every URL, token and sandbox and publishes a fresh table;
// it returns the feed position the table is current to.
func (t *Table) load(ctx context.Context) (int64, error) {
	head, err := t.o.Store.Head(ctx)
	if err != nil {
		return 0, err
	}
	urls, err := t.o.Store.AllURLs(ctx)
	if err != nil {
		return 0, err
	}
	now := t.o.Now()
	toks, err := t.o.Store.AllURLTokens(ctx, now)
	if err != nil {
		return 0, err
	}
	sbs, err := t.o.Store.AllSandboxes(ctx)
	if err != nil {
		return 0, err
	}
	tb := newTable()
	t.tokenHash = map[string]string{}
	for i := range urls {
		tb.putURL(&urls[i])
	}
	for i := range toks {
		tb.putToken(&toks[i], now)
		t.tokenHash[toks[i].ID] = toks[i].Hash
	}
	for i := range sbs {
		tb.putSandbox(&sbs[i])
	}
	t.publish(tb.flat())
	t.advance(head)
	return head, nil
}

// Run loads the table and follows the feed until ctx ends, reloading
// after a gap or an error.
func (t *Table) Run(ctx context.Context) {
	for ctx.Err() == nil {
		err := t.follow(ctx)
		if ctx.Err() != nil {
			return
		}
		t.o.Logger.Warn("route table: reloading", slog.String("error", err.Error()))
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (t *Table) follow(ctx context.Context) error {
	t.current.Store(false)
	head, err := t.load(ctx)
	if err != nil {
		return err
	}
	t.current.Store(true)
	defer t.current.Store(false)
	select {
	case <-t.ready:
	default:
		close(t.ready)
	}
	sub, err := t.o.Store.Subscribe(ctx, head)
	if err != nil {
		return err
	}
	for {
		c, err := sub.Next(ctx)
		if err != nil {
			return err // a gap or a store error: reload
		}
		tb := t.cur.Load().clone()
		t.apply(tb, c)
		seq := c.Seq
		// Take what the same read brought too, and publish once.
		for sub.Buffered() > 0 {
			more, err := sub.Next(ctx)
			if err != nil {
				return err
			}
			t.apply(tb, more)
			seq = more.Seq
		}
		t.publish(tb)
		t.advance(seq)
		if tb.heavy() {
			// After the change is out: the next one waits for this.
			t.publish(tb.flat())
		}
	}
}

func (t *Table) apply(tb *table, c store.Change) {
	switch c.Kind {
	case store.KindURL:
		if c.Deleted {
			tb.deleteURL(c.ID)
		} else {
			tb.putURL(c.URL)
		}
	case store.KindURLToken:
		if c.Deleted {
			tb.deleteToken(c.ID, t.tokenHash[c.ID])
			delete(t.tokenHash, c.ID)
		} else {
			t.tokenHash[c.ID] = c.URLToken.Hash
			tb.putToken(c.URLToken, t.o.Now())
		}
	case store.KindSandbox:
		if c.Deleted {
			tb.sandboxes.del(c.ID)
		} else {
			tb.putSandbox(c.Sandbox)
		}
	}
}
