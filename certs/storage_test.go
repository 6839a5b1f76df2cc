package certs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"

	"froog.tech/froog/store"
	"froog.tech/froog/store/embedded"
	"froog.tech/froog/store/pg"
	"froog.tech/froog/store/pg/pgtest"
)

var ctx = context.Background()

// backend is a store with its certificate area.
type backend interface {
	store.CertStorage
	Close() error
}

// The storage conformance suite, against both stores, each compared
// with certmagic's own file storage doing the same.
func TestStorage(t *testing.T) {
	stores := map[string]func(t *testing.T) func() backend{
		"embedded": func(t *testing.T) func() backend {
			dir := t.TempDir()
			return func() backend {
				s, err := embedded.Open(dir)
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
		},
		"postgres": func(t *testing.T) func() backend {
			o := pgtest.Options(t)
			return func() backend {
				s, err := pg.Open(ctx, o)
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			o := open(t)
			for _, c := range []struct {
				name string
				fn   func(*testing.T, func() backend)
			}{
				{"FolderTree", testFolderTree},
				{"Errors", testErrors},
				{"Locks", testLocks},
			} {
				t.Run(c.name, func(t *testing.T) { c.fn(t, o) })
			}
		})
	}
}

func opened(t *testing.T, o func() backend) backend {
	s := o()
	t.Cleanup(func() { s.Close() })
	return s
}

// testFolderTree runs the same calls on the store and on certmagic's
// file storage and wants the same answers.
func testFolderTree(t *testing.T, o func() backend) {
	ours := NewStorage(opened(t, o), nil)
	theirs := &certmagic.FileStorage{Path: t.TempDir()}
	for _, k := range []string{"tree/acme/ca/users/a@b/a.json", "tree/acme/ca/users/a@b/a.key", "tree/certificates/ca/x.example/x.example.crt",
		"tree/certificates/ca/x.example/x.example.key", "tree/certificates/ca/y.example/y.example.crt", "tree/top"} {
		for _, s := range []certmagic.Storage{ours, theirs} {
			if err := s.Store(ctx, k, []byte("v:"+k)); err != nil {
				t.Fatalf("%s Store %s: %v", s, k, err)
			}
		}
	}
	same := func(what string, f func(certmagic.Storage) any) {
		t.Helper()
		a, b := f(ours), f(theirs)
		if fmt.Sprint(a) != fmt.Sprint(b) {
			t.Errorf("%s: store %v, file storage %v", what, a, b)
		}
	}
	list := func(prefix string, rec bool) func(certmagic.Storage) any {
		return func(s certmagic.Storage) any {
			keys, err := s.List(ctx, prefix, rec)
			slices.Sort(keys)
			return fmt.Sprint(keys, errors.Is(err, fs.ErrNotExist))
		}
	}
	same("List(tree/certificates)", list("tree/certificates", false))
	same("List(tree/certificates, recursive)", list("tree/certificates", true))
	same("List(tree)", list("tree", false))
	same("List(tree/nothing)", list("tree/nothing", false))
	for _, k := range []string{"tree/top", "tree/acme", "tree/acme/ca/users/a@b/a.key", "tree/nope", "tree/to"} {
		same("Exists("+k+")", func(s certmagic.Storage) any { return s.Exists(ctx, k) })
		same("Stat("+k+")", func(s certmagic.Storage) any {
			ki, err := s.Stat(ctx, k)
			if !ki.IsTerminal {
				ki.Size = 0 // a folder's size is the file system's business
			}
			return fmt.Sprint(ki.IsTerminal, ki.Size, errors.Is(err, fs.ErrNotExist))
		})
	}
	// Loading a folder is not something certmagic does; files and missing
	// keys load alike.
	for _, k := range []string{"tree/top", "tree/acme/ca/users/a@b/a.key", "tree/nope"} {
		same("Load("+k+")", func(s certmagic.Storage) any {
			v, err := s.Load(ctx, k)
			return fmt.Sprint(string(v), errors.Is(err, fs.ErrNotExist))
		})
	}
	same("Delete(tree/certificates/ca/x.example)", func(s certmagic.Storage) any { return s.Delete(ctx, "tree/certificates/ca/x.example") })
	same("Delete(tree/missing)", func(s certmagic.Storage) any { return s.Delete(ctx, "tree/missing") })
	same("List after Delete", list("tree", true))
}

// fakeBrokenKV is a store whose database has gone away.
type fakeBrokenKV struct{ store.CertStorage }

var errDown = errors.New("dial tcp 127.0.0.1:5432: connection refused")

func (fakeBrokenKV) KVGet(context.Context, string) (store.KV, error)    { return store.KV{}, errDown }
func (fakeBrokenKV) KVList(context.Context, string) ([]string, error)   { return nil, errDown }
func (fakeBrokenKV) KVPut(context.Context, string, []byte) error        { return errDown }
func (fakeBrokenKV) KVDelete(context.Context, string) error             { return errDown }
func (fakeBrokenKV) ReleaseLease(context.Context, string, string) error { return errDown }
func (fakeBrokenKV) AcquireLease(context.Context, string, string, time.Duration) (bool, error) {
	return false, errDown
}

// testErrors: a store that fails is never "not found" (certmagic would
// order a certificate it may have), and a closed Postgres store fails.
func testErrors(t *testing.T, o func() backend) {
	s := NewStorage(fakeBrokenKV{}, nil)
	for what, err := range map[string]error{
		"Load":   func() error { _, err := s.Load(ctx, "x"); return err }(),
		"Stat":   func() error { _, err := s.Stat(ctx, "x"); return err }(),
		"List":   func() error { _, err := s.List(ctx, "x", true); return err }(),
		"Delete": s.Delete(ctx, "x"),
		"Store":  s.Store(ctx, "x", nil),
		"Lock":   s.Lock(ctx, "x"),
	} {
		if !errors.Is(err, errDown) || errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s on a broken store: %v", what, err)
		}
	}
	if !s.Exists(ctx, "x") {
		t.Error("Exists on a broken store said no: certmagic would order again")
	}
}

func testLocks(t *testing.T, o func() backend) {
	kv := opened(t, o)
	a, b := NewStorage(kv, nil), NewStorage(kv, nil) // two edges (another process: TestLockAcrossProcesses)
	// Renewed every TTL/3, each renewal given TTL/3: 2 s, so that a loaded
	// machine's slow query or late tick misses at most one (with 600 ms a
	// lease went while a held it, on a machine busy with TCG guests).
	a.leaseTTL, b.leaseTTL = 2*time.Second, 2*time.Second
	if err := a.Lock(ctx, "issue_cert_x"); err != nil {
		t.Fatal(err)
	}
	// Held past its TTL: renewed, so b still waits.
	short, cancel := context.WithTimeout(ctx, 5*time.Second)
	err := b.Lock(short, "issue_cert_x")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("b.Lock while a holds it: %v, want to wait until the deadline", err)
	}
	// b cannot unlock what it does not hold.
	if err := b.Unlock(ctx, "issue_cert_x"); err == nil {
		t.Fatal("b unlocked a's lock")
	}
	if ok, _ := kv.AcquireLease(ctx, "certmagic/issue_cert_x", "someone else", time.Minute); ok {
		t.Fatal("a's lease went")
	}
	got := make(chan time.Time)
	go func() {
		if err := b.Lock(ctx, "issue_cert_x"); err != nil {
			t.Error(err)
		}
		got <- time.Now()
	}()
	time.Sleep(200 * time.Millisecond) // a holds it a while, b blocked in Lock: what is tested
	released := time.Now()
	if err := a.Unlock(ctx, "issue_cert_x"); err != nil {
		t.Fatal(err)
	}
	if at := <-got; at.Before(released) {
		t.Fatal("b had the lock before a let go")
	}
	// Two callers in one instance exclude each other as well.
	short, cancel = context.WithTimeout(ctx, 300*time.Millisecond)
	err = b.Lock(short, "issue_cert_x")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a second Lock in the same instance: %v", err)
	}
	b.Unlock(ctx, "issue_cert_x")
	// A holder that died (no renewals, no unlock) loses the lock when its
	// lease expires.
	dead := NewStorage(kv, nil)
	dead.leaseTTL = 500 * time.Millisecond
	if ok, err := kv.AcquireLease(ctx, "certmagic/crashed", dead.id+"/x", dead.leaseTTL); !ok || err != nil {
		t.Fatal(ok, err)
	}
	start := time.Now()
	if err := a.Lock(ctx, "crashed"); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Fatalf("took a live lease after %v", d)
	}
	a.Unlock(ctx, "crashed")
}

// Two processes fight for one lock on Postgres: the helper (this test
// binary again) holds it for a second; we must not get it before the
// helper says it let go.
func TestLockAcrossProcesses(t *testing.T) {
	if schema := os.Getenv("FROOG_LOCK_HELPER"); schema != "" {
		s, err := pg.Open(ctx, pg.Options{URL: os.Getenv("FROOG_LOCK_HELPER_URL"), Schema: schema})
		if err != nil {
			fmt.Println("helper:", err)
			os.Exit(1)
		}
		st := NewStorage(s, nil)
		if err := st.Lock(ctx, "fight"); err != nil {
			fmt.Println("helper:", err)
			os.Exit(1)
		}
		fmt.Println("locked")
		time.Sleep(time.Second) // holding it: the other process must wait
		fmt.Println("unlocking", time.Now().UnixNano())
		st.Unlock(ctx, "fight")
		os.Exit(0)
	}
	o := pgtest.Options(t)
	s, err := pg.Open(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockAcrossProcesses$")
	cmd.Env = append(os.Environ(), "FROOG_LOCK_HELPER="+o.Schema, "FROOG_LOCK_HELPER_URL="+o.URL)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, _ := out.Read(buf)
	if !strings.HasPrefix(string(buf[:n]), "locked") {
		t.Fatalf("helper: %q", buf[:n])
	}
	st := NewStorage(s, nil)
	if err := st.Lock(ctx, "fight"); err != nil {
		t.Fatal(err)
	}
	got := time.Now().UnixNano()
	rest := make([]byte, 256)
	m, _ := out.Read(rest)
	cmd.Wait()
	var released int64
	fmt.Sscanf(strings.TrimSpace(string(buf[:n])+string(rest[:m])), "locked\nunlocking %d", &released)
	if released == 0 || got < released {
		t.Fatalf("we locked at %d, the helper let go at %d (%q)", got, released, string(buf[:n])+string(rest[:m]))
	}
	st.Unlock(ctx, "fight")
}
