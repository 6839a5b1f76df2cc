package pg

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"froog.tech/froog/store"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Options say where the store is.
type Options struct {
	// URL is a Postgres connection string.
	URL string
	// Schema, when set, is used as the search path (tests give each test a
	// schema of its own). Empty: the server's default.
	Schema string
}

var schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

func (o Options) config() (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(o.URL)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	if o.Schema != "" {
		if !schemaName.MatchString(o.Schema) {
			return nil, fmt.Errorf("schema %q: want lowercase letters, digits and _", o.Schema)
		}
		cfg.ConnConfig.RuntimeParams["search_path"] = o.Schema
	}
	return cfg, nil
}

// channel is the NOTIFY channel, one per schema.
func (o Options) channel() string {
	if o.Schema == "" {
		return "froog_changes"
	}
	return "froog_changes_" + o.Schema
}

// Migrate brings the schema up to the newest version. Several processes
// may run it at once: an advisory lock lets one work at a time.
func Migrate(ctx context.Context, o Options) error {
	cfg, err := o.config()
	if err != nil {
		return err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig)
	if err != nil {
		return fmt.Errorf("connect to postgres: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(hashtext('froog-migrate:' || current_schema()))`); err != nil {
		return fmt.Errorf("lock for migration: %w", err)
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	files, err := migrationFiles()
	if err != nil {
		return err
	}
	for _, m := range files {
		var done bool
		if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = $1)`, m.version).Scan(&done); err != nil {
			return fmt.Errorf("read schema version: %w", err)
		}
		if done {
			continue
		}
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version) VALUES ($1)`, m.version)
			return err
		})
		if err != nil {
			return fmt.Errorf("migration %s: %w", m.name, err)
		}
	}
	return nil
}

// MigrationsDigest is a digest of the migrations this build carries:
// builds with the same digest make the same schema. (Tests keep migrated
// schemas by it, store/pg/pgtest.)
func MigrationsDigest() (string, error) {
	files, err := migrationFiles()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, m := range files {
		fmt.Fprintf(h, "%d %q\n", m.version, m.sql)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

type migration struct {
	version int
	name    string
	sql     string
}

func migrationFiles() ([]migration, error) {
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, n := range names {
		base := strings.TrimPrefix(n, "migrations/")
		v, err := strconv.Atoi(strings.SplitN(base, "_", 2)[0])
		if err != nil {
			return nil, fmt.Errorf("migration %s: name must start with its version: %w", base, err)
		}
		b, err := migrations.ReadFile(n)
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: base, sql: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out, nil
}

// Store is the Postgres store.
type Store struct {
	opts Options
	pool *pgxpool.Pool

	signal store.Signal

	listenOnce sync.Once
	stop       context.CancelFunc
	listenDone chan struct{}
	closeOnce  sync.Once
}

var (
	_ store.Store       = (*Store)(nil)
	_ store.CertStorage = (*Store)(nil)
	_ store.ChangeLog   = (*Store)(nil)
)

// Open connects to Postgres and checks that the schema is migrated.
func Open(ctx context.Context, o Options) (*Store, error) {
	cfg, err := o.config()
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to postgres: %w", err)
	}
	files, err := migrationFiles()
	if err != nil {
		pool.Close()
		return nil, err
	}
	var version int
	if err := pool.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&version); err != nil || version < files[len(files)-1].version {
		pool.Close()
		if err == nil {
			err = fmt.Errorf("schema is at version %d", version)
		}
		return nil, fmt.Errorf("postgres schema is not migrated (run froogd migrate): %w", err)
	}
	return &Store{opts: o, pool: pool, listenDone: make(chan struct{})}, nil
}

// Close stops the change listener and closes the pool. It is idempotent.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.listenOnce.Do(func() { close(s.listenDone) }) // never started
		if s.stop != nil {
			s.stop()
		}
		<-s.listenDone
		s.pool.Close()
		s.signal.Wake()
	})
	return nil
}

// txn is a transaction that collects the feed changes it makes.
type txn struct {
	pgx.Tx
	changes []store.Change
	// sandboxes are the sandboxes the transaction wrote, each with its
	// row as it was before (nil: new), for their webhook events.
	sandboxes []sandboxWrite
}

func (t *txn) changed(kind, id string, v any) {
	c := store.Change{Kind: kind, ID: id}
	switch v := v.(type) {
	case nil:
		c.Deleted = true
	case *store.Sandbox:
		c.Sandbox = v
	case *store.URL:
		c.URL = v
	case *store.URLToken:
		c.URLToken = v
	case *store.DesktopLink:
		c.DesktopLink = v
	case *store.Snapshot:
		c.Snapshot = v
	}
	t.changes = append(t.changes, c)
}

// inTx runs fn in a transaction, then writes ev (if not nil) and publishes
// the changes fn made, all before commit. It retries serialization
// failures and deadlocks.
func (s *Store) inTx(ctx context.Context, ev *store.AuditEvent, fn func(*txn) error) error {
	for attempt := 0; ; attempt++ {
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			t := &txn{Tx: tx}
			if err := fn(t); err != nil {
				return err
			}
			if ev != nil {
				if err := insertAudit(ctx, t, ev); err != nil {
					return err
				}
			}
			if err := queueWebhookEvents(ctx, t, ev); err != nil {
				return err
			}
			return publish(ctx, t, s.opts.channel())
		})
		var pgErr *pgconn.PgError
		if attempt < 5 && errors.As(err, &pgErr) && (pgErr.Code == "40001" || pgErr.Code == "40P01") {
			continue
		}
		return err
	}
}

func insertAudit(ctx context.Context, t *txn, ev *store.AuditEvent) error {
	doc, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	if err := t.QueryRow(ctx, `INSERT INTO audit_events (account_id, doc) VALUES ($1, $2) RETURNING id`, ev.AccountID, doc).Scan(&ev.ID); err != nil {
		return fmt.Errorf("write audit event: %w", err)
	}
	return nil
}

func publish(ctx context.Context, t *txn, channel string) error {
	if len(t.changes) == 0 {
		return nil
	}
	var last int64
	if err := t.QueryRow(ctx, `UPDATE feed_head SET seq = seq + $1 RETURNING seq`, len(t.changes)).Scan(&last); err != nil {
		return fmt.Errorf("take feed sequence: %w", err)
	}
	b := &pgx.Batch{}
	for i := range t.changes {
		c := &t.changes[i]
		c.Seq = last - int64(len(t.changes)-1-i)
		doc, err := json.Marshal(c)
		if err != nil {
			return err
		}
		b.Queue(`INSERT INTO changes (seq, doc) VALUES ($1, $2)`, c.Seq, doc)
	}
	b.Queue(`SELECT pg_notify($1, $2)`, channel, strconv.FormatInt(last, 10))
	if err := t.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("publish changes: %w", err)
	}
	return nil
}

// isUnique reports a unique-constraint violation.
func isUnique(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505"
}

// getDoc reads one JSON document into v; ErrNotFound when there is none.
func getDoc(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, v any, what, sql string, args ...any) error {
	var doc []byte
	if err := q.QueryRow(ctx, sql, args...).Scan(&doc); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%s: %w", what, store.ErrNotFound)
		}
		return fmt.Errorf("read %s: %w", what, err)
	}
	return json.Unmarshal(doc, v)
}

// docs reads a list of JSON documents.
func docs[T any](ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, what, sql string, args ...any) ([]T, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	raw, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	out := make([]T, len(raw))
	for i, b := range raw {
		if err := json.Unmarshal(b, &out[i]); err != nil {
			return nil, fmt.Errorf("decode %s: %w", what, err)
		}
	}
	return out, nil
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("encode %T: %v", v, err))
	}
	return b
}

// --- change feed ---

func (s *Store) Subscribe(ctx context.Context, after int64) (*store.Subscription, error) {
	s.startListener()
	return store.NewSubscription(ctx, s, after)
}

func (s *Store) Head(ctx context.Context) (int64, error) {
	var seq int64
	if err := s.pool.QueryRow(ctx, `SELECT seq FROM feed_head`).Scan(&seq); err != nil {
		return 0, fmt.Errorf("read feed head: %w", err)
	}
	return seq, nil
}

func (s *Store) Changed() <-chan struct{} {
	s.startListener()
	return s.signal.Changed()
}

func (s *Store) ChangesAfter(ctx context.Context, after int64, limit int) ([]store.Change, error) {
	var floor int64
	if err := s.pool.QueryRow(ctx, `SELECT floor FROM feed_head`).Scan(&floor); err != nil {
		return nil, fmt.Errorf("read changes: %w", err)
	}
	if after < floor {
		return nil, fmt.Errorf("read changes after %d: %w", after, store.ErrFeedGap)
	}
	return docs[store.Change](ctx, s.pool, "changes", `SELECT doc FROM changes WHERE seq > $1 ORDER BY seq LIMIT $2`, after, limit)
}

// PruneChanges forgets changes older than keep. Subscribers further behind
// get store.ErrFeedGap and reload.
func (s *Store) PruneChanges(ctx context.Context, keep time.Duration) error {
	return s.inTx(ctx, nil, func(t *txn) error {
		var max *int64
		if err := t.QueryRow(ctx, `SELECT max(seq) FROM changes WHERE at < now() - $1::interval`, keep.String()).Scan(&max); err != nil || max == nil {
			return err
		}
		if _, err := t.Exec(ctx, `DELETE FROM changes WHERE seq <= $1`, *max); err != nil {
			return err
		}
		_, err := t.Exec(ctx, `UPDATE feed_head SET floor = greatest(floor, $1)`, *max)
		return err
	})
}

// startListener starts, once, the goroutine that LISTENs for commits.
func (s *Store) startListener() {
	s.listenOnce.Do(func() {
		ctx, cancel := context.WithCancel(context.Background())
		s.stop = cancel
		go func() {
			defer close(s.listenDone)
			s.listen(ctx)
		}()
	})
}

// listen holds a LISTEN connection, redialling with backoff when it drops,
// and wakes subscribers at every notification and every reconnect (they
// then re-read from their sequence number, so nothing is missed).
func (s *Store) listen(ctx context.Context) {
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		err := s.listenOnceConn(ctx, func() { backoff = 50 * time.Millisecond })
		s.signal.Wake()
		if ctx.Err() != nil {
			return
		}
		_ = err // the next attempt says whether the database is back
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func (s *Store) listenOnceConn(ctx context.Context, connected func()) error {
	cfg, err := s.opts.config()
	if err != nil {
		return err
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = "froog-listen"
	conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.opts.channel()}.Sanitize()); err != nil {
		return err
	}
	connected()
	s.signal.Wake() // anything committed while we were away
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
		s.signal.Wake()
	}
}
