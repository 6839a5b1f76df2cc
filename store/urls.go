package store

import (
	"context"
	"fmt"
	"slices"
)

// URLTx is the persistence of one PutURL, inside an implementation's
// transaction. It decides nothing: PutURLIn decides for every
// implementation, so that they agree.
type URLTx interface {
	// CountURLs is how many URLs the sandbox has.
	CountURLs(ctx context.Context, sandboxID string) (int, error)
	// URLNames reads what deciding on a new host name needs. It holds the
	// account against concurrent writers until commit, so names per day
	// are counted in turn.
	URLNames(ctx context.Context, accountID, hostname, day string) (URLNames, error)
	// WriteURL stores a write that PutURLIn decided on.
	WriteURL(ctx context.Context, w URLWrite) error
	// PublicURLPorts is the ports of the sandbox's public URLs: a URL
	// made public opens its port (see MaxPortsPerSandbox).
	PublicPorts
}

// URLNames is what PutURLIn reads before a URL takes a new host name.
type URLNames struct {
	Account Account
	Taken   bool     // a URL has the host name already
	Today   []string // the host names the account took on the day
}

// URLWrite is what one PutURL stores.
type URLWrite struct {
	URL URL
	// NameDay, when set, is the day (see Day) on which URL.Hostname was
	// taken: names of earlier days are forgotten.
	NameDay string
	// AddName records URL.Hostname as taken by the account on NameDay.
	AddName bool
	// DropViews deletes the URL's viewer tokens.
	DropViews bool
}

// PutURLIn is Store.PutURL for every implementation. sb is the live
// sandbox, old the URL for (sb, port) or nil; fn gets a copy of old. It
// applies the rules of Store.PutURL and writes the result through tx.
func PutURLIn(ctx context.Context, tx URLTx, sb *Sandbox, port int, old *URL, fn func(*URL, *AuditEvent) (URL, error), ev *AuditEvent) (URL, error) {
	var arg *URL
	if old != nil {
		c := *old
		c.TokenSealed = slices.Clone(old.TokenSealed)
		arg = &c
	}
	u, err := fn(arg, ev)
	if err != nil {
		return URL{}, err
	}
	u.SandboxID, u.Port, u.AccountID = sb.ID, port, sb.AccountID
	if old != nil {
		u.ID = old.ID
	} else if u.ID == "" {
		u.ID = NewID("url")
	}
	w := URLWrite{URL: u}
	isNew := old == nil
	newName := isNew || old.Hostname != u.Hostname
	// A URL made public (or new and public) loses its viewer tokens.
	w.DropViews = u.Public && (isNew || !old.Public)
	if isNew {
		n, err := tx.CountURLs(ctx, sb.ID)
		if err != nil {
			return URL{}, err
		}
		if n >= MaxURLsPerSandbox {
			return URL{}, &LimitError{Limit: "urls_per_sandbox", Max: MaxURLsPerSandbox}
		}
	}
	if u.Public && (isNew || !old.Public) {
		if err := checkPublicURL(ctx, tx, sb, port); err != nil {
			return URL{}, err
		}
	}
	if newName {
		w.NameDay = Day(u.UpdatedAt)
		names, err := tx.URLNames(ctx, sb.AccountID, u.Hostname, w.NameDay)
		if err != nil {
			return URL{}, err
		}
		if names.Taken {
			return URL{}, fmt.Errorf("host name %q: %w", u.Hostname, ErrConflict)
		}
		// A name taken again on the same day counts once.
		if !slices.Contains(names.Today, u.Hostname) {
			if len(names.Today) >= names.Account.URLNamesPerDay {
				return URL{}, &LimitError{Limit: "url_names_per_day", Max: names.Account.URLNamesPerDay}
			}
			w.AddName = true
		}
	}
	if err := tx.WriteURL(ctx, w); err != nil {
		return URL{}, err
	}
	return w.URL, nil
}

// CheckURLToken is Store.CreateURLToken's decision for every
// implementation: tok may join u, whose tokens are all, or it is
// ErrURLPublic on a public URL and a LimitError past MaxLiveTokensPerURL
// tokens live at tok.CreatedAt. It returns the ids of the tokens that are
// no longer live, which the write deletes.
func CheckURLToken(u *URL, tok *URLToken, all []URLToken) (dead []string, err error) {
	if u.Public {
		return nil, ErrURLPublic
	}
	n := 0
	for _, o := range all {
		if o.Live(tok.CreatedAt) {
			n++
		} else {
			dead = append(dead, o.ID)
		}
	}
	if n >= MaxLiveTokensPerURL {
		return nil, &LimitError{Limit: "tokens_per_url", Max: MaxLiveTokensPerURL}
	}
	return dead, nil
}
