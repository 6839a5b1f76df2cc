package store

import (
	"fmt"
	"time"
)

// UsesKept is how many UTC days of an API key's request counts are kept:
// the docs show requests in the last 30 days.
const UsesKept = 30

// Live reports whether the key opens the API at now: not revoked, not
// expired.
func (k APIKey) Live(now time.Time) bool {
	return k.RevokedAt == nil && (k.ExpiresAt == nil || now.Before(*k.ExpiresAt))
}

// Vouches is the one rule for whether the key still stands behind
// something it minted at minted (a signed file link, a desktop session):
// false once it is revoked, expired at now, or rotated after minted.
func (k APIKey) Vouches(minted, now time.Time) bool {
	if !k.Live(now) {
		return false
	}
	return k.RotatedAt == nil || !minted.Before(*k.RotatedAt)
}

// Revoke revokes the key at at; ErrNotFound when it is revoked already
// (a revoked key is gone from the API). Every store leaves this decision
// to it.
func (k *APIKey) Revoke(at time.Time) error {
	if k.RevokedAt != nil {
		return fmt.Errorf("api key %s: revoked: %w", k.ID, ErrNotFound)
	}
	at = Micro(at)
	k.RevokedAt = &at
	return nil
}

// Rotate gives the key a new secret (its hash) at at; its id, scope and
// expiry stay. ErrNotFound when it is revoked, ErrKeyExpired when it has
// expired. Every store leaves these decisions to it.
func (k *APIKey) Rotate(secretHash string, at time.Time) error {
	if k.RevokedAt != nil {
		return fmt.Errorf("api key %s: revoked: %w", k.ID, ErrNotFound)
	}
	if k.ExpiresAt != nil && !at.Before(*k.ExpiresAt) {
		return fmt.Errorf("api key %s: %w", k.ID, ErrKeyExpired)
	}
	at = Micro(at)
	k.SecretHash, k.RotatedAt = secretHash, &at
	return nil
}

// AddUses counts n requests on at's UTC day, moves LastUsedAt to at when
// later, and forgets days older than UsesKept.
func (k *APIKey) AddUses(at time.Time, n int) {
	at = Micro(at)
	if k.LastUsedAt == nil || at.After(*k.LastUsedAt) {
		k.LastUsedAt = &at
	}
	if k.Uses == nil {
		k.Uses = map[string]int{}
	}
	k.Uses[Day(at)] += n
	oldest := Day(at.AddDate(0, 0, -(UsesKept - 1)))
	for d := range k.Uses {
		if d < oldest {
			delete(k.Uses, d)
		}
	}
}

// Requests is how many requests the key made on now's UTC day and the
// UsesKept-1 days before.
func (k APIKey) Requests(now time.Time) int {
	oldest, today := Day(now.AddDate(0, 0, -(UsesKept-1))), Day(now)
	n := 0
	for d, c := range k.Uses {
		if d >= oldest && d <= today {
			n += c
		}
	}
	return n
}
