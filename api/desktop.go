package api

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"froog.tech/froog/guest"
	"froog.tech/froog/names"
	"froog.tech/froog/store"
)

// createDesktopLink answers POST /v1/sandboxes/{name}/desktop: a link to
// the sandbox's desktop, opened on its own host, the token after the #.
// ?viewonly=1 makes a link that can never send input; ?theme=dark|light.
func (s *Server) createDesktopLink(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	theme, err := viewTheme(q, "viewonly")
	if err != nil {
		return err
	}
	viewOnly := false
	switch q.Get("viewonly") {
	case "", "0", "false":
	case "1", "true":
		viewOnly = true
	default:
		return invalid("viewonly must be 1 or 0")
	}
	return s.viewLink(w, r, names.ViewDesktop, viewOnly, theme, "")
}

// viewTheme checks a view link's query: theme (dark or light, the
// docs' ?theme=) and the parameters in also, no other.
func viewTheme(q url.Values, also ...string) (string, error) {
	for k := range q {
		if k != "theme" && !slices.Contains(also, k) {
			return "", invalid("unknown query parameter %q", k)
		}
	}
	theme := q.Get("theme")
	if theme != "" && theme != "dark" && theme != "light" {
		return "", invalid("theme must be dark or light")
	}
	return theme, nil
}

type browserRequest struct {
	Profile *string `json:"profile"`
	unsupported
}

// createBrowserLink answers POST /v1/sandboxes/{name}/browser: a link to
// the sandbox's browser view (only Chromium, on a screen of its own) with
// an optional profile folder in the body; ?theme=dark|light as for the
// desktop.
func (s *Server) createBrowserLink(w http.ResponseWriter, r *http.Request) error {
	theme, err := viewTheme(r.URL.Query())
	if err != nil {
		return err
	}
	var req browserRequest
	if err := readJSON(r, maxBody, &req, true); err != nil {
		return err
	}
	profile := ""
	if req.Profile != nil {
		if err := checkProfile(*req.Profile); err != nil {
			return err
		}
		profile = *req.Profile
	}
	return s.viewLink(w, r, names.ViewBrowser, false, theme, profile)
}

// checkProfile accepts an absolute folder outside the system's own, by
// the rule froog-desktop applies in the sandbox.
func checkProfile(p string) error {
	if err := guest.ValidProfile(p); err != nil {
		return invalid("%s", err.Error())
	}
	return nil
}

// viewLink makes a link of kind for the path's sandbox.
func (s *Server) viewLink(w http.ResponseWriter, r *http.Request, kind string, viewOnly bool, theme, profile string) error {
	sb, err := s.sandboxFor(r)
	if err != nil {
		return err
	}
	label := names.ViewLabel(kind, sb.ID)
	if label == "" {
		return errorf(http.StatusInternalServerError, "internal", "sandbox %q has no %s host", sb.Name, kind)
	}
	// A link belongs to one run: it opens nothing after a stop, so one
	// made while the sandbox is stopped (or stopping) would open nothing.
	if sb.State != store.StateRunning || sb.DesiredState != store.StateRunning || sb.StartedAt == nil {
		return errorf(http.StatusConflict, "conflict", "sandbox %q is not running: its %s opens only while it runs (froog start %s)", sb.Name, kind, sb.Name)
	}
	token, l := store.NewDesktopLink(store.DesktopLink{SandboxID: sb.ID, Kind: kind, ViewOnly: viewOnly, Profile: profile,
		Run: *sb.StartedAt, KeyID: keyID(r)}, s.now())
	detail := map[string]string{"view_only": strconv.FormatBool(viewOnly)}
	if _, err := s.store.CreateDesktopLink(r.Context(), l, s.audit(r, kind+".link", sb.Name, detail)); err != nil {
		return err
	}
	q := url.Values{}
	if theme != "" {
		q.Set("theme", theme)
	}
	if viewOnly {
		q.Set("viewonly", "1")
	}
	u := s.link(label, "")
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	writeJSON(w, http.StatusCreated, map[string]any{"url": u + "#" + token, "expires_at": l.ExpiresAt})
	return nil
}

// createWallLink answers POST /v1/wall: a link to the account's wall, on
// the account's own wall host, the token after the #. The wall shows
// every running sandbox of the account; a key limited to some sandboxes
// cannot make one.
func (s *Server) createWallLink(w http.ResponseWriter, r *http.Request) error {
	if err := checkQuery(r.URL.Query()); err != nil {
		return err
	}
	k := keyFrom(r.Context())
	if limited(k) {
		return errorf(http.StatusForbidden, "forbidden", "a key limited to some sandboxes cannot open the account's wall")
	}
	label := names.ViewLabel(names.ViewWall, k.AccountID)
	if label == "" {
		return errorf(http.StatusInternalServerError, "internal", "the account has no wall host")
	}
	token, l := store.NewDesktopLink(store.DesktopLink{AccountID: k.AccountID, Kind: names.ViewWall, ViewOnly: true, KeyID: k.ID}, s.now())
	if _, err := s.store.CreateDesktopLink(r.Context(), l, s.audit(r, "wall.link", "", map[string]string{})); err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, map[string]any{"url": s.link(label, "") + "#" + token, "expires_at": l.ExpiresAt})
	return nil
}

// keyID is the id of the request's API key ("" if none).
func keyID(r *http.Request) string {
	if k := keyFrom(r.Context()); k != nil {
		return k.ID
	}
	return ""
}
