package desktop

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"froog.tech/froog/names"
)

// WallSandbox is a running sandbox as the wall shows it.
type WallSandbox struct {
	ID    string    `json:"id"`
	Name  string    `json:"name"`
	Since time.Time `json:"since"` // when this run started
}

// Accounts lists an account's running sandboxes, and says when that may
// have changed. Every open wall calls Running when Changed fires, and
// every tile and live request calls it once, so it must be an in-memory
// lookup (the edge's route table, indexed by account, kept by the change
// feed): a start or a stop shows on the wall as soon as the table has it.
type Accounts interface {
	Running(accountID string) []WallSandbox
	// Changed returns a channel closed when the running sandboxes may
	// next have changed.
	Changed() <-chan struct{}
}

// Linker mints a fresh desktop link for a sandbox of the account (a
// store.DesktopLink of kind desktop, view-only or not, that the wall's
// page opens in an iframe or a new tab) and returns its URL,
// https://desktop--HEX.DOMAIN/#dt_TOKEN. The wall calls it only when a
// person clicks a tile, Use or Open, after checking that the sandbox is
// the account's and running.
type Linker interface {
	DesktopLink(ctx context.Context, r LinkRequest) (url string, err error)
}

// LinkRequest is what the wall asks a Linker for: a link to one run of a
// sandbox of the account, minted on behalf of the key that made the
// wall's link.
type LinkRequest struct {
	AccountID string
	SandboxID string
	Run       time.Time // the sandbox's run (WallSandbox.Since): the link opens nothing after it
	ViewOnly  bool
	KeyID     string // the key that made the wall's link ("" if none is known)
}

// Handler paths on a wall host, besides PathPage, PathSession,
// PathAssets and PathError.
const (
	PathWallEvents = "/events" // server-sent events: the sandboxes, and each tile's picture version and state
	PathWallTile   = "/tile/"  // /tile/SANDBOXID.jpg: the tile's current picture
	PathWallLive   = "/live"   // POST {"sandbox_id","mode":"view"|"use"|"open"}: {"url"} of a fresh desktop link
)

// wallEvent is the JSON of a "tile" event.
type wallTileEvent struct {
	ID      string `json:"id"`
	Version uint64 `json:"v"`
	State   string `json:"state"`
}

// serveWall serves the wall's own paths, and reports whether r was for
// one of them.
func (s *Server) serveWall(w http.ResponseWriter, r *http.Request, v View) bool {
	switch p := r.URL.Path; {
	case p == PathWallEvents:
		s.wallEvents(w, r, v)
	case strings.HasPrefix(p, PathWallTile):
		s.wallTile(w, r, v)
	case p == PathWallLive:
		s.wallLive(w, r, v)
	default:
		return false
	}
	return true
}

// wallHeaders are headers with the desktop hosts allowed in frames (the
// live tile is the desktop's own viewer, on its own host).
func (s *Server) wallHeaders(w http.ResponseWriter, r *http.Request) {
	headers(w, r)
	frames := "https://*." + s.o.Domain
	if _, port, ok := names.SplitHostPort(r.Host); ok && port != "" {
		frames += ":" + port
	}
	csp := w.Header().Get("Content-Security-Policy")
	w.Header().Set("Content-Security-Policy", csp+"; frame-src "+frames)
}

func (s *Server) wallPage(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	s.wallHeaders(w, r)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	pages.ExecuteTemplate(w, "wall.html", pageData{Theme: themeOf(r), Overlay: true})
}

// fromOtherSite reports whether a request was made by another site's
// page: the wall's GETs carry a cookie that is SameSite=None.
func fromOtherSite(r *http.Request) bool {
	if o := r.Header.Get("Origin"); o != "" && o != "https://"+r.Host {
		return true
	}
	site := r.Header.Get("Sec-Fetch-Site")
	return site != "" && site != "same-origin" && site != "none"
}

// running returns the account's running sandboxes by name, and the one
// with id if it is among them.
func (s *Server) running(accountID, id string) ([]WallSandbox, bool) {
	list := s.o.Accounts.Running(accountID)
	slices.SortFunc(list, func(a, b WallSandbox) int { return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID)) })
	found := slices.ContainsFunc(list, func(sb WallSandbox) bool { return sb.ID == id })
	return list, found
}

// runningOne returns the account's running sandbox with id, if it is.
func (s *Server) runningOne(accountID, id string) (WallSandbox, bool) {
	for _, sb := range s.o.Accounts.Running(accountID) {
		if sb.ID == id {
			return sb, true
		}
	}
	return WallSandbox{}, false
}

// wallEvents streams the wall: a "sandboxes" event with the whole list
// whenever it changes, and a "tile" event whenever a tile's picture or
// state does. The stream holds the tiles it shows: while it is open
// their desktops are fetched, and when it ends they are let go.
func (s *Server) wallEvents(w http.ResponseWriter, r *http.Request, v View) {
	if fromOtherSite(r) {
		s.writeRefusal(w, r, v, refuse(CodeNoSession, errors.New("events from another site")))
		return
	}
	sess, err := s.cookieSession(r, v)
	if err != nil {
		s.writeRefusal(w, r, v, err)
		return
	}
	headers(w, r)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	rc := http.NewResponseController(w)

	held := map[string]*tile{}
	sent := map[string]wallTileEvent{}
	defer func() {
		for _, t := range held {
			s.tiles.release(t)
		}
	}()
	// The list follows the feed (changed); the tick is the tiles'
	// pictures and states, which have no feed.
	tick := time.NewTicker(s.o.WallPoll)
	defer tick.Stop()
	var (
		lastList  []byte
		lastWrite = time.Now()
		buf       []byte
		list      []WallSandbox
		changed   <-chan struct{}
		stale     = true
	)
	for {
		buf = buf[:0]
		now := time.Now()
		if s.o.Now().Unix() >= sess.Expires {
			buf = append(buf, "event: end\ndata: "+CodeNoSession+"\n\n"...)
			rc.SetWriteDeadline(time.Now().Add(writeWait))
			w.Write(buf)
			rc.Flush()
			return
		}
		if stale {
			changed = s.o.Accounts.Changed() // before the read: no change slips between
			list, _ = s.running(sess.SandboxID, "")
			if list == nil {
				list = []WallSandbox{}
			}
			stale = false
		}
		if js, _ := json.Marshal(list); string(js) != string(lastList) {
			lastList = js
			buf = fmt.Appendf(buf, "event: sandboxes\ndata: %s\n\n", js)
			shown := make(map[string]bool, len(list))
			for _, sb := range list {
				shown[sb.ID] = true
				if held[sb.ID] == nil {
					held[sb.ID] = s.tiles.acquire(sb.ID)
				}
			}
			for id, t := range held {
				if !shown[id] {
					s.tiles.release(t)
					delete(held, id)
					delete(sent, id)
				}
			}
		}
		for _, sb := range list {
			ver, state := held[sb.ID].state(now, s.o.NoPictureAfter)
			ev := wallTileEvent{ID: sb.ID, Version: ver, State: state}
			if sent[sb.ID] != ev {
				sent[sb.ID] = ev
				js, _ := json.Marshal(ev)
				buf = fmt.Appendf(buf, "event: tile\ndata: %s\n\n", js)
			}
		}
		if len(buf) == 0 && now.Sub(lastWrite) >= 15*time.Second {
			buf = append(buf, ": ping\n\n"...) // keeps intermediaries from closing a still wall
		}
		if len(buf) > 0 {
			rc.SetWriteDeadline(time.Now().Add(writeWait))
			if _, err := w.Write(buf); err != nil {
				return
			}
			if err := rc.Flush(); err != nil {
				return
			}
			// Off until the next write: over HTTP/2 a write deadline
			// that passes resets the stream even when nothing is being
			// written, which ended a still wall's stream after writeWait.
			rc.SetWriteDeadline(time.Time{})
			lastWrite = now
		}
		select {
		case <-r.Context().Done():
			return
		case <-s.done:
			return
		case <-changed:
			stale = true
		case <-tick.C:
		}
	}
}

// wallTile serves a tile's current picture, to a session of the account
// whose running sandbox it is, while some wall holds the tile.
func (s *Server) wallTile(w http.ResponseWriter, r *http.Request, v View) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if fromOtherSite(r) {
		s.writeRefusal(w, r, v, refuse(CodeNoSession, errors.New("tile from another site")))
		return
	}
	sess, err := s.cookieSession(r, v)
	if err != nil {
		s.writeRefusal(w, r, v, err)
		return
	}
	id, ok := strings.CutSuffix(strings.TrimPrefix(r.URL.Path, PathWallTile), ".jpg")
	var pic []byte
	var ver uint64
	if ok {
		if _, mine := s.running(sess.SandboxID, id); mine {
			if t := s.tiles.get(id); t != nil {
				pic, ver = t.picture()
			}
		}
	}
	headers(w, r)
	w.Header().Set("Cache-Control", "no-store")
	if pic == nil {
		http.Error(w, "no picture", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "image/jpeg")
	w.Header().Set("ETag", fmt.Sprintf(`"%d"`, ver))
	w.Write(pic)
}

type liveRequest struct {
	SandboxID string `json:"sandbox_id"`
	Mode      string `json:"mode"` // view (a live view-only tile), use (input, on the wall), open (a new tab)
}

// wallLive mints a fresh desktop link for one of the account's running
// sandboxes: view-only for "view", with input for "use" and "open".
// "view" links have overlay=0, so the tile shows the screen alone; "view"
// and "use" links have wall=1, so that Esc in them goes back to the grid.
func (s *Server) wallLive(w http.ResponseWriter, r *http.Request, v View) {
	headers(w, r)
	w.Header().Set("Cache-Control", "no-store")
	if r.Method != http.MethodPost {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if !sameOrigin(r) {
		s.writeRefusal(w, r, v, refuse(CodeNoSession, errors.New("live request from another origin")))
		return
	}
	sess, err := s.cookieSession(r, v)
	if err != nil {
		s.writeRefusal(w, r, v, err)
		return
	}
	var req liveRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&req); err != nil || (req.Mode != "view" && req.Mode != "use" && req.Mode != "open") {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	sb, mine := s.runningOne(sess.SandboxID, req.SandboxID)
	if !mine {
		s.writeRefusal(w, r, v, refuse(CodeWrongView, errors.New("not a running sandbox of this account")))
		return
	}
	// Input only while the wall's link is young: a wall session watches
	// for a day, but must not hand out the desktops' keyboards for one.
	if req.Mode != "view" && s.o.Now().Unix() >= sess.Input {
		s.writeRefusal(w, r, v, refuse(CodeLinkExpired, errors.New("the wall's link is too old for input")))
		return
	}
	if s.o.Linker == nil {
		s.writeRefusal(w, r, v, refuse(CodeDesktopFailed, errors.New("no Linker")))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	link, err := s.o.Linker.DesktopLink(ctx, LinkRequest{AccountID: sess.SandboxID, SandboxID: sb.ID, Run: sb.Since, ViewOnly: req.Mode == "view", KeyID: sess.Key})
	if err != nil {
		s.writeRefusal(w, r, v, refuse(CodeDesktopFailed, err))
		return
	}
	if req.Mode != "open" {
		if u, err := url.Parse(link); err == nil {
			q := u.Query()
			if req.Mode == "view" {
				q.Set("overlay", "0")
			}
			// On the wall, Esc goes back to the grid: the viewer hands
			// it to the wall instead of to the desktop.
			q.Set("wall", "1")
			u.RawQuery = q.Encode()
			link = u.String()
		}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]string{"url": link})
}
