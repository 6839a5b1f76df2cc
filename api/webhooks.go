package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"froog.tech/froog/store"
)

// Webhooks for sandbox events (docs: Webhooks): an account's endpoints,
// their delivery log, a new signing secret, a test ping. The store makes
// and queues the events; DeliverWebhooks (webhooks_send.go) sends them.
// The signing secret is sealed here (the store and its logs never hold
// it in the clear), shown once at create and at rotate, and never in a
// GET answer, an audit entry or a log line; nor is the URL audited (the
// docs: webhook URLs are never in the audit log).

const (
	maxWebhookName  = 100
	maxWebhookURL   = 2048
	maxWebhookLog   = 200
	defaultLogLimit = 50
	// webhookSecretPrefix starts every signing secret.
	webhookSecretPrefix = "whsec_"
)

// webhookAD binds a sealed signing secret to its endpoint.
func webhookAD(id string) string { return "webhook:" + id }

type webhookView struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	URL       string    `json:"url"`
	Events    []string  `json:"events"` // empty: all
	Enabled   bool      `json:"enabled"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// Secret is set only in the answers to create and rotate.
	Secret string `json:"secret,omitempty"`
}

func viewWebhook(w *store.Webhook) webhookView {
	ev := w.Events
	if ev == nil {
		ev = []string{}
	}
	return webhookView{ID: w.ID, Name: w.Name, URL: w.URL, Events: ev, Enabled: w.Enabled, CreatedAt: w.CreatedAt, UpdatedAt: w.UpdatedAt}
}

type attemptView struct {
	EventID      string     `json:"event_id"`
	Event        string     `json:"event"`
	Sandbox      string     `json:"sandbox,omitempty"`
	Attempt      int        `json:"attempt"`
	Status       string     `json:"status"`
	ResponseCode int        `json:"response_code,omitempty"`
	Error        string     `json:"error,omitempty"`
	DurationMS   int64      `json:"duration_ms"`
	CreatedAt    time.Time  `json:"created_at"`
	NextAt       *time.Time `json:"next_attempt_at,omitempty"`
}

func viewAttempt(a *store.WebhookAttempt) attemptView {
	return attemptView{EventID: a.EventID, Event: a.Event, Sandbox: a.Sandbox, Attempt: a.Attempt, Status: a.Status, ResponseCode: a.ResponseCode,
		Error: a.Error, DurationMS: a.DurationMS, CreatedAt: a.CreatedAt, NextAt: a.NextAt}
}

// seesWebhooks refuses a key limited to some sandboxes or labels: an
// endpoint gets the events of every sandbox of the account.
func seesWebhooks(k *store.APIKey) error {
	if limited(k) {
		return errorf(http.StatusForbidden, "api_key_sandbox_forbidden", "this API key is limited to some sandboxes, and a webhook gets the events of them all")
	}
	return nil
}

// blockedPrefixes are the ranges, beyond what netip's predicates name,
// that no webhook may reach: CGNAT, the IETF protocol block, the
// documentation and benchmark ranges, the reserved 240/4, and the IPv6
// forms that carry an IPv4 address (IPv4-compatible, NAT64, 6to4) or
// are deprecated site-local, discard-only or documentation.
var blockedPrefixes = func() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []string{"0.0.0.0/8", "100.64.0.0/10", "192.0.0.0/24", "192.0.2.0/24", "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24", "240.0.0.0/4",
		"::/96", "64:ff9b::/96", "64:ff9b:1::/48", "100::/64", "2001:db8::/32", "2002::/16", "fec0::/10"} {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}()

// BlockedWebhookIP reports whether a webhook may not be sent to ip: a
// private, loopback, link-local, CGNAT, multicast, unspecified, ULA or
// otherwise non-public address, IPv4-mapped IPv6 included.
func BlockedWebhookIP(ip netip.Addr) bool {
	if !ip.IsValid() {
		return true
	}
	ip = ip.Unmap().WithZone("")
	if ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsInterfaceLocalMulticast() ||
		ip.IsMulticast() || ip.IsUnspecified() || !ip.IsGlobalUnicast() {
		return true
	}
	for _, p := range blockedPrefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// checkWebhookURL checks an endpoint's URL as given: HTTPS, a host, no
// credentials or fragment, and no host that is a non-public address or
// a name for this machine. Names are checked again when sent to, after
// they resolve (webhookDialer). allowPrivate is the test-only option.
func checkWebhookURL(raw string, allowPrivate bool) (string, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" || len(raw) > maxWebhookURL {
		return "", invalid("url is an https:// URL of at most %d characters", maxWebhookURL)
	}
	u, err := url.Parse(raw)
	if err != nil || !strings.EqualFold(u.Scheme, "https") || u.Host == "" || u.Opaque != "" {
		return "", invalid("url must be an https:// URL with a host")
	}
	if u.User != nil {
		return "", invalid("url must not hold credentials (user:password@)")
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return "", invalid("url must not have a #fragment")
	}
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	if host == "" {
		return "", invalid("url must be an https:// URL with a host")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "", invalid("url's port must be 1-65535")
		}
	}
	if allowPrivate {
		return u.String(), nil
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if BlockedWebhookIP(ip) {
			return "", invalid("url must be on a public address: %s is a private, loopback, link-local or reserved address", ip)
		}
	} else if strings.ContainsAny(host, "%[]") || !strings.Contains(host, ".") || host == "localhost" || strings.HasSuffix(host, ".localhost") ||
		strings.HasSuffix(host, ".internal") || strings.HasSuffix(host, ".local") {
		return "", invalid("url must be on a public address: %q is not a public host name", host)
	} else if _, err := strconv.ParseUint(strings.ReplaceAll(host, ".", ""), 0, 64); err == nil || strings.HasPrefix(host, "0x") {
		// 2130706433, 0x7f.1, 127.1: forms that resolvers read as IPv4.
		return "", invalid("url must be on a public address: %q reads as a numeric address", host)
	}
	return u.String(), nil
}

// checkEvents checks an events filter: known types, each once. Empty
// means all.
func checkEvents(events []string) ([]string, error) {
	if len(events) == 0 {
		return nil, nil
	}
	out := make([]string, 0, len(events))
	for _, e := range events {
		if !slices.Contains(store.EventTypes, e) {
			return nil, invalid("events: %q is not an event type (%s)", e, strings.Join(store.EventTypes, ", "))
		}
		if slices.Contains(out, e) {
			return nil, invalid("events: %q is named twice", e)
		}
		out = append(out, e)
	}
	return out, nil
}

func checkWebhookName(name string) (string, error) {
	name = strings.TrimSpace(name)
	if len([]rune(name)) > maxWebhookName || strings.ContainsFunc(name, func(r rune) bool { return !unicode.IsPrint(r) }) {
		return "", invalid("name is at most %d printable characters", maxWebhookName)
	}
	return name, nil
}

// webhookDetail is what the audit log keeps of an endpoint: never its
// URL or secret.
func webhookDetail(w *store.Webhook) map[string]string {
	d := map[string]string{"enabled": strconv.FormatBool(w.Enabled), "events": strings.Join(w.Events, ",")}
	if w.Events == nil {
		d["events"] = "all"
	}
	if w.Name != "" {
		d["name"] = w.Name
	}
	return d
}

// newWebhookSecret makes a signing secret and seals it for endpoint id.
func (s *Server) newWebhookSecret(id string) (string, []byte) {
	secret := store.NewSecret(webhookSecretPrefix)
	return secret, s.sealer.seal(secret, webhookAD(id))
}

func (s *Server) listWebhooks(w http.ResponseWriter, r *http.Request) error {
	if err := checkQuery(r.URL.Query()); err != nil {
		return err
	}
	k := keyFrom(r.Context())
	out := struct {
		Webhooks []webhookView `json:"webhooks"`
	}{Webhooks: []webhookView{}}
	if !limited(k) { // a limited key learns of no endpoint
		list, err := s.store.ListWebhooks(r.Context(), k.AccountID)
		if err != nil {
			return err
		}
		for i := range list {
			out.Webhooks = append(out.Webhooks, viewWebhook(&list[i]))
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) createWebhook(w http.ResponseWriter, r *http.Request) error {
	k := keyFrom(r.Context())
	if err := seesWebhooks(k); err != nil {
		return err
	}
	var req struct {
		URL    *string  `json:"url"`
		Events []string `json:"events"`
		Name   *string  `json:"name"`
	}
	if err := readJSON(r, maxBody, &req, false); err != nil {
		return err
	}
	if req.URL == nil {
		return invalid("url is required")
	}
	u, err := checkWebhookURL(*req.URL, s.allowPrivateHooks)
	if err != nil {
		return err
	}
	events, err := checkEvents(req.Events)
	if err != nil {
		return err
	}
	hook := store.Webhook{ID: store.NewID("wh"), AccountID: k.AccountID, URL: u, Events: events, Enabled: true, CreatedAt: s.now(), UpdatedAt: s.now()}
	if req.Name != nil {
		if hook.Name, err = checkWebhookName(*req.Name); err != nil {
			return err
		}
	}
	secret, sealed := s.newWebhookSecret(hook.ID)
	hook.SecretSealed = sealed
	created, err := s.store.CreateWebhook(r.Context(), hook, s.audit(r, "webhook.create", hook.ID, webhookDetail(&hook)))
	if err != nil {
		return err
	}
	v := viewWebhook(&created)
	v.Secret = secret
	writeJSON(w, http.StatusCreated, v)
	return nil
}

// webhookFor reads the endpoint named in the path, for a key that may
// see webhooks.
func (s *Server) webhookFor(r *http.Request) (*store.Webhook, error) {
	k := keyFrom(r.Context())
	if err := seesWebhooks(k); err != nil {
		return nil, err
	}
	id := r.PathValue("id")
	if !strings.HasPrefix(id, "wh_") || len(id) > 64 {
		return nil, errorf(http.StatusNotFound, "not_found", "no webhook %q", id)
	}
	hook, err := s.store.Webhook(r.Context(), k.AccountID, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, errorf(http.StatusNotFound, "not_found", "no webhook %q", id)
	}
	if err != nil {
		return nil, err
	}
	return &hook, nil
}

func (s *Server) getWebhook(w http.ResponseWriter, r *http.Request) error {
	if err := checkQuery(r.URL.Query()); err != nil {
		return err
	}
	hook, err := s.webhookFor(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewWebhook(hook))
	return nil
}

func (s *Server) patchWebhook(w http.ResponseWriter, r *http.Request) error {
	hook, err := s.webhookFor(r)
	if err != nil {
		return err
	}
	var req struct {
		URL     *string         `json:"url"`
		Events  json.RawMessage `json:"events"`
		Name    *string         `json:"name"`
		Enabled *bool           `json:"enabled"`
	}
	if err := readJSON(r, maxBody, &req, false); err != nil {
		return err
	}
	change := *hook
	if req.URL != nil {
		if change.URL, err = checkWebhookURL(*req.URL, s.allowPrivateHooks); err != nil {
			return err
		}
	}
	if len(req.Events) > 0 && string(req.Events) != "null" {
		var list []string
		if err := json.Unmarshal(req.Events, &list); err != nil {
			return invalid("events is a list of event types")
		}
		if change.Events, err = checkEvents(list); err != nil {
			return err
		}
	}
	if req.Name != nil {
		if change.Name, err = checkWebhookName(*req.Name); err != nil {
			return err
		}
	}
	if req.Enabled != nil {
		change.Enabled = *req.Enabled
	}
	detail := webhookDetail(&change)
	if req.URL != nil {
		detail["url"] = "changed"
	}
	// Only what the request set, onto the record as the store has it: a
	// rename beside a pause must not switch the endpoint back on.
	out, err := s.store.UpdateWebhook(r.Context(), hook.AccountID, hook.ID, func(x *store.Webhook, _ *store.AuditEvent) error {
		if req.URL != nil {
			x.URL = change.URL
		}
		if len(req.Events) > 0 && string(req.Events) != "null" {
			x.Events = change.Events
		}
		if req.Name != nil {
			x.Name = change.Name
		}
		if req.Enabled != nil {
			x.Enabled = change.Enabled
		}
		x.UpdatedAt = s.now()
		return nil
	}, s.audit(r, "webhook.update", hook.ID, detail))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewWebhook(&out))
	return nil
}

func (s *Server) deleteWebhook(w http.ResponseWriter, r *http.Request) error {
	hook, err := s.webhookFor(r)
	if err != nil {
		return err
	}
	if err := s.store.DeleteWebhook(r.Context(), hook.AccountID, hook.ID, s.audit(r, "webhook.delete", hook.ID, nil)); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": hook.ID, "deleted": true})
	return nil
}

func (s *Server) rotateWebhook(w http.ResponseWriter, r *http.Request) error {
	hook, err := s.webhookFor(r)
	if err != nil {
		return err
	}
	secret, sealed := s.newWebhookSecret(hook.ID)
	out, err := s.store.UpdateWebhook(r.Context(), hook.AccountID, hook.ID, func(x *store.Webhook, _ *store.AuditEvent) error {
		x.SecretSealed, x.UpdatedAt = sealed, s.now()
		return nil
	}, s.audit(r, "webhook.rotate", hook.ID, nil))
	if err != nil {
		return err
	}
	v := viewWebhook(&out)
	v.Secret = secret
	writeJSON(w, http.StatusOK, v)
	return nil
}

func (s *Server) listWebhookDeliveries(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	if err := checkQuery(q, "limit"); err != nil {
		return err
	}
	limit := defaultLogLimit
	if v := q.Get("limit"); q.Has("limit") {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxWebhookLog {
			return invalid("limit is 1-%d", maxWebhookLog)
		}
		limit = n
	}
	hook, err := s.webhookFor(r)
	if err != nil {
		return err
	}
	list, err := s.store.WebhookAttempts(r.Context(), hook.AccountID, hook.ID, s.now().Add(-store.WebhookLogKept), limit)
	if err != nil {
		return err
	}
	out := struct {
		Deliveries []attemptView `json:"deliveries"`
	}{Deliveries: []attemptView{}}
	for i := range list {
		out.Deliveries = append(out.Deliveries, viewAttempt(&list[i]))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// testWebhook sends a ping now, logs it, and answers with the attempt.
func (s *Server) testWebhook(w http.ResponseWriter, r *http.Request) error {
	hook, err := s.webhookFor(r)
	if err != nil {
		return err
	}
	secret, err := s.sealer.open(hook.SecretSealed, webhookAD(hook.ID))
	if err != nil {
		return err
	}
	ev := store.WebhookEvent{ID: store.NewID("evt"), AccountID: hook.AccountID, Type: store.EventPing, CreatedAt: s.now()}
	res := s.sendWebhook(r.Context(), hook, secret, ev, 1)
	a := store.NewAttempt(hook.ID, hook.AccountID, ev, 1, res)
	if err := s.store.AddWebhookAttempt(r.Context(), a); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewAttempt(&a))
	return nil
}
