package pgtest

import (
	"context"
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
