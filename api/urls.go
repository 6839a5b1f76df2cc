package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"froog.tech/froog/names"
	"froog.tech/froog/store"
)

// Token prefixes (DESIGN.md).
const (
	urlTokenPrefix    = "pt_"
	viewerTokenPrefix = "pvt_"
)

const (
	maxTitle       = 100
	maxTokenLabel  = 100
	minTokenTTL    = 60
	maxTokenTTL    = 30 * 24 * 3600
	defaultTokenTT = 24 * 3600
)

// link is the public address of host name, with a token when given.
func (s *Server) link(hostname, token string) string {
	u := names.HostURL(hostname, s.domain, s.port)
	if token != "" {
		u += "?_token=" + token
	}
	return u
}

type urlView struct {
	Port      int        `json:"port"`
	URL       string     `json:"url"`
	Host      string     `json:"host"`
	Public    bool       `json:"public"`
	Title     string     `json:"title"`
	ShowPorts bool       `json:"show_ports"`
	Capture   bool       `json:"capture"`
	Inbox     *inboxView `json:"inbox,omitempty"`
	policyView
	Routes    []routeView `json:"routes"`
	CreatedAt time.Time   `json:"created_at"`
	UpdatedAt time.Time   `json:"updated_at"`
}

// viewURL shows u; a private URL's link carries its token only for a key
// that can host (it is the URL's password).
func (s *Server) viewURL(u *store.URL, k *store.APIKey) (urlView, error) {
	v := urlView{Port: u.Port, Host: names.Host(u.Hostname, s.domain), Public: u.Public, Title: u.Title, ShowPorts: u.ShowPorts, Capture: u.Capture, Inbox: viewInbox(u.Inbox), policyView: viewPolicy(u), Routes: viewRoutes(u), CreatedAt: u.CreatedAt, UpdatedAt: u.UpdatedAt}
	token := ""
	if !u.Public && can(k, "host") {
		t, err := s.sealer.open(u.TokenSealed, u.ID)
		if err != nil {
			return v, fmt.Errorf("url %s: %w", u.ID, err)
		}
		token = t
	}
	v.URL = s.link(u.Hostname, token)
	return v, nil
}

func portFrom(r *http.Request) (int, error) {
	p, err := strconv.Atoi(r.PathValue("port"))
	if err != nil || p < 1 || p > 65535 {
		return 0, badRequest("invalid_value", "the port must be a number from 1 to 65535")
	}
	return p, nil
}

// urlFor finds the sandbox and the URL of the port in the path.
func (s *Server) urlFor(r *http.Request) (*store.Sandbox, *store.URL, error) {
	port, err := portFrom(r)
	if err != nil {
		return nil, nil, err
	}
	sb, err := s.sandboxFor(r)
	if err != nil {
		return nil, nil, err
	}
	u, err := s.store.URL(r.Context(), sb.ID, port)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, errorf(http.StatusNotFound, "not_found", "port %d of %s has no URL", port, sb.Name)
	}
	if err != nil {
		return nil, nil, err
	}
	return sb, &u, nil
}

func (s *Server) listURLs(w http.ResponseWriter, r *http.Request) error {
	k := keyFrom(r.Context())
	sb, err := s.sandboxFor(r)
	if err != nil {
		return err
	}
	list, err := s.store.URLs(r.Context(), sb.ID)
	if err != nil {
		return err
	}
	out := make([]urlView, len(list))
	for i := range list {
		if out[i], err = s.viewURL(&list[i], k); err != nil {
			return err
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

type urlRequest struct {
	Port      *int    `json:"port"`
	Public    *bool   `json:"public"`
	Subdomain *string `json:"subdomain"`
	Title     *string `json:"title"`
	// ShowPorts: absent keeps it; true lets every visitor the URL lets
	// in read which ports listen when its own does not (the edge's page).
	ShowPorts *bool `json:"show_ports"`
	// Capture: absent keeps it (but a change of public or private turns
	// it off); true makes the edge keep the URL's exchanges' headers and
	// first body bytes for its owner (traffic.go).
	Capture *bool `json:"capture"`
	// Inbox: absent changes nothing, null turns it off (inbox.go).
	Inbox json.RawMessage `json:"inbox"`
	// The policy (urls_policy.go): absent keeps it, null takes it off.
	AllowIPs       json.RawMessage `json:"allow_ips"`
	RateLimit      json.RawMessage `json:"rate_limit"`
	BandwidthMbit  json.RawMessage `json:"bandwidth_mbit"`
	FrameAncestors json.RawMessage `json:"frame_ancestors"`
	// Routes (urls_routes.go): absent keeps them, null or [] takes them
	// off.
	Routes json.RawMessage `json:"routes"`
}

func (req *urlRequest) check() error {
	if req.Port == nil {
		return invalid("port is required")
	}
	if *req.Port < 1 || *req.Port > 65535 {
		return invalid("port must be from 1 to 65535")
	}
	if req.Subdomain != nil {
		switch err := names.CheckSubdomain(*req.Subdomain); err {
		case names.ErrSubdomainSyntax:
			return invalid("%s", err.Error())
		case names.ErrSubdomainTaken:
			return errorf(http.StatusConflict, "subdomain_taken", "subdomain %q is taken", *req.Subdomain)
		}
	}
	if req.Title != nil && (len([]rune(*req.Title)) > maxTitle || strings.ContainsAny(*req.Title, "\r\n")) {
		return invalid("title is up to %d characters on one line", maxTitle)
	}
	return nil
}

func (s *Server) putURL(w http.ResponseWriter, r *http.Request) error {
	k := keyFrom(r.Context())
	var req urlRequest
	if err := readJSON(r, maxBody, &req, false); err != nil {
		return err
	}
	if err := req.check(); err != nil {
		return err
	}
	inbox, setInbox, err := parseInbox(req.Inbox)
	if err != nil {
		return err
	}
	policy, err := parsePolicy(&req)
	if err != nil {
		return err
	}
	sb, err := s.sandboxFor(r)
	if err != nil {
		return err
	}
	port, public := *req.Port, req.Public != nil && *req.Public
	now := s.now()
	var u store.URL
	created := false
	// A default name can collide with one already taken: draw again.
	for attempt := 0; ; attempt++ {
		ev := s.audit(r, "url.update", sb.Name, map[string]string{"port": strconv.Itoa(port), "public": strconv.FormatBool(public)})
		u, err = s.store.PutURL(r.Context(), sb.ID, port, func(old *store.URL, ev *store.AuditEvent) (store.URL, error) {
			var u store.URL
			created = old == nil
			if created {
				u = store.URL{ID: store.NewID("url"), Hostname: names.NewName(sb.Name, port), CreatedAt: now}
				ev.Action = "url.create"
			} else {
				u = *old
			}
			if req.Subdomain != nil {
				u.Hostname = *req.Subdomain
				ev.Detail["subdomain"] = u.Hostname
			}
			if req.Title != nil {
				u.Title = *req.Title
			}
			if req.ShowPorts != nil {
				u.ShowPorts = *req.ShowPorts
				ev.Detail["show_ports"] = strconv.FormatBool(u.ShowPorts)
			}
			setCapture(&u, req.Capture, old != nil && old.Public != public, ev.Detail)
			policy.apply(&u, ev.Detail)
			if setInbox {
				u.Inbox = nil
				ev.Detail["inbox"] = "off"
				if inbox != nil {
					u.Inbox = s.inbox(inbox, u.ID)
					ev.Detail["inbox"] = "on"
				}
			}
			u.Public, u.UpdatedAt = public, now
			u.TokenHash, u.TokenSealed = "", nil
			if !public {
				// Hosting a port again without public makes a new token.
				token := NewSecret(urlTokenPrefix)
				u.TokenHash, u.TokenSealed = store.HashSecret(token), s.sealer.seal(token, u.ID)
			}
			return u, nil
		}, ev)
		if errors.Is(err, store.ErrConflict) {
			if req.Subdomain != nil {
				return errorf(http.StatusConflict, "subdomain_taken", "subdomain %q is taken", *req.Subdomain)
			}
			if attempt < 5 {
				continue
			}
		}
		break
	}
	if err != nil {
		return err
	}
	v, err := s.viewURL(&u, k)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, v)
	return nil
}

// setCapture turns u's capture on or off as asked (nil: as it was), and
// off when the URL changes between public and private (flipped) unless
// the same request turns it on: what was captured under one audience is
// not shown under another. The audit event says so.
func setCapture(u *store.URL, want *bool, flipped bool, detail map[string]string) {
	was := u.Capture
	switch {
	case want != nil:
		u.Capture = *want
	case flipped:
		u.Capture = false
	}
	if want != nil || u.Capture != was {
		detail["capture"] = strconv.FormatBool(u.Capture)
	}
}

func (s *Server) deleteURL(w http.ResponseWriter, r *http.Request) error {
	sb, u, err := s.urlFor(r)
	if err != nil {
		return err
	}
	ev := s.audit(r, "url.delete", sb.Name, map[string]string{"port": strconv.Itoa(u.Port)})
	if err := s.store.DeleteURL(r.Context(), sb.ID, u.Port, ev); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"port": u.Port, "deleted": true})
	return nil
}

type tokenView struct {
	ID        string    `json:"id"`
	Token     string    `json:"token,omitempty"`
	URL       string    `json:"url,omitempty"`
	Label     string    `json:"label"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
}

func (s *Server) listURLTokens(w http.ResponseWriter, r *http.Request) error {
	_, u, err := s.urlFor(r)
	if err != nil {
		return err
	}
	list, err := s.store.URLTokens(r.Context(), u.ID, s.now())
	if err != nil {
		return err
	}
	out := make([]tokenView, len(list))
	for i, t := range list {
		out[i] = tokenView{ID: t.ID, Label: t.Label, CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

type tokenRequest struct {
	TTLSecs *int64  `json:"ttl_secs"`
	Label   *string `json:"label"`
}

func (s *Server) createURLToken(w http.ResponseWriter, r *http.Request) error {
	var req tokenRequest
	if err := readJSON(r, maxBody, &req, true); err != nil {
		return err
	}
	ttl := int64(defaultTokenTT)
	if req.TTLSecs != nil {
		if *req.TTLSecs < minTokenTTL || *req.TTLSecs > maxTokenTTL {
			return invalid("ttl_secs must be from %d to %d", minTokenTTL, maxTokenTTL)
		}
		ttl = *req.TTLSecs
	}
	label := ""
	if req.Label != nil {
		if len([]rune(*req.Label)) > maxTokenLabel || strings.ContainsAny(*req.Label, "\r\n") {
			return invalid("label is up to %d characters on one line", maxTokenLabel)
		}
		label = *req.Label
	}
	sb, u, err := s.urlFor(r)
	if err != nil {
		return err
	}
	if u.Public {
		return errorf(http.StatusConflict, "url_public", "port %d of %s is public: it has no tokens", u.Port, sb.Name)
	}
	now := s.now()
	secret := NewSecret(viewerTokenPrefix)
	tok := store.URLToken{URLID: u.ID, Hash: store.HashSecret(secret), Label: label, CreatedAt: now, ExpiresAt: now.Add(time.Duration(ttl) * time.Second)}
	ev := s.audit(r, "url_token.create", sb.Name, map[string]string{"port": strconv.Itoa(u.Port), "label": label, "ttl_secs": strconv.FormatInt(ttl, 10)})
	tok, err = s.store.CreateURLToken(r.Context(), tok, ev)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, tokenView{ID: tok.ID, Token: secret, URL: s.link(u.Hostname, secret), Label: tok.Label, CreatedAt: tok.CreatedAt, ExpiresAt: tok.ExpiresAt})
	return nil
}

func (s *Server) revokeURLToken(w http.ResponseWriter, r *http.Request) error {
	sb, u, err := s.urlFor(r)
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	ev := s.audit(r, "url_token.revoke", sb.Name, map[string]string{"port": strconv.Itoa(u.Port), "token_id": id})
	err = s.store.RevokeURLToken(r.Context(), u.ID, id, s.now(), ev)
	if errors.Is(err, store.ErrNotFound) {
		return errorf(http.StatusNotFound, "not_found", "no live token %q on port %d of %s", id, u.Port, sb.Name)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "revoked": true})
	return nil
}
