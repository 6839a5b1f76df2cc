package pg_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"froog.tech/froog/internal/wait"
	"froog.tech/froog/store"
	"froog.tech/froog/store/pg"
	"froog.tech/froog/store/pg/pgtest"
	"froog.tech/froog/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) func() storetest.Backend {
		o := pgtest.Options(t)
		return func() storetest.Backend {
			s, err := pg.Open(context.Background(), o)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			return s
		}
	})
}

func TestMigrateTwice(t *testing.T) {
	o := pgtest.Options(t)
	if err := pg.Migrate(context.Background(), o); err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
}

func TestOpenUnmigrated(t *testing.T) {
	o := pgtest.Options(t)
	o.Schema += "_none" // exists nowhere
	if _, err := pg.Open(context.Background(), o); err == nil || !strings.Contains(err.Error(), "froogd migrate") {
		t.Fatalf("Open of an empty schema: got %v, want advice to migrate", err)
	}
}

// The LISTEN connection is killed under a subscriber: it is redialled and
// nothing committed meanwhile is missed.
func TestFeedSurvivesDroppedListener(t *testing.T) {
	ctx := context.Background()
	o := pgtest.Options(t)
	s, err := pg.Open(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a, err := s.CreateAccount(ctx, store.Account{MaxSandboxes: 100})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := s.Subscribe(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	next := func() store.Change {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		c, err := sub.Next(cctx)
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		return c
	}
	if _, err := s.CreateSandbox(ctx, store.Sandbox{AccountID: a.ID, Name: "one", CreatedAt: time.Now()}, nil); err != nil {
		t.Fatal(err)
	}
	if c := next(); c.Sandbox.Name != "one" {
		t.Fatalf("got %s", c.Sandbox.Name)
	}
	admin, err := pgx.Connect(ctx, o.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	// The listener connects in the background: wait for it, then kill it.
	var killed int
	wait.For(t, 10*time.Second, "the listen connection shows up", func() bool {
		if err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'froog-listen' AND query LIKE '%`+o.Schema+`%'`).Scan(&killed); err != nil {
			t.Fatal(err)
		}
		return killed > 0
	})
	if killed != 1 {
		t.Fatalf("killed %d listen connections, want 1", killed)
	}
	for _, name := range []string{"two", "three"} {
		if _, err := s.CreateSandbox(ctx, store.Sandbox{AccountID: a.ID, Name: name, CreatedAt: time.Now()}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if c := next(); c.Sandbox.Name != "two" {
		t.Fatalf("got %s, want two", c.Sandbox.Name)
	}
	if c := next(); c.Sandbox.Name != "three" {
		t.Fatalf("got %s, want three", c.Sandbox.Name)
	}
}

func TestPruneGivesGap(t *testing.T) {
	ctx := context.Background()
	s, err := pg.Open(ctx, pgtest.Options(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a, _ := s.CreateAccount(ctx, store.Account{MaxSandboxes: 10})
	if _, err := s.CreateSandbox(ctx, store.Sandbox{AccountID: a.ID, Name: "x", CreatedAt: time.Now()}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.PruneChanges(ctx, -time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ChangesAfter(ctx, 0, 10); err == nil || !strings.Contains(err.Error(), "gap") {
		t.Fatalf("reading pruned changes: got %v, want ErrFeedGap", err)
	}
}
