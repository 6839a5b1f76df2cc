package store

import "time"

// DesktopLinkTTL is how long a desktop (or browser view, or wall) link
// may take to be opened; a session it made lasts longer.
const DesktopLinkTTL = 10 * time.Minute

// DesktopTokenPrefix starts a desktop link's token.
const DesktopTokenPrefix = "dt_"

// NewDesktopLink completes l (its kind, sandbox or account, view-only)
// into a link made at now, and returns it with its token: the token is
// shown once (in the link's address, after the #), the store keeps its
// hash.
func NewDesktopLink(l DesktopLink, now time.Time) (string, DesktopLink) {
	token := NewSecret(DesktopTokenPrefix)
	l.Hash, l.CreatedAt, l.ExpiresAt = HashSecret(token), now, now.Add(DesktopLinkTTL)
	return token, l
}
