package certs_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"froog.tech/froog/certs"
	"froog.tech/froog/store"
)

// fakeKV is a certificate storage that answers KVGet with err.
type fakeKV struct {
	certs.Store
	err error
}

func (f fakeKV) KVGet(context.Context, string) (store.KV, error) { return store.KV{}, f.err }

// Each source's readiness: what makes it not ready, and what does not.
func TestSourceCheck(t *testing.T) {
	ctx := context.Background()
	open := func(t *testing.T, c certs.Config, d certs.Deps) *certs.Source {
		t.Helper()
		c.Domain = domain
		src, err := certs.Open(c, d)
		if err != nil {
			t.Fatal(err)
		}
		return src
	}
	t.Run("local CA", func(t *testing.T) {
		if err := open(t, certs.Config{LocalCADir: t.TempDir()}, certs.Deps{}).Check(ctx); err != nil {
			t.Fatalf("got %v, want ready", err)
		}
	})
	t.Run("wildcard", func(t *testing.T) {
		certFile, keyFile := writeWildcard(t)
		src := open(t, certs.Config{WildcardCert: certFile, WildcardKey: keyFile}, certs.Deps{})
		if err := src.Check(ctx); err != nil {
			t.Fatalf("got %v, want ready", err)
		}
		// An operator's renewal that wrote a broken file: not ready (the
		// edge still serves the certificate it has).
		if err := os.WriteFile(certFile, []byte("not a certificate"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := src.Check(ctx); err == nil || !strings.Contains(err.Error(), "do not load") {
			t.Fatalf("broken file: got %v, want an error saying the files do not load", err)
		}
	})
	for _, tc := range []struct {
		name    string
		kvErr   error
		wantErr string
	}{
		{"acme, storage answers", store.ErrNotFound, ""},
		{"acme, storage answers with the key", nil, ""},
		{"acme, storage down", errors.New("connection refused"), "certificate storage does not answer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := open(t, certs.Config{}, certs.Deps{Store: fakeKV{err: tc.kvErr}, Names: fakeNames{}, HTTPPort: 1, TLSPort: 2})
			err := src.Check(ctx)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("got %v, want %q", err, tc.wantErr)
			}
		})
	}
}
