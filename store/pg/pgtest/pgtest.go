// Package pgtest gives a test a Postgres schema of its own for store/pg.
//
// It lives apart from store/pg so that the shipped binary does not link
// package testing; only tests import it.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"froog.tech/froog/store/pg"
)

// DefaultURL is where tests find Postgres unless
// FROOG_TEST_DATABASE_URL says otherwise.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// Options creates a fresh, migrated schema for one test and drops it
// when the test ends. Tests that need Postgres fail (not skip) when it is
// not there: make test starts it.
func Options(t testing.TB) pg.Options {
	t.Helper()
	o := Schema(t)
	if err := pg.Migrate(context.Background(), o); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return o
}

// Schema is Options without the migration.
func Schema(t testing.TB) pg.Options {
	t.Helper()
	url := os.Getenv("FROOG_TEST_DATABASE_URL")
	if url == "" {
		url = DefaultURL
	}
	var b [6]byte
	rand.Read(b[:])
	o := pg.Options{URL: url, Schema: "t_" + hex.EncodeToString(b[:])}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect to test postgres at FROOG_TEST_DATABASE_URL (run deploy/testdeps.sh): %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+o.Schema); err != nil {
		t.Fatalf("create test schema: %v", err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Errorf("drop test schema: %v", err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+o.Schema+" CASCADE"); err != nil {
			t.Errorf("drop test schema: %v", err)
		}
	})
	return o
}

// URLWithSchema is o.URL with the schema as its search path, for a process
// that only takes a connection string.
func URLWithSchema(o pg.Options) string {
	sep := "?"
	if strings.Contains(o.URL, "?") {
		sep = "&"
	}
	return o.URL + sep + "search_path=" + o.Schema
}
