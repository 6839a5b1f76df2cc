package certs

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"froog.tech/froog/store"
)

// Readiness: whether a source can give certificates now, for the edge's
// /readyz. Loaded is the word: a source that would fail every handshake
// (an expired root or wildcard, wildcard files an operator broke, a
// certificate store that does not answer) is not ready.

// Check reports whether s can give certificates: the local CA's root is
// unexpired; the wildcard's files still load as a key pair for *.DOMAIN
// and the one served is unexpired; for ACME, the certificate storage in
// the store answers (issued certificates live there).
func (s *Source) Check(ctx context.Context) error {
	switch s.kind {
	case "local-ca":
		return unexpired("the local CA's root", s.ca.cert.NotAfter, time.Now())
	case "wildcard":
		return s.wild.check(time.Now())
	default:
		if _, err := s.store.KVGet(ctx, "froog/readyz"); err != nil && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("certificate storage does not answer: %w", err)
		}
		return nil
	}
}

func unexpired(what string, notAfter, now time.Time) error {
	if now.After(notAfter) {
		return fmt.Errorf("%s expired at %s", what, notAfter.UTC().Format(time.RFC3339))
	}
	return nil
}

// check reads the files again, as the next renewal check would, and
// looks at the certificate served.
func (w *Wildcard) check(now time.Time) error {
	c, err := tls.LoadX509KeyPair(w.certFile, w.keyFile)
	if err != nil {
		return fmt.Errorf("the wildcard's files do not load: %w", err)
	}
	if err := c.Leaf.VerifyHostname("x." + w.domain); err != nil {
		return fmt.Errorf("%s is not a wildcard for *.%s", w.certFile, w.domain)
	}
	if err := unexpired("the wildcard certificate on disk", c.Leaf.NotAfter, now); err != nil {
		return err
	}
	w.mu.Lock()
	served := w.cert.Leaf.NotAfter
	w.mu.Unlock()
	return unexpired("the wildcard certificate served", served, now)
}
