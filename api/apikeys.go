package api

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

	"froog.tech/froog/store"
)

// API key lifetimes (the docs: 90 days unless chosen, up to 365, or never).
const (
	keyDefaultDays  = 90
	keyMaxDays      = 365
	maxKeySandboxes = 100
)

// apiKeyView is a key as the API shows it; Key (the secret) only in the
// answer that made it (create, rotate).
type apiKeyView struct {
	ID               string            `json:"id"`
	Label            string            `json:"label"`
	Key              string            `json:"key,omitempty"`
	Actions          []string          `json:"actions"`
	Sandboxes        []string          `json:"sandboxes"`
	Labels           map[string]string `json:"labels"`
	ExpiresAt        *time.Time        `json:"expires_at"` // null: never
	CreatedAt        time.Time         `json:"created_at"`
	RotatedAt        *time.Time        `json:"rotated_at"`
	LastUsedAt       *time.Time        `json:"last_used_at"`
	Requests30d      int               `json:"requests_30d"`
	SandboxesCreated []string          `json:"sandboxes_created"`
}

func viewAPIKey(k *store.APIKey, now time.Time, created []string) apiKeyView {
	v := apiKeyView{ID: k.ID, Label: k.Name, Actions: k.Actions, Sandboxes: k.Sandboxes, Labels: k.Labels,
		ExpiresAt: k.ExpiresAt, CreatedAt: k.CreatedAt, RotatedAt: k.RotatedAt, LastUsedAt: k.LastUsedAt,
		Requests30d: k.Requests(now), SandboxesCreated: created}
	if v.Actions == nil {
		v.Actions = []string{}
	}
	if v.Sandboxes == nil {
		v.Sandboxes = []string{}
	}
	if v.Labels == nil {
		v.Labels = map[string]string{}
	}
	if v.SandboxesCreated == nil {
		v.SandboxesCreated = []string{}
	}
	return v
}

// seesKeys refuses a key limited to some sandboxes: it sees no API keys
// (the docs), so it lists, revokes and rotates none.
func seesKeys(k *store.APIKey) error {
	if limited(k) {
		return errorf(http.StatusForbidden, "api_key_sandbox_forbidden", "this API key is limited to some sandboxes and sees no API keys")
	}
	return nil
}

// GET /v1/api-keys: the account's keys that are not revoked, oldest
// first, with their use and the sandboxes each created.
func (s *Server) listAPIKeys(w http.ResponseWriter, r *http.Request) error {
	k := keyFrom(r.Context())
	if err := checkQuery(r.URL.Query()); err != nil {
		return err
	}
	if err := seesKeys(k); err != nil {
		return err
	}
	s.uses.flush(r.Context(), s, k.AccountID)
	keys, err := s.store.ListAPIKeys(r.Context(), k.AccountID)
	if err != nil {
		return err
	}
	sandboxes, err := s.store.ListSandboxes(r.Context(), store.SandboxFilter{AccountID: k.AccountID})
	if err != nil {
		return err
	}
	created := map[string][]string{}
	for _, sb := range sandboxes {
		if sb.CreatedByKey != "" {
			created[sb.CreatedByKey] = append(created[sb.CreatedByKey], sb.Name)
		}
	}
	out := struct {
		APIKeys []apiKeyView `json:"api_keys"`
	}{APIKeys: []apiKeyView{}}
	now := s.now()
	for i := range keys {
		if keys[i].RevokedAt == nil {
			out.APIKeys = append(out.APIKeys, viewAPIKey(&keys[i], now, created[keys[i].ID]))
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

type createKeyRequest struct {
	Label        *string           `json:"label"`
	TTLDays      *int              `json:"ttl_days"`
	NeverExpires *bool             `json:"never_expires"`
	Preset       *string           `json:"preset"`
	Actions      *[]string         `json:"actions"`
	Sandboxes    []string          `json:"sandboxes"`
	Labels       map[string]string `json:"labels"`
}

// key checks the request and returns the key it asks for (no id or
// secret yet). Without preset or actions the key has every action.
func (req *createKeyRequest) key(accountID string, now time.Time) (store.APIKey, error) {
	k := store.APIKey{AccountID: accountID, Actions: []string{"*"}, CreatedAt: now}
	if req.Label != nil {
		k.Name = strings.TrimSpace(*req.Label)
		if len([]rune(k.Name)) > maxKeyName || strings.ContainsFunc(k.Name, func(r rune) bool { return !unicode.IsPrint(r) }) {
			return k, invalid("label is up to %d printable characters", maxKeyName)
		}
	}
	switch {
	case req.Preset != nil && req.Actions != nil:
		return k, invalid("give preset or actions, not both")
	case req.Preset != nil:
		acts, err := PresetActions(*req.Preset)
		if err != nil {
			return k, invalid("%s", err.Error())
		}
		k.Actions = acts
	case req.Actions != nil:
		if len(*req.Actions) == 0 {
			return k, invalid("actions is not empty: leave it out for every action")
		}
		k.Actions = nil
		for _, a := range *req.Actions {
			if !slices.Contains(Actions, a) {
				return k, invalid("unknown action %q (one of %s)", a, strings.Join(Actions, ", "))
			}
			if !slices.Contains(k.Actions, a) {
				k.Actions = append(k.Actions, a)
			}
		}
	}
	if len(req.Sandboxes) > maxKeySandboxes {
		return k, invalid("a key names at most %d sandboxes", maxKeySandboxes)
	}
	for _, n := range req.Sandboxes {
		if err := checkName("sandboxes", n); err != nil {
			return k, err
		}
		if !slices.Contains(k.Sandboxes, n) {
			k.Sandboxes = append(k.Sandboxes, n)
		}
	}
	if len(req.Labels) > maxLabels {
		return k, invalid("a key has at most %d labels", maxLabels)
	}
	for lk, lv := range req.Labels {
		if err := checkLabel(lk, lv); err != nil {
			return k, err
		}
	}
	if len(req.Labels) > 0 {
		k.Labels = req.Labels
	}
	never := req.NeverExpires != nil && *req.NeverExpires
	switch {
	case never && req.TTLDays != nil:
		return k, invalid("give ttl_days or never_expires, not both")
	case never:
	case req.TTLDays != nil && (*req.TTLDays < 1 || *req.TTLDays > keyMaxDays):
		return k, invalid("ttl_days is from 1 to %d (or never_expires)", keyMaxDays)
	default:
		days := keyDefaultDays
		if req.TTLDays != nil {
			days = *req.TTLDays
		}
		exp := store.Micro(now.AddDate(0, 0, days))
		k.ExpiresAt = &exp
	}
	return k, nil
}

// withinScope reports whether parent may hand out child: a key can't
// make (or rotate) one with more actions, more sandboxes, fewer labels or
// a later expiry than its own.
func withinScope(parent, child *store.APIKey) error {
	if !can(parent, "*") {
		for _, a := range child.Actions {
			if a == "*" || !(can(parent, a) || (a == "sandbox.delete-own" && can(parent, "sandbox.delete"))) {
				return errorf(http.StatusForbidden, "api_key_action_forbidden", "this API key cannot give the action %s: a key it makes has at most its actions", a)
			}
		}
	}
	if scoped(parent) {
		if len(child.Sandboxes) == 0 {
			return errorf(http.StatusForbidden, "api_key_sandbox_forbidden", "this API key is limited to some sandboxes: a key it makes must name some of them (%s)", strings.Join(parent.Sandboxes, ", "))
		}
		for _, n := range child.Sandboxes {
			if !slices.Contains(parent.Sandboxes, n) {
				return errorf(http.StatusForbidden, "api_key_sandbox_forbidden", "this API key cannot reach sandbox %q: a key it makes reaches at most its sandboxes", n)
			}
		}
	}
	for lk, lv := range parent.Labels {
		if v, ok := child.Labels[lk]; !ok || v != lv {
			return errorf(http.StatusForbidden, "api_key_label_forbidden", "this API key reaches only sandboxes with %s=%s: a key it makes must have at least its labels", lk, lv)
		}
	}
	if parent.ExpiresAt != nil && (child.ExpiresAt == nil || child.ExpiresAt.After(*parent.ExpiresAt)) {
		return errorf(http.StatusForbidden, "api_key_expiry_forbidden", "this API key expires at %s: a key it makes must expire by then (choose ttl_days)", parent.ExpiresAt.Format(time.RFC3339))
	}
	return nil
}

// POST /v1/api-keys: a new key, its secret returned once.
func (s *Server) createAPIKey(w http.ResponseWriter, r *http.Request) error {
	parent := keyFrom(r.Context())
	var req createKeyRequest
	if err := readJSON(r, maxBody, &req, true); err != nil {
		return err
	}
	now := s.now()
	k, err := req.key(parent.AccountID, now)
	if err != nil {
		return err
	}
	// The default lifetime stops where the parent's does: a 90-day key
	// could otherwise never make a key without choosing ttl_days.
	if req.TTLDays == nil && k.ExpiresAt != nil && parent.ExpiresAt != nil && k.ExpiresAt.After(*parent.ExpiresAt) {
		exp := *parent.ExpiresAt
		k.ExpiresAt = &exp
	}
	if err := withinScope(parent, &k); err != nil {
		return err
	}
	secret := NewSecret(KeyPrefix)
	k.ID, k.SecretHash = store.NewID("key"), store.HashSecret(secret)
	ev := s.audit(r, "api_key.create", k.ID, keyDetail(&k))
	if k, err = s.store.CreateAPIKey(r.Context(), k, ev); err != nil {
		return err
	}
	v := viewAPIKey(&k, now, nil)
	v.Key = secret
	writeJSON(w, http.StatusCreated, v)
	return nil
}

// keyDetail is what the audit log keeps of a key: its scope, no secret.
func keyDetail(k *store.APIKey) map[string]string {
	d := map[string]string{"label": k.Name, "actions": strings.Join(k.Actions, ",")}
	if len(k.Sandboxes) > 0 {
		d["sandboxes"] = strings.Join(k.Sandboxes, ",")
	}
	if len(k.Labels) > 0 {
		d["labels"] = labelString(k.Labels)
	}
	if k.ExpiresAt != nil {
		d["expires_at"] = k.ExpiresAt.Format(time.RFC3339)
	} else {
		d["expires_at"] = "never"
	}
	return d
}

// errNoKey answers for a key the account doesn't have, or has revoked.
func errNoKey(id string) error {
	return errorf(http.StatusNotFound, "not_found", "this account has no API key %q", id)
}

// DELETE /v1/api-keys/{id}: revoked at once, on every API process (each
// request reads its key from the store). Sandboxes it created stay.
func (s *Server) revokeAPIKey(w http.ResponseWriter, r *http.Request) error {
	k := keyFrom(r.Context())
	if err := seesKeys(k); err != nil {
		return err
	}
	id := r.PathValue("id")
	got, err := s.store.RevokeAPIKey(r.Context(), k.AccountID, id, s.now(), s.audit(r, "api_key.revoke", id, nil))
	if errors.Is(err, store.ErrNotFound) {
		return errNoKey(id)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": got.ID, "revoked": true, "revoked_at": got.RevokedAt})
	return nil
}

// POST /v1/api-keys/{id}/rotate: a new secret (returned once) with the
// same id, scope and expiry; the old one stops at once.
func (s *Server) rotateAPIKey(w http.ResponseWriter, r *http.Request) error {
	k := keyFrom(r.Context())
	if err := seesKeys(k); err != nil {
		return err
	}
	if err := readJSON(r, maxBody, &struct{}{}, true); err != nil {
		return err
	}
	id := r.PathValue("id")
	target, err := s.store.APIKeyByID(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && (target.AccountID != k.AccountID || target.RevokedAt != nil)) {
		return errNoKey(id)
	}
	if err != nil {
		return err
	}
	now := s.now()
	if target.ExpiresAt != nil && !now.Before(*target.ExpiresAt) {
		return errorf(http.StatusConflict, "api_key_expired", "API key %s expired at %s and can't be rotated: create a new one", id, target.ExpiresAt.Format(time.RFC3339))
	}
	// The new secret is the caller's to hold: it may not get more than
	// it could make.
	if err := withinScope(k, &target); err != nil {
		return err
	}
	secret := NewSecret(KeyPrefix)
	got, err := s.store.RotateAPIKey(r.Context(), k.AccountID, id, store.HashSecret(secret), now, s.audit(r, "api_key.rotate", id, map[string]string{"label": target.Name}))
	switch {
	case errors.Is(err, store.ErrKeyExpired):
		return errorf(http.StatusConflict, "api_key_expired", "API key %s expired at %s and can't be rotated: create a new one", id, target.ExpiresAt.Format(time.RFC3339))
	case errors.Is(err, store.ErrNotFound):
		return errNoKey(id)
	case err != nil:
		return err
	}
	v := viewAPIKey(&got, now, nil)
	v.Key = secret
	writeJSON(w, http.StatusOK, v)
	return nil
}

// useEvery is how often, at most, a key's requests are written to the
// store by one API process.
const useEvery = time.Minute

// keyUses counts each key's requests in memory and writes them to the
// store (RecordAPIKeyUse) at most once per useEvery per key: at a key's
// first request in this process, then with the request that finds the
// last write useEvery old, and for an account's keys before its keys are
// listed. A request costs a map update; a stop loses at most a minute of
// counts per key. The zero value is ready.
type keyUses struct {
	mu   sync.Mutex
	keys map[string]*keyUse
}

type keyUse struct {
	account string
	n       int       // requests not written yet
	last    time.Time // the latest of them
	written time.Time // when the key's uses were last written
}

// note counts a request of k at now and writes the key's count when due.
func (u *keyUses) note(ctx context.Context, s *Server, k *store.APIKey, now time.Time) {
	u.mu.Lock()
	if u.keys == nil {
		u.keys = map[string]*keyUse{}
	}
	c := u.keys[k.ID]
	if c == nil {
		c = &keyUse{account: k.AccountID}
		u.keys[k.ID] = c
	}
	c.n++
	c.last = now
	due := now.Sub(c.written) >= useEvery
	var n int
	if due {
		n, c.n, c.written = c.n, 0, now
	}
	u.mu.Unlock()
	if due {
		u.write(ctx, s, k.ID, now, n)
	}
}

// flush writes the counts of the account's keys.
func (u *keyUses) flush(ctx context.Context, s *Server, accountID string) {
	type pending struct {
		id string
		at time.Time
		n  int
	}
	var todo []pending
	u.mu.Lock()
	for id, c := range u.keys {
		if c.account == accountID && c.n > 0 {
			todo = append(todo, pending{id, c.last, c.n})
			c.n = 0
		}
	}
	u.mu.Unlock()
	for _, p := range todo {
		u.write(ctx, s, p.id, p.at, p.n)
	}
}

// write records n uses up to at; on a failure they are counted again, to
// go with the next write.
func (u *keyUses) write(ctx context.Context, s *Server, id string, at time.Time, n int) {
	err := s.store.RecordAPIKeyUse(context.WithoutCancel(ctx), id, at, n)
	if err == nil || errors.Is(err, store.ErrNotFound) {
		return
	}
	s.log.LogAttrs(ctx, slog.LevelWarn, "record api key use", slog.String("key_id", id), slog.String("error", err.Error()))
	u.mu.Lock()
	if c := u.keys[id]; c != nil {
		c.n += n
	}
	u.mu.Unlock()
}
