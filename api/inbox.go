package api

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"froog.tech/froog/store"
)

// A URL's webhook inbox, as its owner sets it on POST …/urls, and its
// deliveries: listed, redelivered, purged. The verify secret is sealed
// here (the store and its logs never hold it in the clear) and opened
// only by the edge (InboxSecretOpener); no answer carries it.

// Inbox providers (the edge's verify): kept in step with edge.KnownProvider.
var inboxProviders = []string{"github", "stripe", "slack", "standard"}

const (
	maxInboxBody    = 1024
	maxInboxSecret  = 256
	maxDeliveryList = 100
)

var inboxMethod = regexp.MustCompile(`^[A-Z]{1,16}$`)

type inboxRequest struct {
	Match  *string `json:"match"`
	Status *int    `json:"status"`
	Body   *string `json:"body"`
	Verify *struct {
		Provider string `json:"provider"`
		Secret   string `json:"secret"`
	} `json:"verify"`
}

// inboxAD binds a sealed verify secret to its URL.
func inboxAD(urlID string) string { return "inbox:" + urlID }

// InboxSecretOpener gives the edge what opens the verify secrets the API
// seals with key (the shared secret key).
func InboxSecretOpener(key []byte) (func(sealed []byte, urlID string) (string, error), error) {
	s, err := newSealer(key)
	if err != nil {
		return nil, err
	}
	return func(sealed []byte, urlID string) (string, error) { return s.open(sealed, inboxAD(urlID)) }, nil
}

// inboxSpec is an inbox as the owner asked for it, checked.
type inboxSpec struct {
	method, prefix, body string
	status               int
	provider, secret     string
}

// parseInbox reads the inbox field of POST …/urls: absent (nil, false)
// changes nothing, null turns the inbox off (nil, true).
func parseInbox(raw json.RawMessage) (*inboxSpec, bool, error) {
	if raw == nil {
		return nil, false, nil
	}
	if string(raw) == "null" {
		return nil, true, nil
	}
	var req inboxRequest
	if err := decodeJSON(raw, &req, false); err != nil {
		return nil, false, invalid("inbox: want {\"match\": \"POST /webhooks/\", \"status\", \"body\", \"verify\": {\"provider\", \"secret\"}} or null")
	}
	if req.Match == nil {
		return nil, false, invalid("inbox.match is required: a method and a path prefix, such as \"POST /webhooks/\"")
	}
	method, prefix, ok := strings.Cut(*req.Match, " ")
	if !ok {
		method, prefix = "", *req.Match
	}
	if (method != "" && !inboxMethod.MatchString(method)) || !strings.HasPrefix(prefix, "/") || len(prefix) > 200 || strings.ContainsAny(prefix, " ?#\r\n\x00") {
		return nil, false, invalid("inbox.match %q: want an optional method in capitals and a path prefix starting with /, such as \"POST /webhooks/\"", *req.Match)
	}
	if req.Status != nil && (*req.Status < 200 || *req.Status > 299) {
		return nil, false, invalid("inbox.status must be from 200 to 299")
	}
	if req.Body != nil && (len(*req.Body) > maxInboxBody || strings.ContainsRune(*req.Body, 0)) {
		return nil, false, invalid("inbox.body is up to %d bytes of text", maxInboxBody)
	}
	if v := req.Verify; v != nil {
		found := false
		for _, p := range inboxProviders {
			found = found || p == v.Provider
		}
		if !found {
			return nil, false, invalid("inbox.verify.provider must be one of %s", strings.Join(inboxProviders, ", "))
		}
		if v.Secret == "" || len(v.Secret) > maxInboxSecret {
			return nil, false, invalid("inbox.verify.secret is required, up to %d bytes", maxInboxSecret)
		}
		if v.Provider == "standard" {
			if _, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(v.Secret, "whsec_")); err != nil {
				return nil, false, invalid("inbox.verify.secret: a Standard Webhooks secret is whsec_ and base64")
			}
		}
	}
	sp := &inboxSpec{method: method, prefix: prefix}
	if req.Status != nil {
		sp.status = *req.Status
	}
	if req.Body != nil {
		sp.body = *req.Body
	}
	if req.Verify != nil {
		sp.provider, sp.secret = req.Verify.Provider, req.Verify.Secret
	}
	return sp, true, nil
}

// inbox makes the store's inbox of sp for URL urlID, its secret sealed.
func (s *Server) inbox(sp *inboxSpec, urlID string) *store.Inbox {
	in := &store.Inbox{Method: sp.method, PathPrefix: sp.prefix, Status: sp.status, Body: sp.body}
	if sp.provider != "" {
		in.Verify = &store.InboxVerify{Provider: sp.provider, SecretSealed: s.sealer.seal(sp.secret, inboxAD(urlID))}
	}
	return in
}

// inboxView shows an inbox, never its secret.
type inboxView struct {
	Match  string `json:"match"`
	Status int    `json:"status"`
	Body   string `json:"body,omitempty"`
	Verify *struct {
		Provider string `json:"provider"`
	} `json:"verify,omitempty"`
}

func viewInbox(in *store.Inbox) *inboxView {
	if in == nil {
		return nil
	}
	v := &inboxView{Match: strings.TrimSpace(in.Method + " " + in.PathPrefix), Status: in.Status, Body: in.Body}
	if v.Status == 0 {
		v.Status = http.StatusAccepted
	}
	if in.Verify != nil {
		v.Verify = &struct {
			Provider string `json:"provider"`
		}{in.Verify.Provider}
	}
	return v
}

type deliveryView struct {
	ID          string     `json:"id"`
	State       string     `json:"state"`
	Method      string     `json:"method"`
	Target      string     `json:"target"`
	Size        int        `json:"size"`
	ReceivedAt  time.Time  `json:"received_at"`
	Attempts    int        `json:"attempts"`
	LastStatus  int        `json:"last_status"`
	LastError   string     `json:"last_error"`
	NextAt      *time.Time `json:"next_at,omitempty"`
	DeliveredAt *time.Time `json:"delivered_at,omitempty"`
}

func viewDelivery(d *store.Delivery) deliveryView {
	v := deliveryView{ID: d.ID, State: d.State, Method: d.Method, Target: d.Target, Size: d.Size, ReceivedAt: d.ReceivedAt,
		Attempts: d.Attempts, LastStatus: d.LastStatus, LastError: d.LastError, DeliveredAt: d.DeliveredAt}
	if d.State == store.DeliveryPending {
		v.NextAt = &d.NextAt
	}
	return v
}

func (s *Server) listDeliveries(w http.ResponseWriter, r *http.Request) error {
	_, u, err := s.urlFor(r)
	if err != nil {
		return err
	}
	list, err := s.store.Deliveries(r.Context(), u.ID, maxDeliveryList)
	if err != nil {
		return err
	}
	out := make([]deliveryView, len(list))
	for i := range list {
		out[i] = viewDelivery(&list[i])
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) redeliver(w http.ResponseWriter, r *http.Request) error {
	sb, u, err := s.urlFor(r)
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	ev := s.audit(r, "url.redeliver", sb.Name, map[string]string{"port": strconv.Itoa(u.Port), "delivery": id})
	d, err := s.store.Redeliver(r.Context(), u.ID, id, s.now(), ev)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return errorf(http.StatusNotFound, "not_found", "port %d of %s has no delivery %q", u.Port, sb.Name, id)
	case errors.Is(err, store.ErrConflict):
		return errorf(http.StatusConflict, "delivery_queued", "delivery %q is still queued", id)
	case err != nil:
		return err
	}
	writeJSON(w, http.StatusOK, viewDelivery(&d))
	return nil
}

func (s *Server) purgeDeliveries(w http.ResponseWriter, r *http.Request) error {
	sb, u, err := s.urlFor(r)
	if err != nil {
		return err
	}
	ev := s.audit(r, "url.deliveries_purge", sb.Name, map[string]string{"port": strconv.Itoa(u.Port)})
	n, err := s.store.PurgeDeliveries(r.Context(), u.ID, ev)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"port": u.Port, "purged": n})
	return nil
}
