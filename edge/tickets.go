package edge

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"froog.tech/froog/internal/seal"
	"froog.tech/froog/store"
)

// TLS session tickets that every edge opens: a client that resumed its
// session at one edge resumes it at any other behind the same name,
// skipping the full handshake (its key exchange and the certificate's
// signature, most of a handshake's CPU).
//
// The keys are random, kept in the store's key-value area sealed with the
// deployment's secret key (a dump of the database opens no ticket), and
// deleted once they have retired: a ticket holds its session's
// resumption secret (under TLS 1.2, its master secret), so a key that
// could be remade later, as one derived from the secret key would be,
// would open every session recorded before. Any edge makes the next key
// when the newest is ticketKeyRotate old; a key seals new tickets until a
// newer one is there and opens them until it is ticketKeyRetire old.
// Two edges that make a key at once both keep theirs: each opens the
// other's.
const (
	ticketKeyRotate = 12 * time.Hour
	ticketKeyRetire = 24 * time.Hour
	// ticketKeyPrefix is the keys' folder in the key-value area.
	ticketKeyPrefix = "tls-ticket-keys"
	// ticketRefresh is how often an edge reads the keys again.
	ticketRefresh = time.Minute
)

// TicketStore is the part of the store the ticket keys live in.
type TicketStore interface {
	KVGet(ctx context.Context, key string) (store.KV, error)
	KVPut(ctx context.Context, key string, value []byte) error
	KVDelete(ctx context.Context, key string) error
	KVList(ctx context.Context, prefix string) ([]string, error)
}

// TicketKeys seal and open the edge's TLS session tickets with the keys
// every edge shares (Options.Tickets); Run keeps them current.
type TicketKeys struct {
	kv     TicketStore
	sealer *seal.Sealer
	now    func() time.Time
	log    *slog.Logger
	// spare seals tickets while no shared key is usable (none read yet,
	// or the store out of reach for longer than a key lives): nothing
	// opens them, so those clients do a full handshake next time.
	spare cipher.AEAD

	mu   sync.RWMutex
	keys []ticketKey // newest first
}

type ticketKey struct {
	name string
	id   [ticketIDLen]byte // in front of each ticket it seals
	made time.Time
	aead cipher.AEAD
}

const ticketIDLen = 8

// NewTicketKeys makes the ticket keys of an edge on kv, sealed with the
// deployment's secret key. now nil means time.Now; log nil discards.
func NewTicketKeys(kv TicketStore, secret []byte, now func() time.Time, log *slog.Logger) (*TicketKeys, error) {
	sealer, err := seal.New(secret)
	if err != nil {
		return nil, err
	}
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	raw := make([]byte, 32)
	rand.Read(raw)
	spare, err := newTicketAEAD(raw)
	if err != nil {
		return nil, err
	}
	return &TicketKeys{kv: kv, sealer: sealer, now: now, log: log, spare: spare}, nil
}

func newTicketAEAD(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// Run reads the keys now and every ticketRefresh until ctx ends, making
// the next key and deleting retired ones on the way.
func (k *TicketKeys) Run(ctx context.Context) {
	for {
		if err := k.Refresh(ctx); err != nil && ctx.Err() == nil {
			k.log.Warn("tls: ticket keys", slog.String("error", err.Error()))
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(ticketRefresh):
		}
	}
}

// Refresh reads the keys from the store, deletes the retired ones and
// makes the next one when the newest is due for rotation.
func (k *TicketKeys) Refresh(ctx context.Context) error {
	now := k.now()
	names, err := k.kv.KVList(ctx, ticketKeyPrefix)
	if err != nil {
		return err
	}
	var newest time.Time
	var live []string
	for _, name := range names {
		made, ok := ticketKeyMade(name)
		switch {
		case !ok:
			k.log.Warn("tls: a ticket key of a name froog does not make; ignored", slog.String("key", name))
		case now.Sub(made) >= ticketKeyRetire:
			if err := k.kv.KVDelete(ctx, name); err != nil && !errors.Is(err, store.ErrNotFound) { // or another edge did
				return err
			}
		default:
			live = append(live, name)
			if made.After(newest) {
				newest = made
			}
		}
	}
	if newest.IsZero() || now.Sub(newest) >= ticketKeyRotate {
		raw := make([]byte, 32)
		rand.Read(raw)
		b := make([]byte, 8)
		rand.Read(b)
		name := fmt.Sprintf("%s/%016x-%s", ticketKeyPrefix, now.UnixNano(), hex.EncodeToString(b))
		if err := k.kv.KVPut(ctx, name, k.sealer.Seal(raw, seal.TicketKeyAD(name))); err != nil {
			return err
		}
		live = append(live, name)
	}
	keys := make([]ticketKey, 0, len(live))
	for _, name := range live {
		kv, err := k.kv.KVGet(ctx, name)
		if errors.Is(err, store.ErrNotFound) {
			continue // retired by another edge meanwhile
		}
		if err != nil {
			return err
		}
		raw, err := k.sealer.Open(kv.Value, seal.TicketKeyAD(name))
		if err != nil {
			k.log.Warn("tls: a ticket key that this edge's secret key does not open; ignored", slog.String("key", name))
			continue
		}
		aead, err := newTicketAEAD(raw)
		if err != nil {
			k.log.Warn("tls: a ticket key of the wrong size; ignored", slog.String("key", name))
			continue
		}
		made, _ := ticketKeyMade(name)
		id := sha256.Sum256([]byte(name))
		keys = append(keys, ticketKey{name: name, id: [ticketIDLen]byte(id[:ticketIDLen]), made: made, aead: aead})
	}
	slices.SortFunc(keys, func(a, b ticketKey) int { return b.made.Compare(a.made) }) // newest first: it seals
	k.mu.Lock()
	k.keys = keys
	k.mu.Unlock()
	return nil
}

// ticketKeyMade is when the key of the name was made: the name's first
// part, after the folder, is its UnixNano in hex.
func ticketKeyMade(name string) (time.Time, bool) {
	rest, ok := strings.CutPrefix(name, ticketKeyPrefix+"/")
	if !ok {
		return time.Time{}, false
	}
	stamp, _, ok := strings.Cut(rest, "-")
	if !ok || len(stamp) != 16 {
		return time.Time{}, false
	}
	n, err := strconv.ParseUint(stamp, 16, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(0, int64(n)), true
}

// wrap is tls.Config.WrapSession: the session sealed with the newest
// key that has not retired, behind its id.
func (k *TicketKeys) wrap(_ tls.ConnectionState, ss *tls.SessionState) ([]byte, error) {
	plain, err := ss.Bytes()
	if err != nil {
		return nil, err
	}
	var id [ticketIDLen]byte
	aead := k.spare
	if key, ok := k.usable(func(ticketKey) bool { return true }); ok {
		id, aead = key.id, key.aead
	}
	out := make([]byte, ticketIDLen+aead.NonceSize(), ticketIDLen+aead.NonceSize()+len(plain)+aead.Overhead())
	copy(out, id[:])
	rand.Read(out[ticketIDLen:])
	return aead.Seal(out, out[ticketIDLen:], plain, id[:]), nil
}

// unwrap is tls.Config.UnwrapSession: the session of a ticket that a
// key not yet retired sealed; anything else is not resumed (nil, nil),
// and the client does a full handshake.
func (k *TicketKeys) unwrap(ticket []byte, _ tls.ConnectionState) (*tls.SessionState, error) {
	if len(ticket) < ticketIDLen {
		return nil, nil
	}
	id := [ticketIDLen]byte(ticket[:ticketIDLen])
	key, ok := k.usable(func(key ticketKey) bool { return key.id == id })
	if !ok {
		return nil, nil
	}
	n := key.aead.NonceSize()
	if len(ticket) < ticketIDLen+n {
		return nil, nil
	}
	plain, err := key.aead.Open(nil, ticket[ticketIDLen:ticketIDLen+n], ticket[ticketIDLen+n:], id[:])
	if err != nil {
		return nil, nil
	}
	ss, err := tls.ParseSessionState(plain)
	if err != nil {
		return nil, nil
	}
	return ss, nil
}

// usable is the newest key that match takes and that has not retired
// by the edge's clock now.
func (k *TicketKeys) usable(match func(ticketKey) bool) (ticketKey, bool) {
	now := k.now()
	k.mu.RLock()
	defer k.mu.RUnlock()
	for _, key := range k.keys {
		if now.Sub(key.made) < ticketKeyRetire && match(key) {
			return key, true
		}
	}
	return ticketKey{}, false
}
