package pgtest

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"froog.tech/froog/store"
	"froog.tech/froog/store/pg"
)

// A kept schema a test wrote into is, after reset, what the migrations
// made: no row of the test's, the migrations' own rows, sequences from
// their start.
func TestResetUndoesATest(t *testing.T) {
	ctx := context.Background()
	o := Options(t)
	s, err := pg.Open(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.CreateAccount(ctx, store.Account{MaxSandboxes: 10})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateSandbox(ctx, store.Sandbox{AccountID: a.ID, Name: "box"}, nil); err != nil {
		t.Fatal(err)
	}
	s.Close()
	conn := connect(t, URLWithSchema(o))
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SELECT nextval('inbox_seq')"); err != nil {
		t.Fatal(err)
	}
	digest, err := pg.MigrationsDigest()
	if err != nil {
		t.Fatal(err)
	}
	seed, err := seedSchema(ctx, conn, testURL(), digest[:12])
	if err != nil {
		t.Fatal(err)
	}
	if err := reset(ctx, conn, o.Schema, seed); err != nil {
		t.Fatalf("reset: %v", err)
	}
	rows, err := conn.Query(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = $1`, o.Schema)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(tables) < 10 {
		t.Fatalf("tables of %s: %v, %v", o.Schema, tables, err)
	}
	for _, table := range tables {
		var differ int
		q := "SELECT count(*) FROM ((TABLE " + pgx.Identifier{o.Schema, table}.Sanitize() + " EXCEPT ALL TABLE " + pgx.Identifier{seed, table}.Sanitize() +
			") UNION ALL (TABLE " + pgx.Identifier{seed, table}.Sanitize() + " EXCEPT ALL TABLE " + pgx.Identifier{o.Schema, table}.Sanitize() + ")) d"
		if table == "schema_migrations" { // applied_at differs
			q = "SELECT count(*) FROM (SELECT version FROM " + pgx.Identifier{o.Schema, table}.Sanitize() +
				" EXCEPT SELECT version FROM " + pgx.Identifier{seed, table}.Sanitize() + ") d"
		}
		if err := conn.QueryRow(ctx, q).Scan(&differ); err != nil {
			t.Fatalf("%s: %v", table, err)
		}
		if differ != 0 {
			t.Errorf("%s after reset: %d rows differ from the seed's", table, differ)
		}
	}
	var next int64
	if err := conn.QueryRow(ctx, "SELECT nextval('inbox_seq')").Scan(&next); err != nil || next != 1 {
		t.Errorf("inbox_seq after reset: %d, %v; want 1", next, err)
	}
	var head int64
	if err := conn.QueryRow(ctx, "SELECT seq FROM feed_head").Scan(&head); err != nil || head != 0 {
		t.Errorf("feed head after reset: %d, %v; want the migration's row, 0", head, err)
	}
}

// Tests at once get schemas of their own, and a connection a test leaves
// open in its schema is ended when it ends.
func TestSchemasAreTheTests(t *testing.T) {
	ctx := context.Background()
	names := make(chan string, 2)
	left := make(chan *pgx.Conn, 2)
	var both sync.WaitGroup // both hold a schema before either ends
	both.Add(2)
	ok := t.Run("group", func(t *testing.T) {
		for _, name := range []string{"a", "b"} {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				held := sync.OnceFunc(both.Done)
				defer held()
				o := Options(t)
				names <- o.Schema
				held()
				both.Wait()
				conn, err := pgx.Connect(ctx, URLWithSchema(o))
				if err != nil {
					t.Fatal(err)
				}
				left <- conn // not closed
			})
		}
	})
	if !ok {
		return
	}
	if a, b := <-names, <-names; a == b {
		t.Errorf("two tests at once were both given %s", a)
	}
	for range 2 {
		conn := <-left
		if err := conn.Ping(ctx); err == nil {
			t.Error("a connection left open in a test's schema still answers after the test")
		}
		conn.Close(ctx)
	}
}

// fakeDigest names kept schemas of a digest no migrations have.
const fakeDigest = "000000000000"

// schemaExists says whether Postgres has a schema of that name.
func schemaExists(t *testing.T, conn *pgx.Conn, name string) bool {
	t.Helper()
	var ok bool
	if err := conn.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, name).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

// A new seed drops the schemas other digests kept, their seed and drafts
// included, but not one a test of theirs still holds.
func TestOtherDigestsDropped(t *testing.T) {
	ctx := context.Background()
	conn, holder := connect(t, testURL()), connect(t, testURL())
	t.Cleanup(func() { conn.Close(ctx); holder.Close(ctx) }) // after the drops below
	// Each schema, and whether a test holds it.
	names := map[string]bool{
		"tp_" + fakeDigest + "_0": false, "tp_" + fakeDigest + "_1": true, "tp_" + fakeDigest + "_seed": false,
		"tp_" + fakeDigest + "_2_draft": false, "tp_" + fakeDigest + "_seed_draft": false,
	}
	t.Cleanup(func() {
		for name := range names {
			conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+name+" CASCADE")
		}
	})
	for name := range names {
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+name+" CASCADE; CREATE SCHEMA "+name); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := holder.Exec(ctx, `SELECT pg_advisory_lock(hashtext('froog-pgtest:' || $1), 1)`, fakeDigest); err != nil {
		t.Fatal(err)
	}
	digest, err := pg.MigrationsDigest()
	if err != nil {
		t.Fatal(err)
	}
	if err := dropOthers(ctx, conn, digest[:12]); err != nil {
		t.Fatal(err)
	}
	for name, held := range names {
		if got := schemaExists(t, conn, name); got != held {
			t.Errorf("%s: there %v after dropOthers, want %v", name, got, held)
		}
	}
}

// A schema is made under a draft name and renamed: a draft left by a
// killed process is made again, not kept, and none is left after.
func TestCreateReplacesADraft(t *testing.T) {
	ctx := context.Background()
	conn := connect(t, testURL())
	t.Cleanup(func() { conn.Close(ctx) }) // after the drop below
	o := pg.Options{URL: testURL(), Schema: "tp_" + fakeDigest + "_3"}
	drop := "DROP SCHEMA IF EXISTS " + o.Schema + ", " + o.Schema + "_draft CASCADE"
	t.Cleanup(func() { conn.Exec(ctx, drop) })
	if _, err := conn.Exec(ctx, drop+"; CREATE SCHEMA "+o.Schema+"_draft; CREATE TABLE "+o.Schema+"_draft.half (x int)"); err != nil {
		t.Fatal(err)
	}
	if err := create(ctx, conn, o); err != nil {
		t.Fatal(err)
	}
	var tables []string
	rows, err := conn.Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1`, o.Schema)
	if err == nil {
		tables, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(tables, "half") || !slices.Contains(tables, "schema_migrations") {
		t.Errorf("the made schema's tables: %v; want the migrations', not the draft's", tables)
	}
	if schemaExists(t, conn, o.Schema+"_draft") {
		t.Error("a draft is left after create")
	}
}
