package certs

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/certmagic"

	"froog.tech/froog/store"
)

// Storage is certmagic's storage on the store, so that every edge shares
// certificates, ACME accounts, challenge tokens and locks. Keys are a
// folder tree the way certmagic's file storage sees it: a key is a file,
// and every prefix of a key (up to a slash) is a folder.
type Storage struct {
	kv  store.CertStorage
	log *slog.Logger
	// LeaseTTL is how long a lock outlives a holder that stopped renewing
	// it (a crashed edge); held locks are renewed every third of it.
	leaseTTL time.Duration
	id       string // this instance, in every lease owner it takes

	mu   sync.Mutex
	held map[string]*heldLock
}

type heldLock struct {
	owner string
	stop  chan struct{}
	done  chan struct{}
}

var _ certmagic.Storage = (*Storage)(nil)

// NewStorage builds certmagic's storage on kv. log may be nil.
func NewStorage(kv store.CertStorage, log *slog.Logger) *Storage {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Storage{kv: kv, log: log, leaseTTL: 30 * time.Second, id: randomHex(8), held: map[string]*heldLock{}}
}

func randomHex(n int) string {
	b := make([]byte, n)
	crand.Read(b)
	return hex.EncodeToString(b)
}

// clean makes a certmagic key one of the store's: no leading, trailing or
// doubled slashes.
func clean(key string) string {
	return strings.Trim(path.Clean("/"+key), "/")
}

// notFound turns the store's "not found" into the one certmagic knows;
// every other error stays what it is, so certmagic never takes a
// database failure for a missing certificate (and orders it again).
func notFound(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return fs.ErrNotExist
	}
	return err
}

func (s *Storage) Store(ctx context.Context, key string, value []byte) error {
	return s.kv.KVPut(ctx, clean(key), value)
}

func (s *Storage) Load(ctx context.Context, key string) ([]byte, error) {
	kv, err := s.kv.KVGet(ctx, clean(key))
	if err != nil {
		return nil, fmt.Errorf("certificate storage: load %s: %w", key, notFound(err))
	}
	return kv.Value, nil
}

// Delete removes key and, if it is a folder, everything in it. A key that
// was not there is no error: it is not there when Delete returns.
func (s *Storage) Delete(ctx context.Context, key string) error {
	if err := s.kv.KVDelete(ctx, clean(key)); err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("certificate storage: delete %s: %w", key, err)
	}
	return nil
}

// Exists reports whether key is a file or a folder. A store error counts
// as "exists": certmagic then loads it and sees the error, rather than
// ordering what it may already have.
func (s *Storage) Exists(ctx context.Context, key string) bool {
	_, err := s.Stat(ctx, key)
	return !errors.Is(err, fs.ErrNotExist)
}

func (s *Storage) Stat(ctx context.Context, key string) (certmagic.KeyInfo, error) {
	k := clean(key)
	kv, err := s.kv.KVGet(ctx, k)
	switch {
	case err == nil:
		return certmagic.KeyInfo{Key: key, Modified: kv.Modified, Size: int64(len(kv.Value)), IsTerminal: true}, nil
	case !errors.Is(err, store.ErrNotFound):
		return certmagic.KeyInfo{}, fmt.Errorf("certificate storage: stat %s: %w", key, err)
	}
	below, err := s.kv.KVList(ctx, k)
	if err != nil {
		return certmagic.KeyInfo{}, fmt.Errorf("certificate storage: stat %s: %w", key, err)
	}
	if len(below) == 0 {
		return certmagic.KeyInfo{}, fmt.Errorf("certificate storage: stat %s: %w", key, fs.ErrNotExist)
	}
	return certmagic.KeyInfo{Key: key, IsTerminal: false}, nil
}

// List names what is in the folder prefix: its files and folders, and
// with recursive everything below them too, as file storage does.
func (s *Storage) List(ctx context.Context, prefix string, recursive bool) ([]string, error) {
	p := clean(prefix)
	keys, err := s.kv.KVList(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("certificate storage: list %s: %w", prefix, err)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("certificate storage: list %s: %w", prefix, fs.ErrNotExist)
	}
	base := p
	if base != "" {
		base += "/"
	}
	seen := map[string]bool{}
	var out []string
	add := func(k string) {
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	for _, k := range keys {
		rest := strings.TrimPrefix(k, base)
		parts := strings.Split(rest, "/")
		if !recursive {
			add(base + parts[0])
			continue
		}
		for i := range parts {
			add(base + strings.Join(parts[:i+1], "/"))
		}
	}
	return out, nil
}

// Lock waits until this caller holds the lock name: it polls, backing off
// up to 2 s, while another holder's lease is unexpired, and gives up when
// ctx ends. Every Lock takes a lease of its own (two callers in one edge
// exclude each other too), renewed until Unlock.
func (s *Storage) Lock(ctx context.Context, name string) error {
	owner := s.id + "/" + randomHex(8)
	lease := "certmagic/" + clean(name)
	wait := 50 * time.Millisecond
	for {
		ok, err := s.kv.AcquireLease(ctx, lease, owner, s.leaseTTL)
		if err != nil {
			return fmt.Errorf("certificate storage: lock %s: %w", name, err)
		}
		if ok {
			break
		}
		t := time.NewTimer(wait/2 + rand.N(wait))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, 2*time.Second)
	}
	h := &heldLock{owner: owner, stop: make(chan struct{}), done: make(chan struct{})}
	s.mu.Lock()
	prev := s.held[name]
	s.held[name] = h
	s.mu.Unlock()
	if prev != nil {
		close(prev.stop) // its lease has expired: we have the lock now
	}
	go s.renew(lease, h)
	return nil
}

// renew keeps h's lease from expiring until Unlock.
func (s *Storage) renew(lease string, h *heldLock) {
	defer close(h.done)
	t := time.NewTicker(s.leaseTTL / 3)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.leaseTTL/3)
		ok, err := s.kv.AcquireLease(ctx, lease, h.owner, s.leaseTTL)
		cancel()
		if err != nil || !ok {
			s.log.Warn("certificate storage: renewing a lock", slog.String("lock", lease), slog.Bool("lost", !ok), slog.Any("error", err))
		}
	}
}

// Unlock ends this instance's hold on name; another holder's lease is
// left alone.
func (s *Storage) Unlock(ctx context.Context, name string) error {
	s.mu.Lock()
	h := s.held[name]
	delete(s.held, name)
	s.mu.Unlock()
	if h == nil {
		return fmt.Errorf("certificate storage: unlock %s: not locked here", name)
	}
	close(h.stop)
	<-h.done
	if err := s.kv.ReleaseLease(ctx, "certmagic/"+clean(name), h.owner); err != nil {
		return fmt.Errorf("certificate storage: unlock %s: %w", name, err)
	}
	return nil
}

func (s *Storage) String() string { return "froog store" }
