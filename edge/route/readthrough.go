package route

import (
	"context"
	"sync"
	"time"
)

// Reading through on a miss. The table follows the change feed, a few
// milliseconds behind the store: a URL made a moment ago may not be in it
// yet, and its first TLS handshake would be refused (the certificate
// decision knows only the table's names). So on a miss, Owner asks the
// store where its feed is (Head: one small query) and waits, up to
// readThroughWait, for the table to have applied that far, then looks
// again. Misses share rounds: one round at a time, at most one every
// roundEvery, and a miss joins the next round to start, whose Head is
// read after the miss (so it covers every URL committed before it). A
// name still unknown after its round is remembered for missTTL: an
// unknown name asked again costs nothing, and a flood of made-up names
// costs the store at most one query per roundEvery.

const (
	readThroughWait = time.Second
	roundEvery      = 20 * time.Millisecond
	missTTL         = time.Second
	maxMisses       = 4096
)

type readThrough struct {
	mu     sync.Mutex
	moved  chan struct{} // closed when the table's feed position moves, then replaced
	next   *round        // the round misses join; nil: none waits to start
	misses map[string]time.Time

	running sync.Mutex // one round at a time
	last    time.Time  // when the last round started (under running)
}

// round is one look at the store's head, shared by the misses that
// joined it.
type round struct {
	done chan struct{}
	ok   bool // the table has caught up with the store as of the round's start
}

// advance notes that the published table is current to the feed's seq.
func (t *Table) advance(seq int64) {
	t.seq.Store(seq)
	t.rt.mu.Lock()
	if t.rt.moved != nil {
		close(t.rt.moved)
		t.rt.moved = nil
	}
	t.rt.mu.Unlock()
}

// Changed returns a channel that is closed when the published table next
// moves along the feed (a change applied, or a reload): a waiter takes it,
// then reads the table, then waits on it, and misses nothing.
func (t *Table) Changed() <-chan struct{} {
	t.rt.mu.Lock()
	defer t.rt.mu.Unlock()
	if t.rt.moved == nil {
		t.rt.moved = make(chan struct{})
	}
	return t.rt.moved
}

// missedRecently reports whether name was unknown after a round less than
// missTTL ago.
func (t *Table) missedRecently(name string, now time.Time) bool {
	t.rt.mu.Lock()
	defer t.rt.mu.Unlock()
	at, ok := t.rt.misses[name]
	return ok && now.Sub(at) < missTTL
}

func (t *Table) noteMiss(name string, now time.Time) {
	t.rt.mu.Lock()
	defer t.rt.mu.Unlock()
	if t.rt.misses == nil || len(t.rt.misses) >= maxMisses {
		t.rt.misses = map[string]time.Time{} // a flood of names: start over
	}
	t.rt.misses[name] = now
}

// lookAgain runs found once the table has caught up with the store,
// unless key was not found after a round less than missTTL ago; a key
// still not found is remembered.
func (t *Table) lookAgain(key string, found func() bool) {
	now := time.Now()
	if t.missedRecently(key, now) || !t.catchUp() {
		return
	}
	if !found() {
		t.noteMiss(key, now)
	}
}

// catchUp waits until the table holds every change the store had
// committed when it was called, or readThroughWait has passed; it
// reports whether it got there.
func (t *Table) catchUp() bool {
	t.rt.mu.Lock()
	r := t.rt.next
	if r == nil {
		r = &round{done: make(chan struct{})}
		t.rt.next = r
		go t.runRound(r) // bounded: roundEvery, then readThroughWait
	}
	t.rt.mu.Unlock()
	<-r.done
	return r.ok
}

func (t *Table) runRound(r *round) {
	defer close(r.done)
	t.rt.running.Lock()
	defer t.rt.running.Unlock()
	if d := roundEvery - time.Since(t.rt.last); d > 0 {
		time.Sleep(d)
	}
	t.rt.mu.Lock()
	if t.rt.next == r {
		t.rt.next = nil // misses from now on join the next round
	}
	t.rt.mu.Unlock()
	t.rt.last = time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), readThroughWait)
	defer cancel()
	head, err := t.o.Store.Head(ctx)
	if err != nil {
		return
	}
	for {
		t.rt.mu.Lock()
		if t.seq.Load() >= head {
			t.rt.mu.Unlock()
			r.ok = true
			return
		}
		if t.rt.moved == nil {
			t.rt.moved = make(chan struct{})
		}
		moved := t.rt.moved
		t.rt.mu.Unlock()
		select {
		case <-moved:
		case <-ctx.Done():
			return
		}
	}
}
