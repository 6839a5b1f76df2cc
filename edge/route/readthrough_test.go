package route

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"froog.tech/froog/store"
)

// fakeHead is a store whose feed is at head; it counts the reads of it.
// Nothing else of it is used.
type fakeHead struct {
	Store
	head   atomic.Int64
	reads  atomic.Int64
	onHead func() // run (in a goroutine of its own) after each read
}

func (s *fakeHead) Head(context.Context) (int64, error) {
	s.reads.Add(1)
	if s.onHead != nil {
		go s.onHead()
	}
	return s.head.Load(), nil
}

func readThroughTable(st *fakeHead, seq int64) *Table {
	rs := &Table{o: Options{Store: st, Domain: "froog.test", Now: time.Now}, routes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "routes"})}
	rs.cur.Store(newTable())
	rs.current.Store(true)
	rs.advance(seq)
	return rs
}

// A name the table does not have yet, because the feed has not brought
// it, is found once the table has caught up with the store's head
// (issue #33: a new URL's first handshake).
func TestOwnerReadsThrough(t *testing.T) {
	t.Parallel()
	st := &fakeHead{}
	st.head.Store(5)
	rs := readThroughTable(st, 4)
	// The feed brings the URL after the miss has read the store's head.
	st.onHead = func() {
		tb := rs.cur.Load().clone()
		tb.putURL(&store.URL{ID: "url_1", AccountID: "acct_1", Hostname: "new-3000-abcdef", SandboxID: "sbx_1", Port: 3000})
		rs.publish(tb)
		rs.advance(5)
	}
	if got, err := rs.Owner("new-3000-abcdef.froog.test"); got != "acct_1" || err != nil {
		t.Fatalf("Owner of a URL the feed brings late = %q, %v; want acct_1", got, err)
	}
}

// An unknown name costs one look at the store's head, and nothing when
// asked again soon; a flood of made-up names costs at most one look per
// round.
func TestOwnerMissesCostLittle(t *testing.T) {
	t.Parallel()
	st := &fakeHead{}
	rs := readThroughTable(st, 0)
	for range 100 {
		if _, err := rs.Owner("nope-1-abcdef.froog.test"); err != ErrUnknownName {
			t.Fatalf("an unknown name: %v", err)
		}
	}
	if n := st.reads.Load(); n != 1 {
		t.Fatalf("one unknown name asked 100 times read the store's head %d times, want 1", n)
	}
	st.reads.Store(0)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range 500 {
		wg.Go(func() { rs.Owner(fmt.Sprintf("made-%d-up.froog.test", i)) })
	}
	wg.Wait()
	if n, most := st.reads.Load(), int64(time.Since(start)/roundEvery)+2; n > most {
		t.Fatalf("500 made-up names in %v read the store's head %d times, want at most %d", time.Since(start), n, most)
	}
}

// A viewer token made a moment ago opens its URL at once: Recheck looks
// again once the table has caught up (the capability test's revoke row
// met a 401 for a token minted just before). The same wrong token asked
// again soon costs nothing.
func TestRecheckFindsANewToken(t *testing.T) {
	t.Parallel()
	st := &fakeHead{}
	st.head.Store(5)
	rs := readThroughTable(st, 4)
	tb := rs.cur.Load().clone()
	tb.putURL(&store.URL{ID: "url_1", AccountID: "acct_1", Hostname: "app-3000-abcdef", SandboxID: "sbx_1", Port: 3000, TokenHash: store.HashSecret("own")})
	rs.publish(tb)
	st.onHead = func() {
		tb := rs.cur.Load().clone()
		tb.putToken(&store.URLToken{ID: "tok_1", URLID: "url_1", Hash: store.HashSecret("viewer"), ExpiresAt: time.Now().Add(time.Minute)}, time.Now())
		rs.publish(tb)
		rs.advance(5)
	}
	const host = "app-3000-abcdef.froog.test"
	opens := func(tok string) func(*Route) bool {
		return func(rt *Route) bool {
			if rt == nil {
				return false
			}
			_, ok := rt.Check(tok, time.Now())
			return ok
		}
	}
	if _, ok := rs.Lookup(host).Check("viewer", time.Now()); ok {
		t.Fatal("the token is in the table before the feed brought it: the test tests nothing")
	}
	if rt := rs.Recheck(host, "k-viewer", opens("viewer")); !opens("viewer")(rt) {
		t.Fatal("Recheck did not find the viewer token the feed brought late")
	}
	st.onHead = nil
	reads := st.reads.Load()
	for range 50 {
		if rt := rs.Recheck(host, "k-wrong", opens("wrong")); opens("wrong")(rt) {
			t.Fatal("a wrong token opened the URL")
		}
	}
	if n := st.reads.Load() - reads; n != 1 {
		t.Fatalf("one wrong token asked 50 times read the store's head %d times, want 1", n)
	}
}
