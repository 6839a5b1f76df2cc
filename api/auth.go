package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"froog.tech/froog/store"
)

// Actions an API key may hold.
var Actions = []string{
	"sandbox.create", "sandbox.read", "sandbox.update", "sandbox.stop", "sandbox.resume",
	"sandbox.fork", "sandbox.delete", "sandbox.delete-own", "agent.prompt", "exec",
	"file.read", "file.write", "ssh", "desktop", "host", "snapshot.read", "snapshot.write",
	"environment.read", "environment.write", "account.read", "account.admin", "*",
}

var readOnly = []string{"sandbox.read", "file.read", "snapshot.read", "environment.read", "account.read"}

var fullSandbox = []string{"sandbox.read", "sandbox.update", "sandbox.stop", "agent.prompt", "exec",
	"file.read", "file.write", "ssh", "desktop", "host", "snapshot.read", "snapshot.write",
	"environment.read", "account.read"}

// Presets name sets of actions.
var Presets = map[string][]string{
	"read-only":    readOnly,
	"full-sandbox": fullSandbox,
	"ci":           append(slices.Clone(fullSandbox), "sandbox.create", "sandbox.resume", "sandbox.fork", "sandbox.delete-own"),
	"admin":        {"*"},
}

// PresetActions returns the actions of a preset.
func PresetActions(preset string) ([]string, error) {
	a, ok := Presets[preset]
	if !ok {
		names := make([]string, 0, len(Presets))
		for n := range Presets {
			names = append(names, n)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("unknown preset %q (one of %s)", preset, strings.Join(names, ", "))
	}
	return slices.Clone(a), nil
}

// KeyPrefix starts every API key secret.
const KeyPrefix = "froog_"

// NewSecret returns a new random secret with prefix (store.NewSecret).
func NewSecret(prefix string) string { return store.NewSecret(prefix) }

// NewAPIKey makes a key for account with actions, and returns the secret
// (shown once) and the record to store.
func NewAPIKey(accountID, name string, actions []string, ttl time.Duration, now time.Time) (string, store.APIKey) {
	secret := NewSecret(KeyPrefix)
	k := store.APIKey{AccountID: accountID, Name: name, SecretHash: store.HashSecret(secret), Actions: actions, CreatedAt: store.Micro(now)}
	if ttl > 0 {
		exp := store.Micro(now.Add(ttl))
		k.ExpiresAt = &exp
	}
	return secret, k
}

type ctxKey int

const (
	keyCtx ctxKey = iota
	reqIDCtx
)

func keyFrom(ctx context.Context) *store.APIKey {
	k, _ := ctx.Value(keyCtx).(*store.APIKey)
	return k
}

// authenticate finds the key behind the Authorization header.
func (s *Server) authenticate(r *http.Request) (*store.APIKey, error) {
	h := r.Header.Get("Authorization")
	scheme, secret, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || !strings.HasPrefix(secret, KeyPrefix) {
		return nil, errorf(http.StatusUnauthorized, "unauthorized", "send an API key as Authorization: Bearer froog_…")
	}
	k, err := s.store.APIKeyByHash(r.Context(), store.HashSecret(secret))
	if errors.Is(err, store.ErrNotFound) {
		return nil, errorf(http.StatusUnauthorized, "unauthorized", "this API key is not valid")
	}
	if err != nil {
		return nil, err
	}
	now := s.now()
	if k.RevokedAt != nil {
		return nil, errorf(http.StatusUnauthorized, "unauthorized", "this API key was revoked")
	}
	if !k.Live(now) {
		return nil, errorf(http.StatusUnauthorized, "api_key_expired", "this API key expired at %s", k.ExpiresAt.Format(time.RFC3339))
	}
	s.uses.note(r.Context(), s, &k, now)
	return &k, nil
}

// can reports whether the key holds action.
func can(k *store.APIKey, action string) bool {
	return slices.Contains(k.Actions, "*") || slices.Contains(k.Actions, action)
}

func requireAction(k *store.APIKey, action string) error {
	if !can(k, action) {
		return errorf(http.StatusForbidden, "api_key_action_forbidden", "this API key cannot %s", action)
	}
	return nil
}

// reaches reports whether the key's sandbox and label limits let it at sb.
func reaches(k *store.APIKey, sb *store.Sandbox) bool {
	if len(k.Sandboxes) > 0 && !slices.Contains(k.Sandboxes, sb.Name) && sb.CreatedByKey != k.ID {
		return false
	}
	for lk, lv := range k.Labels {
		if v, ok := sb.Labels[lk]; !ok || v != lv {
			return false
		}
	}
	return true
}

// scoped reports whether the key is limited to some sandboxes by name.
func scoped(k *store.APIKey) bool { return len(k.Sandboxes) > 0 }

// limited reports whether the key reaches only some of the account's
// sandboxes, by name or by label: such a key sees nothing account-wide.
func limited(k *store.APIKey) bool { return len(k.Sandboxes) > 0 || len(k.Labels) > 0 }
