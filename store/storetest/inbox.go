package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"froog.tech/froog/internal/testdep"
	"froog.tech/froog/store"
)

func delivery(u store.URL, body string, at time.Time) store.Delivery {
	return store.Delivery{ID: store.NewID("dlv"), URLID: u.ID, AccountID: u.AccountID, SandboxID: u.SandboxID, Port: u.Port,
		Method: "POST", Target: "/webhooks/gh?x=1", Headers: []store.Header{{Name: "X-Hub-Signature-256", Value: "sha256=00"}},
		Body: []byte(body), ReceivedAt: at}
}

func testInbox(t *testing.T, o func() Backend) {
	s := open(t, o)
	s.InboxChanged() // listening (Postgres) long before the redelivery below
	a := account(t, s, 10)
	sb := sandbox(t, s, a.ID, "box", nil, now)
	u, err := putURL(s, sb.ID, 3000, "box-3000-inbox1", true, now)
	if err != nil {
		t.Fatal(err)
	}
	// Three arrive; they come out in arrival order, one at a time.
	var ids []string
	for i := range 3 {
		d, err := s.AddDelivery(ctx, delivery(u, fmt.Sprint("body ", i), now))
		if err != nil || d.State != store.DeliveryPending || d.Size != 6 {
			t.Fatalf("AddDelivery: got %+v, %v", d, err)
		}
		ids = append(ids, d.ID)
	}
	if due, _, err := s.DueInboxes(ctx, now); err != nil || len(due) != 1 || due[0] != u.ID {
		t.Fatalf("DueInboxes: got %v, %v; want [%s]", due, err, u.ID)
	}
	c, err := s.ClaimDelivery(ctx, u.ID, "edge-a", now, time.Minute)
	if err != nil || c.ID != ids[0] || c.Attempts != 1 || string(c.Body) != "body 0" || c.Headers[0].Name != "X-Hub-Signature-256" {
		t.Fatalf("ClaimDelivery: got %+v, %v; want %s, attempt 1, its body", c, err, ids[0])
	}
	// While it is claimed, nothing else of the URL is: order.
	_, err = s.ClaimDelivery(ctx, u.ID, "edge-b", now, time.Minute)
	wantErr(t, "ClaimDelivery(head claimed)", err, store.ErrNotFound)
	if due, next, _ := s.DueInboxes(ctx, now); len(due) != 0 || !next.Equal(now.Add(time.Minute)) {
		t.Fatalf("DueInboxes while claimed: got %v, next %v; want none, next at the lease's end", due, next)
	}
	// A failed attempt is retried after the backoff.
	f, err := s.FinishDelivery(ctx, c.ID, "edge-a", store.DeliveryResult{Status: 500, Error: "app answered 500", At: now})
	if err != nil || f.State != store.DeliveryPending || !f.NextAt.Equal(now.Add(store.RetryFirst)) || f.LastStatus != 500 {
		t.Fatalf("FinishDelivery(500): got %+v, %v", f, err)
	}
	_, err = s.FinishDelivery(ctx, c.ID, "edge-a", store.DeliveryResult{Status: 200, At: now})
	wantErr(t, "FinishDelivery(not claimed)", err, store.ErrConflict)
	_, err = s.ClaimDelivery(ctx, u.ID, "edge-a", now, time.Minute)
	wantErr(t, "ClaimDelivery(before the backoff)", err, store.ErrNotFound)
	// A lease that runs out (its edge died) lets another edge take it.
	later := now.Add(2 * time.Second)
	if _, err := s.ClaimDelivery(ctx, u.ID, "edge-a", later, time.Second); err != nil {
		t.Fatal(err)
	}
	c, err = s.ClaimDelivery(ctx, u.ID, "edge-b", later.Add(2*time.Second), time.Minute)
	if err != nil || c.ID != ids[0] || c.Attempts != 3 {
		t.Fatalf("ClaimDelivery(lease out): got %+v, %v; want %s at attempt 3", c, err, ids[0])
	}
	_, err = s.FinishDelivery(ctx, c.ID, "edge-a", store.DeliveryResult{Status: 200, At: later})
	wantErr(t, "FinishDelivery(by the edge whose lease ran out)", err, store.ErrConflict)
	if f, err := s.FinishDelivery(ctx, c.ID, "edge-b", store.DeliveryResult{Status: 204, At: later}); err != nil || f.State != store.DeliveryDelivered || f.DeliveredAt == nil {
		t.Fatalf("FinishDelivery(204): got %+v, %v", f, err)
	}
	if c, err := s.ClaimDelivery(ctx, u.ID, "edge-b", later, time.Minute); err != nil || c.ID != ids[1] {
		t.Fatalf("ClaimDelivery after the first: got %+v, %v; want %s", c, err, ids[1])
	}
	// Past its retry time a delivery fails for good, and the next goes.
	f, err = s.FinishDelivery(ctx, ids[1], "edge-b", store.DeliveryResult{Error: "connection refused", At: now.Add(store.RetryFor)})
	if err != nil || f.State != store.DeliveryFailed || f.LastError != "connection refused" {
		t.Fatalf("FinishDelivery(past RetryFor): got %+v, %v", f, err)
	}
	// A redelivery goes to the tail with its id, and every edge hears of
	// it (InboxChanged), not only at its next read of what is due.
	heard := s.InboxChanged()
	r, err := s.Redeliver(ctx, u.ID, ids[0], later, &store.AuditEvent{AccountID: a.ID, At: later, Action: "url.redeliver"})
	if err != nil || r.State != store.DeliveryPending || r.Seq <= 0 {
		t.Fatalf("Redeliver: got %+v, %v", r, err)
	}
	select {
	case <-heard:
	case <-time.After(10 * time.Second):
		t.Fatal("Redeliver: InboxChanged did not close")
	}
	_, err = s.Redeliver(ctx, u.ID, ids[0], later, nil)
	wantErr(t, "Redeliver(queued)", err, store.ErrConflict)
	_, err = s.Redeliver(ctx, u.ID, "dlv_none", later, nil)
	wantErr(t, "Redeliver(unknown)", err, store.ErrNotFound)
	for _, want := range []string{ids[2], ids[0]} {
		c, err := s.ClaimDelivery(ctx, u.ID, "edge-a", later, time.Minute)
		if err != nil || c.ID != want {
			t.Fatalf("ClaimDelivery: got %+v, %v; want %s", c, err, want)
		}
		if _, err := s.FinishDelivery(ctx, c.ID, "edge-a", store.DeliveryResult{Status: 200, At: later}); err != nil {
			t.Fatal(err)
		}
	}
	list, err := s.Deliveries(ctx, u.ID, 0)
	if err != nil || len(list) != 3 || list[0].ID != ids[0] || list[0].Body != nil || list[0].Attempts != 4 {
		t.Fatalf("Deliveries: got %+v, %v; want 3, the redelivered first, no bodies", list, err)
	}
	d, err := s.Delivery(ctx, u.ID, ids[2])
	if err != nil || !bytes.Equal(d.Body, []byte("body 2")) {
		t.Fatalf("Delivery: got %+v, %v", d, err)
	}
	if n, err := s.PurgeDeliveries(ctx, u.ID, nil); err != nil || n != 3 {
		t.Fatalf("PurgeDeliveries: got %d, %v; want 3", n, err)
	}
	if list, _ := s.Deliveries(ctx, u.ID, 0); len(list) != 0 {
		t.Fatalf("Deliveries after a purge: %+v", list)
	}
	// Too large stores nothing; a deleted URL's deliveries go with it.
	big := delivery(u, "", now)
	big.Body = make([]byte, store.MaxDeliveryBody+1)
	_, err = s.AddDelivery(ctx, big)
	wantErr(t, "AddDelivery(too large)", err, store.ErrLimit)
	if _, err := s.AddDelivery(ctx, delivery(u, "x", now)); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteURL(ctx, sb.ID, 3000, nil); err != nil {
		t.Fatal(err)
	}
	if due, _, _ := s.DueInboxes(ctx, now); len(due) != 0 {
		t.Fatalf("DueInboxes after the URL's delete: %v", due)
	}
	_, err = s.AddDelivery(ctx, delivery(u, "x", now))
	wantErr(t, "AddDelivery(deleted URL)", err, store.ErrNotFound)
}

// testInboxBounds: past MaxPendingPerURL a request is refused, even from
// many writers at once, and the URL's queue holds exactly the bound.
func testInboxBounds(t *testing.T, o func() Backend) {
	s := open(t, o)
	a := account(t, s, 10)
	sb := sandbox(t, s, a.ID, "box", nil, now)
	u, err := putURL(s, sb.ID, 3000, "box-3000-inbox2", true, now)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, limited := 0, 0
	for range 8 {
		wg.Go(func() {
			for range (store.MaxPendingPerURL + 40) / 8 {
				_, err := s.AddDelivery(ctx, delivery(u, "x", now))
				mu.Lock()
				switch {
				case err == nil:
					ok++
				case errors.Is(err, store.ErrLimit):
					limited++
				default:
					t.Errorf("AddDelivery: %v", err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if ok != store.MaxPendingPerURL || limited != 40 {
		t.Fatalf("stored %d, refused %d; want %d and 40", ok, limited, store.MaxPendingPerURL)
	}
	// Finished ones are kept within the bounds, the oldest dropped.
	list, _ := s.Deliveries(ctx, u.ID, 0)
	if len(list) != store.MaxPendingPerURL {
		t.Fatalf("Deliveries: %d, want %d", len(list), store.MaxPendingPerURL)
	}
	for range 5 {
		c, err := s.ClaimDelivery(ctx, u.ID, "e", now, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.FinishDelivery(ctx, c.ID, "e", store.DeliveryResult{Status: 200, At: now}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.AddDelivery(ctx, delivery(u, "x", now.Add(store.DeliveriesKeptFor+time.Hour))); err != nil {
		t.Fatal(err)
	}
	if list, _ := s.Deliveries(ctx, u.ID, 0); len(list) != store.MaxPendingPerURL-5+1 {
		t.Fatalf("Deliveries after retention: %d, want %d (the 5 finished ones past the days dropped)", len(list), store.MaxPendingPerURL-4)
	}
}

// testInboxAccountBound: past MaxPendingPerAccount an account's next
// request is refused on any of its URLs, even when writers on many of
// its URLs race for its last places, each URL well under
// MaxPendingPerURL: together they hold exactly the bound. Another account
// is unaffected, and a delivery that finishes makes room for one more.
func testInboxAccountBound(t *testing.T, o func() Backend) {
	testdep.Short(t, "10,000 deliveries, one at a time: half a minute on Postgres under -race")
	s := open(t, o)
	a := account(t, s, 10)
	sb := sandbox(t, s, a.ID, "box", nil, now)
	const writers, tries = 11, 20 // at once, one a URL, for the last 110 places and 110 past them
	var urls []store.URL
	for i := range writers + 1 {
		u, err := putURL(s, sb.ID, 3000+i, fmt.Sprint("box-", 3000+i, "-inbox3"), true, now)
		if err != nil {
			t.Fatal(err)
		}
		urls = append(urls, u)
	}
	accountFull := func(what string, err error) bool {
		t.Helper()
		var le *store.LimitError
		if !errors.As(err, &le) || le.Limit != "inbox_pending_per_account" || le.Max != store.MaxPendingPerAccount {
			t.Errorf("%s: got error %v, want the limit inbox_pending_per_account (%d)", what, err, store.MaxPendingPerAccount)
			return false
		}
		return true
	}
	// Filled one at a time (writers at once would only wait for each
	// other, on the account's lock), spread over the URLs.
	last := writers * tries / 2
	for i := range store.MaxPendingPerAccount - last {
		if _, err := s.AddDelivery(ctx, delivery(urls[i%writers], "x", now)); err != nil {
			t.Fatalf("AddDelivery %d: %v", i, err)
		}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, limited := 0, 0
	for _, u := range urls[:writers] {
		wg.Go(func() {
			for range tries {
				_, err := s.AddDelivery(ctx, delivery(u, "x", now))
				mu.Lock()
				if err == nil {
					ok++
				} else if accountFull("AddDelivery", err) {
					limited++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if ok != last || limited != writers*tries-last {
		t.Fatalf("of the last %d tries, %d stored and %d refused; want %d and %d", writers*tries, ok, limited, last, writers*tries-last)
	}
	held := 0
	for _, u := range urls[:writers] {
		list, err := s.Deliveries(ctx, u.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		held += len(list)
	}
	if held != store.MaxPendingPerAccount {
		t.Fatalf("the account's URLs hold %d, want %d", held, store.MaxPendingPerAccount)
	}
	// Another URL of the account, empty: refused all the same.
	_, err := s.AddDelivery(ctx, delivery(urls[writers], "x", now))
	if !accountFull("AddDelivery(another URL)", err) {
		t.FailNow()
	}
	// Another account is unaffected.
	b := account(t, s, 10)
	ub, err := putURL(s, sandbox(t, s, b.ID, "other", nil, now).ID, 3000, "other-3000-inbox3", true, now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddDelivery(ctx, delivery(ub, "x", now)); err != nil {
		t.Fatalf("AddDelivery(another account): %v", err)
	}
	// One delivered makes room for one.
	c, err := s.ClaimDelivery(ctx, urls[0].ID, "e", now, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.FinishDelivery(ctx, c.ID, "e", store.DeliveryResult{Status: 200, At: now}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddDelivery(ctx, delivery(urls[writers], "x", now)); err != nil {
		t.Fatalf("AddDelivery after one was delivered: %v", err)
	}
	_, err = s.AddDelivery(ctx, delivery(urls[writers], "x", now))
	accountFull("AddDelivery(full again)", err)
	// Opened again, it counts the same; a URL's purge makes room for
	// what the URL held.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, o)
	_, err = s.AddDelivery(ctx, delivery(urls[writers], "x", now))
	accountFull("AddDelivery(reopened)", err)
	if _, err := s.PurgeDeliveries(ctx, urls[0].ID, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddDelivery(ctx, delivery(urls[writers], "x", now)); err != nil {
		t.Fatalf("AddDelivery after a URL's purge: %v", err)
	}
}
