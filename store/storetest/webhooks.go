package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"froog.tech/froog/store"
)

func webhook(t *testing.T, s Backend, acct, name string, events []string, enabled bool) store.Webhook {
	t.Helper()
	at := now.Add(time.Duration(made.Add(1)) * time.Second)
	w, err := s.CreateWebhook(ctx, store.Webhook{AccountID: acct, Name: name, URL: "https://example.com/" + name, Events: events, Enabled: enabled,
		SecretSealed: []byte("sealed"), CreatedAt: at, UpdatedAt: at}, &store.AuditEvent{AccountID: acct, At: now, Action: "webhook.create", Target: name})
	if err != nil {
		t.Fatalf("CreateWebhook %s: %v", name, err)
	}
	return w
}

// made orders the endpoints the suite makes by their creation.
var made atomic.Int64

func setState(t *testing.T, s Backend, id, state, errMsg string, ev *store.AuditEvent) {
	t.Helper()
	if _, err := s.UpdateSandbox(ctx, id, func(x *store.Sandbox, _ *store.AuditEvent) error { x.State, x.Error = state, errMsg; return nil }, ev); err != nil {
		t.Fatalf("set state %s: %v", state, err)
	}
}

// claimAll claims every due delivery at at and returns them by
// "webhook name/event type", with the names of hooks.
func claimAll(t *testing.T, s Backend, owner string, at time.Time, hooks ...store.Webhook) map[string]store.WebhookDelivery {
	t.Helper()
	list, _, err := s.ClaimWebhookDeliveries(ctx, owner, at, time.Minute, 100)
	if err != nil {
		t.Fatalf("ClaimWebhookDeliveries: %v", err)
	}
	out := map[string]store.WebhookDelivery{}
	for _, d := range list {
		name := d.WebhookID
		for _, h := range hooks {
			if h.ID == d.WebhookID {
				name = h.Name
			}
		}
		out[name+"/"+d.Event.Type] = d
	}
	return out
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func testWebhooks(t *testing.T, o func() Backend) {
	s := open(t, o)
	a := account(t, s, 10)
	other := account(t, s, 10)
	all := webhook(t, s, a.ID, "all", nil, true)
	errs := webhook(t, s, a.ID, "errors", []string{store.EventError}, true)
	paused := webhook(t, s, a.ID, "paused", nil, false)
	webhook(t, s, other.ID, "other", nil, true)

	// Endpoints are the account's: another's id finds nothing.
	if _, err := s.Webhook(ctx, other.ID, all.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another account's webhook: got %v, want ErrNotFound", err)
	}
	if list, err := s.ListWebhooks(ctx, a.ID); err != nil || len(list) != 3 || list[0].ID != all.ID {
		t.Fatalf("ListWebhooks: %+v, %v", list, err)
	}
	if got, err := s.Webhook(ctx, a.ID, all.ID); err != nil || string(got.SecretSealed) != "sealed" || !got.CreatedAt.Equal(all.CreatedAt) {
		t.Fatalf("Webhook: %+v, %v", got, err)
	}

	sb := sandbox(t, s, a.ID, "box", nil, now)
	if got := claimAll(t, s, "x", now); len(got) != 0 {
		t.Fatalf("a new sandbox (creating) made events: %v", keys(got))
	}
	setState(t, s, sb.ID, store.StateRunning, "", nil)
	setState(t, s, sb.ID, store.StateRunning, "", nil) // no change, no event
	setState(t, s, sb.ID, store.StateError, "the VM crashed", nil)
	got := claimAll(t, s, "x", now, all, errs, paused)
	if want := []string{"all/sandbox.error", "all/sandbox.running", "errors/sandbox.error"}; !slices.Equal(keys(got), want) {
		t.Fatalf("deliveries: got %v, want %v", keys(got), want)
	}
	run := got["all/sandbox.running"]
	if run.Attempts != 1 || run.Event.Sandbox == nil || run.Event.Sandbox.Name != "box" || run.Event.Sandbox.State != store.StateRunning || run.Event.AccountID != a.ID {
		t.Fatalf("running delivery: %+v", run)
	}
	if got["all/sandbox.error"].Event.ID != got["errors/sandbox.error"].Event.ID {
		t.Fatal("one event has two ids on two endpoints")
	}
	// Claimed: nobody else takes them while the lease runs.
	if again := claimAll(t, s, "y", now.Add(30*time.Second)); len(again) != 0 {
		t.Fatalf("claimed twice: %v", keys(again))
	}
	// Only the owner finishes.
	if _, err := s.FinishWebhookDelivery(ctx, run.ID, "y", store.WebhookResult{Code: 200, At: now}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("finish by another owner: got %v, want ErrConflict", err)
	}
	att, err := s.FinishWebhookDelivery(ctx, run.ID, "x", store.WebhookResult{Code: 204, Duration: 15 * time.Millisecond, At: now})
	if err != nil || att.Status != store.AttemptDelivered || att.ResponseCode != 204 || att.Attempt != 1 || att.EventID != run.Event.ID || att.Sandbox != "box" || att.NextAt != nil || att.DurationMS != 15 {
		t.Fatalf("delivered: %+v, %v", att, err)
	}
	if _, err := s.FinishWebhookDelivery(ctx, run.ID, "x", store.WebhookResult{Code: 200, At: now}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("finish a delivered one again: got %v, want ErrConflict", err)
	}

	if _, err := s.FinishWebhookDelivery(ctx, got["errors/sandbox.error"].ID, "x", store.WebhookResult{Code: 200, At: now}); err != nil {
		t.Fatal(err)
	}
	// A lease that runs out lets another sender take it, as attempt 2.
	e1 := got["all/sandbox.error"]
	late := claimAll(t, s, "y", now.Add(time.Minute), all)
	if d, ok := late["all/sandbox.error"]; !ok || d.Attempts != 2 || d.ID != e1.ID || len(late) != 1 {
		t.Fatalf("after the lease: %v", keys(late))
	}
	if _, err := s.FinishWebhookDelivery(ctx, e1.ID, "x", store.WebhookResult{Code: 200, At: now}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("finish after losing the lease: got %v, want ErrConflict", err)
	}

	// The schedule: +5 s, 30 s, 2, 10, 30 min, 1 h, 2 h, then it fails for good.
	at := now.Add(time.Minute)
	d := late["all/sandbox.error"]
	waits := []time.Duration{5 * time.Second, 30 * time.Second, 2 * time.Minute, 10 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour}
	for n := d.Attempts; ; n++ {
		att, err := s.FinishWebhookDelivery(ctx, d.ID, "y", store.WebhookResult{Code: 500, Error: "answered 500", At: at})
		if err != nil || att.Status != store.AttemptFailed || att.ResponseCode != 500 || att.Attempt != n {
			t.Fatalf("attempt %d: %+v, %v", n, att, err)
		}
		if n == store.WebhookMaxAttempts {
			if att.NextAt != nil {
				t.Fatalf("the last attempt names a next one: %v", att.NextAt)
			}
			break
		}
		want := at.Add(waits[n-1])
		if att.NextAt == nil || !att.NextAt.Equal(want) {
			t.Fatalf("attempt %d: next at %v, want %v", n, att.NextAt, want)
		}
		if early := claimAll(t, s, "y", want.Add(-time.Second)); len(early) != 0 {
			t.Fatalf("attempt %d: claimed early: %v", n+1, keys(early))
		}
		list, _, err := s.ClaimWebhookDeliveries(ctx, "y", want, time.Minute, 100)
		if err != nil || len(list) != 1 || list[0].ID != d.ID || list[0].Attempts != n+1 {
			t.Fatalf("attempt %d: claimed %+v, %v", n+1, list, err)
		}
		d, at = list[0], want
	}
	if rest, next, err := s.ClaimWebhookDeliveries(ctx, "z", at.Add(24*time.Hour), time.Minute, 100); err != nil || len(rest) != 0 || !next.IsZero() {
		t.Fatalf("after the last attempt: %d left, next %v, %v", len(rest), next, err)
	}

	log, err := s.WebhookAttempts(ctx, a.ID, all.ID, time.Time{}, 0)
	if err != nil || len(log) != 1+store.WebhookMaxAttempts-1 || log[0].Attempt != store.WebhookMaxAttempts || log[len(log)-1].Status != store.AttemptDelivered {
		t.Fatalf("delivery log: %d entries, %v", len(log), err)
	}
	if few, _ := s.WebhookAttempts(ctx, a.ID, all.ID, time.Time{}, 2); len(few) != 2 {
		t.Fatalf("limit 2: got %d", len(few))
	}
	if _, err := s.WebhookAttempts(ctx, other.ID, all.ID, time.Time{}, 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another account's log: got %v, want ErrNotFound", err)
	}
}

func testWebhookEvents(t *testing.T, o func() Backend) {
	s := open(t, o)
	a := account(t, s, 10)
	w := webhook(t, s, a.ID, "all", nil, true)
	h := register(t, s, "wh-host", 8, now)
	sb := sandbox(t, s, a.ID, "box", nil, now)
	if _, err := s.UpdateSandbox(ctx, sb.ID, func(x *store.Sandbox, _ *store.AuditEvent) error {
		x.HostID, x.State = h.ID, store.StateRunning
		return nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	type ev struct{ typ, reason string }
	events := func(at time.Time) []ev {
		t.Helper()
		list, _, err := s.ClaimWebhookDeliveries(ctx, "x", at, time.Minute, 100)
		if err != nil {
			t.Fatal(err)
		}
		var out []ev
		for _, d := range list {
			if d.WebhookID != w.ID {
				t.Fatalf("delivery for %s", d.WebhookID)
			}
			out = append(out, ev{d.Event.Type, d.Event.Reason})
			if _, err := s.FinishWebhookDelivery(ctx, d.ID, "x", store.WebhookResult{Code: 200, At: at}); err != nil {
				t.Fatal(err)
			}
		}
		slices.SortFunc(out, func(a, b ev) int {
			if a.typ < b.typ {
				return -1
			}
			if a.typ > b.typ {
				return 1
			}
			return 0
		})
		return out
	}
	if got := events(now); fmt.Sprint(got) != fmt.Sprint([]ev{{store.EventRunning, ""}}) {
		t.Fatalf("running: got %+v", got)
	}
	// Its host stops heart-beating: degraded, saying why.
	if _, err := s.MarkHostsDown(ctx, now.Add(time.Minute), now.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	got := events(now.Add(3 * time.Minute))
	if len(got) != 1 || got[0].typ != store.EventDegraded || got[0].reason == "" {
		t.Fatalf("host down: got %+v, want one sandbox.degraded with a reason", got)
	}
	// Back and running: recovered and running.
	setState(t, s, sb.ID, store.StateRunning, "", nil)
	if got := events(now.Add(4 * time.Minute)); fmt.Sprint(got) != fmt.Sprint([]ev{{store.EventRecovered, "its host answers again"}, {store.EventRunning, ""}}) {
		t.Fatalf("host back: got %+v", got)
	}
	// Degraded by whoever audits it (froogd dev's lost processes).
	deg := &store.AuditEvent{AccountID: a.ID, At: now, Action: store.ActionDegraded, Target: "box", Detail: map[string]string{"reason": "processes ended"}}
	setState(t, s, sb.ID, store.StateRunning, "", deg)
	if got := events(now.Add(5 * time.Minute)); fmt.Sprint(got) != fmt.Sprint([]ev{{store.EventDegraded, "processes ended"}}) {
		t.Fatalf("audited degraded: got %+v", got)
	}
	// A stop, through StopSandbox and then hostctl's observed state.
	if _, err := s.StopSandbox(ctx, sb.ID, now, nil); err != nil {
		t.Fatal(err)
	}
	if got := events(now.Add(6 * time.Minute)); len(got) != 0 {
		t.Fatalf("a stop asked (not yet done) made events: %+v", got)
	}
	setState(t, s, sb.ID, store.StateStopped, "", nil)
	if got := events(now.Add(7 * time.Minute)); fmt.Sprint(got) != fmt.Sprint([]ev{{store.EventStopped, ""}}) {
		t.Fatalf("stopped: got %+v", got)
	}
	// Its disk expires (hostctl's write): expired, and it stays.
	exp := &store.AuditEvent{AccountID: a.ID, At: now, Action: store.ActionExpired, Target: "box", Detail: map[string]string{"reason": "stopped over 14 days"}}
	setState(t, s, sb.ID, store.StateStopped, "", exp)
	if got := events(now.Add(8 * time.Minute)); fmt.Sprint(got) != fmt.Sprint([]ev{{store.EventExpired, "stopped over 14 days"}}) {
		t.Fatalf("expired: got %+v", got)
	}
	// Deleted.
	if err := s.DeleteSandbox(ctx, sb.ID, now, &store.AuditEvent{AccountID: a.ID, At: now, Action: "sandbox.delete", Target: "box"}); err != nil {
		t.Fatal(err)
	}
	if got := events(now.Add(9 * time.Minute)); fmt.Sprint(got) != fmt.Sprint([]ev{{store.EventDeleted, ""}}) {
		t.Fatalf("deleted: got %+v", got)
	}
}

func testWebhookEndpoints(t *testing.T, o func() Backend) {
	s := o()
	a := account(t, s, 10)
	w := webhook(t, s, a.ID, "w", nil, true)
	sb := sandbox(t, s, a.ID, "box", nil, now)
	setState(t, s, sb.ID, store.StateRunning, "", nil)

	// The outbox is durable: a reopened store still has the event.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, o)
	list, _, err := s.ClaimWebhookDeliveries(ctx, "x", now, time.Minute, 100)
	if err != nil || len(list) != 1 || list[0].Event.Type != store.EventRunning || list[0].WebhookID != w.ID {
		t.Fatalf("after reopen: %+v, %v", list, err)
	}
	if _, err := s.FinishWebhookDelivery(ctx, list[0].ID, "x", store.WebhookResult{Code: 502, At: now}); err != nil {
		t.Fatal(err)
	}
	// Paused: the queued delivery is dropped, and no new event comes.
	p, err := s.UpdateWebhook(ctx, a.ID, w.ID, func(x *store.Webhook, _ *store.AuditEvent) error {
		x.Enabled, x.Name, x.UpdatedAt = false, "renamed", now.Add(time.Hour)
		return nil
	}, &store.AuditEvent{AccountID: a.ID, At: now, Action: "webhook.update"})
	if err != nil || p.Enabled || p.Name != "renamed" || !p.CreatedAt.Equal(w.CreatedAt) || !p.UpdatedAt.Equal(now.Add(time.Hour)) {
		t.Fatalf("pause: %+v, %v", p, err)
	}
	setState(t, s, sb.ID, store.StateStopped, "", nil)
	if list, _, err := s.ClaimWebhookDeliveries(ctx, "x", now.Add(24*time.Hour), time.Minute, 100); err != nil || len(list) != 0 {
		t.Fatalf("a paused endpoint has deliveries: %+v, %v", list, err)
	}
	if _, err := s.UpdateWebhook(ctx, a.ID, w.ID, func(*store.Webhook, *store.AuditEvent) error { return errors.New("no") }, nil); err == nil {
		t.Fatal("an error from fn wrote anyway")
	}

	// The log keeps 30 days: an attempt logged later drops older ones.
	ping := store.WebhookAttempt{WebhookID: w.ID, AccountID: a.ID, EventID: "evt_ping", Event: store.EventPing, Attempt: 1, Status: store.AttemptDelivered, ResponseCode: 200, CreatedAt: now.Add(31 * 24 * time.Hour)}
	if err := s.AddWebhookAttempt(ctx, ping); err != nil {
		t.Fatal(err)
	}
	log, err := s.WebhookAttempts(ctx, a.ID, w.ID, time.Time{}, 0)
	if err != nil || len(log) != 1 || log[0].Event != store.EventPing {
		t.Fatalf("log after 31 days: %+v, %v", log, err)
	}
	if err := s.AddWebhookAttempt(ctx, store.WebhookAttempt{WebhookID: w.ID, AccountID: "acct_other", CreatedAt: now}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("log on another account's endpoint: got %v, want ErrNotFound", err)
	}

	// Delete: gone with its log.
	if err := s.DeleteWebhook(ctx, a.ID, w.ID, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Webhook(ctx, a.ID, w.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
	if err := s.DeleteWebhook(ctx, a.ID, w.ID, nil); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("delete twice: %v", err)
	}
	if ev, err := s.Audit(ctx, a.ID, 0, 10); err != nil || len(ev) < 2 || ev[0].Action != "webhook.update" {
		t.Fatalf("audit: %+v, %v", ev, err)
	}
}

// testWebhookLimit: at most 10 endpoints per account, also when created
// at once.
func testWebhookLimit(t *testing.T, o func() Backend) {
	s := open(t, o)
	a := account(t, s, 10)
	var wg sync.WaitGroup
	var mu sync.Mutex
	made, limited := 0, 0
	for i := range store.MaxWebhooksPerAccount + 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.CreateWebhook(ctx, store.Webhook{AccountID: a.ID, URL: fmt.Sprintf("https://example.com/%d", i), Enabled: true, CreatedAt: now}, nil)
			mu.Lock()
			defer mu.Unlock()
			var le *store.LimitError
			switch {
			case err == nil:
				made++
			case errors.As(err, &le) && le.Limit == "webhooks" && le.Max == store.MaxWebhooksPerAccount:
				limited++
			default:
				t.Errorf("CreateWebhook: %v", err)
			}
		}()
	}
	wg.Wait()
	if made != store.MaxWebhooksPerAccount || limited != 3 {
		t.Fatalf("made %d, limited %d; want %d and 3", made, limited, store.MaxWebhooksPerAccount)
	}
	if _, err := s.CreateWebhook(ctx, store.Webhook{AccountID: "acct_none", URL: "https://example.com", CreatedAt: now}, nil); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("without an account: got %v, want ErrNotFound", err)
	}
}
