package desktop

import (
	"cmp"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"froog.tech/froog/edge/route"
	"froog.tech/froog/names"
	"froog.tech/froog/store"
)

// View is what a view host shows, its kind and the sandbox's id (the
// account's for a wall): the caller parses the host (names.ParseView) and
// hands it in with every request.
type View = names.View

// Link is a desktop link as the store keeps it: the sandbox and kind it
// opens, whether every session it makes is view-only (whatever the page
// asks), and when it stops opening.
type Link = store.DesktopLink

// ErrLinkNotFound is what Links returns for a hash it does not know.
var ErrLinkNotFound = store.ErrNotFound

// Links finds a link by the hash of its token (HashToken); the store is
// one.
type Links interface {
	DesktopLink(ctx context.Context, hash string) (Link, error)
	// LockDesktopLinkViewOnly makes a link view-only for the rest of its
	// life and returns it.
	LockDesktopLinkViewOnly(ctx context.Context, hash string) (Link, error)
	// APIKeyByID finds the API key that made a link, revoked and expired
	// ones too: what a key made stops when it no longer vouches for it.
	APIKeyByID(ctx context.Context, id string) (store.APIKey, error)
}

var _ Links = store.Store(nil)

// Starter starts a sandbox's desktop (kind names.ViewDesktop) or browser view
// (names.ViewBrowser) if it is not running, waits until its VNC server listens,
// and returns the VNC port inside the sandbox. profile is the browser
// view's Chromium profile folder ("" for the default; always "" for the
// desktop): a browser view running another profile is replaced. It is
// called for every viewer connection, so it must be cheap when the
// desktop runs.
type Starter interface {
	StartDesktop(ctx context.Context, sandboxID, kind, profile string) (port int, err error)
}

// Dialer connects to a port inside a sandbox (package tunnel).
type Dialer interface {
	DialContext(ctx context.Context, sandboxID string, port int) (net.Conn, error)
}

// Sandboxes says whether a sandbox is running and since when. since must
// stay the same for a whole run and change at the next start (the
// store's started_at, to the microsecond): a session belongs to the run
// it was made in, so a stop ends it even if the sandbox is started again.
// It is called for every request and every CheckEvery of every open
// connection, so it must be an in-memory lookup (the edge's route table).
type Sandboxes interface {
	Running(sandboxID string) (since time.Time, ok bool)
}

// Options configures a Server. Links, Starter, Dialer, Sandboxes and Key
// are required.
type Options struct {
	Links     Links
	Starter   Starter
	Dialer    Dialer
	Sandboxes Sandboxes

	// Key signs session cookies (HMAC-SHA256): 32 bytes, the same on
	// every edge, secret. Changing it ends every session.
	Key []byte
	// Domain is the public-URL domain, under which the view hosts are
	// (edge/route's grammar); ServeHTTP reads the view from the Host.
	// Required.
	Domain string

	// Log gets one line per refused exchange and per closed bridge;
	// never a token or cookie. Nil: nothing is logged.
	Log *slog.Logger
	// Now is the clock for link and session expiry. Nil: time.Now.
	Now func() time.Time
	// SessionTTL is how long a wall's session (view-only) makes new
	// connections; its Use and Open, and every desktop or browser
	// session, end with their link's expiry instead. An open connection
	// lasts until the sandbox stops. Zero: 24 h.
	SessionTTL time.Duration
	// PingEvery is the websocket ping interval that keeps idle
	// intermediaries from closing a still desktop. Zero: 20 s.
	PingEvery time.Duration
	// CheckEvery is how often an open connection checks that its
	// sandbox still runs the same run. Zero: 2 s.
	CheckEvery time.Duration
	// StartTimeout bounds StartDesktop plus the dial. Zero: 60 s.
	StartTimeout time.Duration

	// Accounts lists an account's running sandboxes for its wall. Nil:
	// wall hosts answer not_found.
	Accounts Accounts
	// Linker mints the desktop links of the wall's live tiles and Open.
	// Nil: the wall shows pictures only.
	Linker Linker
	// TileWidth is a tile picture's width at most. Zero: 480.
	TileWidth int
	// TileEvery is how often a tile asks its desktop for an update.
	// Zero: 1 s.
	TileEvery time.Duration
	// TileGrace is how long a tile's connection outlives the last wall
	// showing it. Zero: 10 s.
	TileGrace time.Duration
	// NoPictureAfter is how long a tile may hear nothing from its
	// desktop before the wall says "no picture". Zero: 5 s.
	NoPictureAfter time.Duration
	// WallPoll is how often an open wall looks at its tiles' pictures
	// and states (its list of sandboxes follows Accounts.Changed). Zero:
	// 500 ms.
	WallPoll time.Duration
}

// Handler paths on a view host.
const (
	PathPage      = "/"           // the viewer page (query: theme, overlay, viewonly, transport)
	PathSession   = "/session"    // POST: exchange a link's token for the cookie; GET: the session's state
	PathWebsocket = "/websockify" // the websocket bridged to VNC (query: viewonly=1)
	PathAssets    = "/assets/"    // the page's scripts, styles and noVNC
	PathError     = "/error/"     // /error/CODE: a page saying what went wrong
	// PathStream (selkies.go) is the websocket carried to Selkies,
	// PathAudio (sound.go) the sound's.
)

// Server serves view hosts: the viewer page, sessions and the VNC bridge.
type Server struct {
	o   Options
	log *slog.Logger

	mu     sync.Mutex
	conns  map[*bridge]struct{}
	hubs   map[soundKey]*soundHub // the screens listened to (sound.go)
	closed bool

	tiles *tileSet
	done  chan struct{} // closed by Close: open walls' event streams end
}

// New checks o and returns a Server. It starts nothing.
func New(o Options) (*Server, error) {
	var errs []error
	if o.Links == nil {
		errs = append(errs, errors.New("desktop: Options.Links is required"))
	}
	if o.Starter == nil {
		errs = append(errs, errors.New("desktop: Options.Starter is required"))
	}
	if o.Dialer == nil {
		errs = append(errs, errors.New("desktop: Options.Dialer is required"))
	}
	if o.Sandboxes == nil {
		errs = append(errs, errors.New("desktop: Options.Sandboxes is required"))
	}
	if len(o.Key) != 32 {
		errs = append(errs, errors.New("desktop: Options.Key must be 32 bytes"))
	}
	if o.Domain == "" {
		errs = append(errs, errors.New("desktop: Options.Domain is required"))
	}
	o.Domain = strings.ToLower(strings.TrimSuffix(o.Domain, "."))
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	o.Key = append([]byte(nil), o.Key...)
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.SessionTTL <= 0 {
		o.SessionTTL = 24 * time.Hour
	}
	if o.PingEvery <= 0 {
		o.PingEvery = 20 * time.Second
	}
	if o.CheckEvery <= 0 {
		o.CheckEvery = 2 * time.Second
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 60 * time.Second
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	o.TileWidth = cmp.Or(o.TileWidth, 480)
	o.TileEvery = cmp.Or(o.TileEvery, time.Second)
	o.TileGrace = cmp.Or(o.TileGrace, 10*time.Second)
	o.NoPictureAfter = cmp.Or(o.NoPictureAfter, 5*time.Second)
	o.WallPoll = cmp.Or(o.WallPoll, 500*time.Millisecond)
	s := &Server{o: o, log: log, conns: map[*bridge]struct{}{}, hubs: map[soundKey]*soundHub{}, done: make(chan struct{})}
	s.tiles = &tileSet{s: s, m: map[string]*tile{}}
	return s, nil
}

// ServeHTTP serves a request on any view host, the view read from its
// Host by edge/route's grammar (the edge mounts the Server as its
// Options.Views).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	v, ok := names.ParseView(names.Label(r.Host, s.o.Domain))
	if !ok || (v.Kind != names.ViewDesktop && v.Kind != names.ViewBrowser && (v.Kind != names.ViewWall || s.o.Accounts == nil)) {
		s.errorPage(w, r, "not_found")
		return
	}
	s.ServeView(w, r, v)
}

// Handler returns an http.Handler for one view host.
func (s *Server) Handler(v View) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.ServeView(w, r, v) })
}

// ServeView serves one request on the host of view v.
func (s *Server) ServeView(w http.ResponseWriter, r *http.Request, v View) {
	p := r.URL.Path
	switch {
	case p == PathPage && v.Kind == names.ViewWall:
		s.wallPage(w, r)
	case p == PathPage:
		s.page(w, r, v)
	case p == PathSession:
		s.session(w, r, v)
	case v.Kind == names.ViewWall && s.serveWall(w, r, v):
	case p == PathWebsocket && v.Kind != names.ViewWall:
		s.websocket(w, r, v, &upgrader, (*bridge).serve)
	case p == PathStream && v.Kind != names.ViewWall:
		s.websocket(w, r, v, &streamUpgrader, (*bridge).serveSelkies)
	case p == PathAudio && v.Kind != names.ViewWall:
		s.websocket(w, r, v, &audioUpgrader, (*bridge).serveAudio)
	case len(p) > len(PathAssets) && p[:len(PathAssets)] == PathAssets:
		s.asset(w, r)
	case len(p) > len(PathError) && p[:len(PathError)] == PathError:
		s.errorPage(w, r, p[len(PathError):])
	default:
		s.errorPage(w, r, "not_found")
	}
}

// Close ends every open bridge, wall and tile connection. It is
// idempotent; the Server refuses new websockets afterwards.
func (s *Server) Close() error {
	s.mu.Lock()
	if !s.closed {
		close(s.done)
	}
	s.closed = true
	conns := make([]*bridge, 0, len(s.conns))
	for b := range s.conns {
		conns = append(conns, b)
	}
	s.mu.Unlock()
	for _, b := range conns {
		b.stop(websocketGoingAway, "edge shutting down")
	}
	s.tiles.close()
	return nil
}

func (s *Server) track(b *bridge) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[b] = struct{}{}
	return true
}

func (s *Server) untrack(b *bridge) {
	s.mu.Lock()
	delete(s.conns, b)
	s.mu.Unlock()
}

// Conns is the number of open bridges.
func (s *Server) Conns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

var _ Sandboxes = (*route.Table)(nil)
