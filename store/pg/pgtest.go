package pg

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// DefaultTestURL is where tests find Postgres unless
// FROOG_TEST_DATABASE_URL says otherwise.
const DefaultTestURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// TestOptions creates a fresh, migrated schema for one test and drops it
// when the test ends. Tests that need Postgres fail (not skip) when it is
// not there: make test starts it.
func TestOptions(t testing.TB) Options {
	t.Helper()
	o := TestSchema(t)
	if err := Migrate(context.Background(), o); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return o
}

// TestSchema is TestOptions without the migration.
func TestSchema(t testing.TB) Options {
	t.Helper()
	url := os.Getenv("FROOG_TEST_DATABASE_URL")
	if url == "" {
		url = DefaultTestURL
	}
	var b [6]byte
	rand.Read(b[:])
	o := Options{URL: url, Schema: "t_" + hex.EncodeToString(b[:])}
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
func (o Options) URLWithSchema() string {
	sep := "?"
	if strings.Contains(o.URL, "?") {
		sep = "&"
	}
	return o.URL + sep + "search_path=" + o.Schema
}
