package desktop

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	"froog.tech/froog/names"
	"froog.tech/froog/store"
)

//go:embed assets
var assets embed.FS

var pages = template.Must(template.ParseFS(assets, "assets/*.html"))

// headers are on every answer of a view host. The page runs only its own
// scripts, talks only to its own host, and may be framed by any site
// (embeds); it never sends a Referer.
func headers(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "+
		"connect-src 'self' wss://"+r.Host+"; frame-ancestors *; base-uri 'none'; form-action 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
}

// sameOrigin reports whether a request comes from a page of this host.
// The cookie is SameSite=None (for embeds), so the websocket and the
// exchange must check it themselves.
func sameOrigin(r *http.Request) bool {
	return r.Header.Get("Origin") == "https://"+r.Host
}

// pageData is what the page and error templates get.
type pageData struct {
	Theme   string // "dark" or "light"
	Overlay bool
	Code    string
	Title   string
	Message string
	Retry   bool
}

func themeOf(r *http.Request) string {
	if r.URL.Query().Get("theme") == "light" {
		return "light"
	}
	return "dark"
}

func (s *Server) page(w http.ResponseWriter, r *http.Request, v View) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	headers(w, r)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	pages.ExecuteTemplate(w, "viewer.html", pageData{Theme: themeOf(r), Overlay: r.URL.Query().Get("overlay") != "0"})
}

// errorTexts are the error pages: what happened and what to do, for a
// person.
var errorTexts = map[string]struct {
	status         int
	title, message string
	retry          bool
}{
	CodeLinkInvalid:    {http.StatusForbidden, "This link doesn't open anything", "It may be incomplete or mistyped. Ask for a new desktop link (froog desktop NAME --print).", false},
	CodeLinkExpired:    {http.StatusGone, "This link has expired", "A desktop link must be opened within 10 minutes of being made. Ask for a new one (froog desktop NAME --print).", false},
	CodeWrongView:      {http.StatusForbidden, "This link is for another view", "A link opens only its own sandbox's desktop, or only its browser view. Use the link made for this one.", false},
	CodeNoSession:      {http.StatusForbidden, "Open a desktop link first", "This page has no session: open the desktop link again, or ask for a new one.", false},
	CodeSandboxStopped: {http.StatusServiceUnavailable, "The sandbox has stopped", "Its desktop ended with it. Start the sandbox and ask for a new desktop link.", false},
	CodeDesktopFailed:  {http.StatusBadGateway, "The desktop didn't start", "froog could not start the desktop inside the sandbox, or could not reach it. Try again in a moment.", true},
	CodeRefused:        {http.StatusBadRequest, "The connection was closed", "The viewer sent something this session does not allow. Reload the page to connect again.", true},
	"not_found":        {http.StatusNotFound, "Nothing here", "This address has no page. Open the desktop link you were given.", false},
}

func (s *Server) errorPage(w http.ResponseWriter, r *http.Request, code string) {
	t, ok := errorTexts[code]
	if !ok {
		code, t = "not_found", errorTexts["not_found"]
	}
	headers(w, r)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(t.status)
	pages.ExecuteTemplate(w, "error.html", pageData{Theme: themeOf(r), Overlay: true, Code: code, Title: t.title, Message: t.message, Retry: t.retry})
}

// sessionState is the JSON answer of /session.
type sessionState struct {
	Kind      string    `json:"kind"`
	ViewOnly  bool      `json:"view_only"`
	Locked    bool      `json:"locked"` // the link is view-only: input can never be turned on
	ExpiresAt time.Time `json:"expires_at"`
}

type exchangeRequest struct {
	Token    string `json:"token"`
	ViewOnly bool   `json:"view_only"`
}

func (s *Server) session(w http.ResponseWriter, r *http.Request, v View) {
	headers(w, r)
	w.Header().Set("Cache-Control", "no-store")
	var (
		sess session
		err  error
	)
	switch r.Method {
	case http.MethodPost:
		if !sameOrigin(r) {
			err = refuse(CodeLinkInvalid, errors.New("exchange from another origin"))
			break
		}
		var req exchangeRequest
		if derr := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&req); derr != nil {
			err = refuse(CodeLinkInvalid, errors.New("exchange body is not JSON"))
			break
		}
		if sess, err = s.exchange(r, v, req); err == nil {
			http.SetCookie(w, s.cookie(sess))
		}
	case http.MethodGet:
		sess, err = s.cookieSession(r, v)
	default:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		s.writeRefusal(w, r, v, err)
		return
	}
	json.NewEncoder(w).Encode(sessionState{Kind: sess.Kind, ViewOnly: sess.ViewOnly, Locked: sess.Locked, ExpiresAt: time.Unix(sess.Expires, 0).UTC()})
}

// exchange checks a link's token for view v and makes its session. A
// desktop or browser link opens only the run of the sandbox it was made
// in, and its sessions make new connections until the link expires (an
// open one lasts until the sandbox stops). The first view-only exchange
// locks the link view-only for good: whoever reads an embed's address
// cannot exchange the token again with input.
func (s *Server) exchange(r *http.Request, v View, req exchangeRequest) (session, error) {
	if !validToken(req.Token) {
		return session{}, refuse(CodeLinkInvalid, errors.New("not a desktop token"))
	}
	hash := HashToken(req.Token)
	l, err := s.o.Links.DesktopLink(r.Context(), hash)
	switch {
	case errors.Is(err, ErrLinkNotFound):
		return session{}, refuse(CodeLinkInvalid, errors.New("no such link"))
	case err != nil:
		return session{}, err
	}
	now := s.o.Now()
	switch {
	case linkTarget(l) != v.ID || l.Kind != v.Kind:
		return session{}, refuse(CodeWrongView, errors.New("link for "+linkTarget(l)+" "+l.Kind))
	case !now.Before(l.ExpiresAt):
		return session{}, refuse(CodeLinkExpired, errors.New("link expired at "+l.ExpiresAt.UTC().Format(time.RFC3339)))
	}
	if err := s.vouched(r.Context(), l.KeyID, l.CreatedAt, now); err != nil {
		return session{}, refuse(CodeLinkInvalid, err)
	}
	if v.Kind == names.ViewWall { // an account's: no sandbox run to belong to
		return session{SandboxID: v.ID, Kind: v.Kind, ViewOnly: true, Locked: true, Key: l.KeyID, Minted: l.CreatedAt.UnixMicro(),
			Expires: now.Add(s.o.SessionTTL).Unix(), Input: l.ExpiresAt.Unix()}, nil
	}
	since, ok := s.o.Sandboxes.Running(v.ID)
	switch {
	case !ok:
		return session{}, refuse(CodeSandboxStopped, errors.New("sandbox not running"))
	case l.Run.IsZero() || l.Run.UnixMicro() != since.UnixMicro():
		return session{}, refuse(CodeSandboxStopped, fmt.Errorf("link made in another run of sandbox %s", v.ID))
	}
	if req.ViewOnly && !l.ViewOnly {
		if l, err = s.o.Links.LockDesktopLinkViewOnly(r.Context(), hash); err != nil {
			return session{}, fmt.Errorf("lock the link view-only: %w", err)
		}
	}
	return session{
		SandboxID: v.ID,
		Kind:      v.Kind,
		ViewOnly:  l.ViewOnly || req.ViewOnly,
		Locked:    l.ViewOnly,
		Profile:   l.Profile,
		Run:       since.UnixMicro(),
		Expires:   l.ExpiresAt.Unix(),
		Key:       l.KeyID,
		Minted:    l.CreatedAt.UnixMicro(),
	}, nil
}

// vouched checks that the API key that made a link (at minted) still
// vouches for it: not revoked, expired or rotated since. A link made by
// no key (keyID "") has none to end it.
func (s *Server) vouched(ctx context.Context, keyID string, minted, now time.Time) error {
	if keyID == "" {
		return nil
	}
	k, err := s.o.Links.APIKeyByID(ctx, keyID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("the API key %s that made the link is gone", keyID)
	case err != nil:
		return err
	case !k.Vouches(minted, now):
		return fmt.Errorf("the API key %s that made the link was revoked, rotated or expired since", keyID)
	}
	return nil
}

// cookie is the session's cookie, kept by the browser until the session
// makes no more connections.
func (s *Server) cookie(sess session) *http.Cookie {
	return &http.Cookie{
		Name: CookieName, Value: seal(s.o.Key, sess), Path: "/",
		MaxAge: max(int(sess.Expires-s.o.Now().Unix()), 1), Secure: true, HttpOnly: true,
		SameSite: http.SameSiteNoneMode, Partitioned: true,
	}
}

// cookieSession reads and checks the request's session for view v.
func (s *Server) cookieSession(r *http.Request, v View) (session, error) {
	c, err := r.Cookie(CookieName)
	if err != nil {
		return session{}, refuse(CodeNoSession, errors.New("no session cookie"))
	}
	sess, err := open(s.o.Key, c.Value)
	if err != nil {
		return session{}, refuse(CodeNoSession, err)
	}
	since, ok := s.o.Sandboxes.Running(v.ID)
	now := s.o.Now()
	if err := sess.check(v, now, since, ok); err != nil {
		return session{}, err
	}
	if err := s.vouched(r.Context(), sess.Key, time.UnixMicro(sess.Minted), now); err != nil {
		return session{}, refuse(CodeNoSession, err)
	}
	return sess, nil
}

// writeRefusal answers a refused /session or websocket request with
// {"error":{"code","message"}}, and logs it without the token or cookie.
func (s *Server) writeRefusal(w http.ResponseWriter, r *http.Request, v View, err error) {
	code, status, msg := "unavailable", http.StatusServiceUnavailable, "the desktop service is unavailable; try again"
	var e *Error
	if errors.As(err, &e) {
		t := errorTexts[e.Code]
		code, status, msg = e.Code, t.status, t.title
	}
	s.log.Info("desktop refused", "sandbox", v.ID, "kind", v.Kind, "path", r.URL.Path, "code", code, "err", err.Error())
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

var etags sync.Map // asset path → quoted ETag

func (s *Server) asset(w http.ResponseWriter, r *http.Request) {
	name := "assets/" + strings.TrimPrefix(r.URL.Path, PathAssets)
	if !fs.ValidPath(name) || strings.HasSuffix(name, ".html") || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
		s.errorPage(w, r, "not_found")
		return
	}
	b, err := assets.ReadFile(name)
	if err != nil {
		s.errorPage(w, r, "not_found")
		return
	}
	tag, ok := etags.Load(name)
	if !ok {
		sum := sha256.Sum256(b)
		tag, _ = etags.LoadOrStore(name, `"`+hex.EncodeToString(sum[:8])+`"`)
	}
	headers(w, r)
	ct := mime.TypeByExtension(path.Ext(name))
	if ct == "" {
		ct = "text/plain; charset=utf-8"
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("ETag", tag.(string))
	if r.Header.Get("If-None-Match") == tag.(string) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Write(b)
}

// linkTarget is what a link opens: its sandbox, or for a wall its account.
func linkTarget(l Link) string {
	if l.Kind == names.ViewWall {
		return l.AccountID
	}
	return l.SandboxID
}
