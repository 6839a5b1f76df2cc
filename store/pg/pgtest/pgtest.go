// Package pgtest gives a test a Postgres schema of its own for store/pg.
//
// It lives apart from store/pg so that the shipped binary does not link
// package testing; only tests import it.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"froog.tech/froog/store/pg"
)

// DefaultURL is where tests find Postgres unless
// FROOG_TEST_DATABASE_URL says otherwise.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// poolSize bounds the migrated schemas kept: more tests than this at
// once in one database is a leak, not a load.
const poolSize = 256

// Options gives a test a migrated schema of its own, empty, until it
// ends. Tests that need Postgres fail (not skip) when it is not there:
// make test starts it.
//
// The schemas are kept and reused, named by the migrations' digest
// (tp_<digest>_<n>): making and dropping one costs Postgres a fifth of a
// CPU-second (three new backends, and every table's catalog rows written
// and removed), emptying one a few milliseconds. A test holds its schema
// by an advisory lock on a connection it keeps until it ends; the next to
// take the schema brings it back to what the migrations made first, from
// a seed schema (tp_<digest>_seed) that no test uses. Schemas of other
// digests are dropped when a new seed is made.
// Every connection made with the options the test gets carries the
// schema as its application name, and when the test ends any still open
// (a store or process the test left behind) is ended before the schema is
// given up: none writes into the next test's.
func Options(t testing.TB) pg.Options {
	t.Helper()
	url := testURL()
	digest, err := pg.MigrationsDigest()
	if err != nil {
		t.Fatal(err)
	}
	digest = digest[:12]
	ctx := context.Background()
	conn := connect(t, url)
	for n := 0; n < poolSize; n++ {
		schema := fmt.Sprintf("tp_%s_%d", digest, n)
		o := pg.Options{URL: withParam(url, "application_name", schema), Schema: schema}
		var held, exists bool
		err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(hashtext('froog-pgtest:' || $1), $2)`, digest, n).Scan(&held)
		if err == nil && held {
			err = conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, o.Schema).Scan(&exists)
		}
		switch {
		case err != nil:
			conn.Close(ctx)
			t.Fatalf("take a test schema: %v", err)
		case !held:
			continue
		case exists:
			var seed string
			if seed, err = seedSchema(ctx, conn, url, digest); err == nil {
				err = reset(ctx, conn, o.Schema, seed)
			}
		default:
			err = create(ctx, conn, o)
		}
		t.Cleanup(func() {
			defer conn.Close(ctx)
			if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
				WHERE application_name = $1 AND pid <> pg_backend_pid()`, o.Schema); err != nil {
				t.Errorf("end the connections left in test schema %s: %v", o.Schema, err)
			}
		})
		if err != nil {
			t.Fatalf("test schema %s: %v", o.Schema, err)
		}
		return o
	}
	conn.Close(ctx)
	t.Fatalf("all %d test schemas are taken", poolSize)
	return pg.Options{}
}

// seeded is the seed schema this process has seen made.
var seeded struct {
	sync.Mutex
	url, digest string
}

// seedSchema returns the digest's seed schema, made and migrated if it is
// not there yet (under the lock n = -1).
func seedSchema(ctx context.Context, conn *pgx.Conn, url, digest string) (string, error) {
	seed := "tp_" + digest + "_seed"
	seeded.Lock()
	defer seeded.Unlock()
	if seeded.url == url && seeded.digest == digest {
		return seed, nil
	}
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(hashtext('froog-pgtest:' || $1), -1)`, digest); err != nil {
		return "", err
	}
	defer conn.Exec(ctx, `SELECT pg_advisory_unlock(hashtext('froog-pgtest:' || $1), -1)`, digest)
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, seed).Scan(&exists); err != nil {
		return "", err
	}
	if !exists {
		if err := create(ctx, conn, pg.Options{URL: url, Schema: seed}); err != nil {
			return "", err
		}
		if err := dropOthers(ctx, conn, digest); err != nil {
			return "", err
		}
	}
	seeded.url, seeded.digest = url, digest
	return seed, nil
}

// dropOthers drops the kept schemas of other digests that no test holds,
// and their drafts (left by a process killed while it made one).
func dropOthers(ctx context.Context, conn *pgx.Conn, digest string) error {
	rows, err := conn.Query(ctx, `SELECT nspname FROM pg_namespace WHERE nspname ~ '^tp_[0-9a-f]{12}_([0-9]+|seed)(_draft)?$' AND nspname NOT LIKE $1`, "tp_"+digest+"_%")
	if err != nil {
		return err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, name := range names {
		d, n, _ := strings.Cut(strings.TrimPrefix(strings.TrimSuffix(name, "_draft"), "tp_"), "_")
		key, err := strconv.Atoi(n)
		if err != nil {
			key = -1 // seed
		}
		var held bool
		if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(hashtext('froog-pgtest:' || $1), $2)`, d, key).Scan(&held); err != nil {
			return err
		}
		if !held {
			continue
		}
		_, err = conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{name}.Sanitize()+" CASCADE")
		conn.Exec(ctx, `SELECT pg_advisory_unlock(hashtext('froog-pgtest:' || $1), $2)`, d, key)
		if err != nil {
			return err
		}
	}
	return nil
}

// create makes and migrates o's schema under another name, then renames
// it: a schema kept is always a migrated one, even when a test process is
// killed midway.
func create(ctx context.Context, conn *pgx.Conn, o pg.Options) error {
	draft := o
	draft.Schema += "_draft"
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+draft.Schema+" CASCADE; CREATE SCHEMA "+draft.Schema); err != nil {
		return err
	}
	if err := pg.Migrate(ctx, draft); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	_, err := conn.Exec(ctx, "ALTER SCHEMA "+draft.Schema+" RENAME TO "+o.Schema)
	return err
}

// reset brings schema back to what its migrations made: it deletes every
// row of its tables (but its migrations'), those that refer to others
// first, then copies in the rows the migrations inserted, from the seed
// schema, and sets its sequences as the seed's.
func reset(ctx context.Context, conn *pgx.Conn, schema, seed string) error {
	rows, err := conn.Query(ctx, `SELECT c.relname, coalesce(array_agg(r.relname) FILTER (WHERE r.oid <> c.oid), '{}')
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		LEFT JOIN pg_constraint f ON f.conrelid = c.oid AND f.contype = 'f'
		LEFT JOIN pg_class r ON r.oid = f.confrelid
		WHERE n.nspname = $1 AND c.relkind = 'r' AND c.relname <> 'schema_migrations'
		GROUP BY c.relname`, schema)
	if err != nil {
		return err
	}
	refers := map[string][]string{}
	var table string
	var to []string
	if _, err := pgx.ForEachRow(rows, []any{&table, &to}, func() error {
		refers[table] = to
		return nil
	}); err != nil {
		return err
	}
	// order: a table after every table that refers to it.
	var order []string
	for len(refers) > 0 {
		var free []string
		for table := range refers {
			if !referred(refers, table) {
				free = append(free, table)
			}
		}
		if len(free) == 0 {
			return fmt.Errorf("tables refer to each other in a cycle: %v", refers)
		}
		for _, table := range free {
			delete(refers, table)
		}
		order = append(order, free...)
	}
	var q strings.Builder
	for _, table := range order {
		fmt.Fprintf(&q, "DELETE FROM %s;", pgx.Identifier{schema, table}.Sanitize())
	}
	for i := len(order) - 1; i >= 0; i-- {
		fmt.Fprintf(&q, "INSERT INTO %s SELECT * FROM %s;", pgx.Identifier{schema, order[i]}.Sanitize(), pgx.Identifier{seed, order[i]}.Sanitize())
	}
	if _, err := conn.Exec(ctx, q.String()); err != nil {
		return err
	}
	_, err = conn.Exec(ctx, `SELECT setval(format('%I.%I', s.schemaname, s.sequencename), coalesce(o.last_value, o.start_value), o.last_value IS NOT NULL)
		FROM pg_sequences s JOIN pg_sequences o ON o.sequencename = s.sequencename AND o.schemaname = $2
		WHERE s.schemaname = $1`, schema, seed)
	return err
}

func referred(refers map[string][]string, table string) bool {
	for _, to := range refers {
		for _, t := range to {
			if t == table {
				return true
			}
		}
	}
	return false
}

// Schema gives a test a new, empty schema (no migration), dropped when it
// ends: for a test of what makes the tables.
func Schema(t testing.TB) pg.Options {
	t.Helper()
	url := testURL()
	var b [6]byte
	rand.Read(b[:])
	o := pg.Options{URL: url, Schema: "t_" + hex.EncodeToString(b[:])}
	ctx := context.Background()
	conn := connect(t, url)
	t.Cleanup(func() { conn.Close(ctx) })
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+o.Schema); err != nil {
		t.Fatalf("create test schema: %v", err)
	}
	t.Cleanup(func() {
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+o.Schema+" CASCADE"); err != nil {
			t.Errorf("drop test schema: %v", err)
		}
	})
	return o
}

func testURL() string {
	if url := os.Getenv("FROOG_TEST_DATABASE_URL"); url != "" {
		return url
	}
	return DefaultURL
}

func connect(t testing.TB, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatalf("connect to test postgres at FROOG_TEST_DATABASE_URL (run deploy/testdeps.sh): %v", err)
	}
	return conn
}

// URLWithSchema is o.URL with the schema as its search path, for a process
// that only takes a connection string.
func URLWithSchema(o pg.Options) string { return withParam(o.URL, "search_path", o.Schema) }

func withParam(url, name, value string) string {
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	return url + sep + name + "=" + value
}
