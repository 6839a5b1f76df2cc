package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Webhooks for sandbox events (docs: Webhooks). An account's endpoints
// get an HTTPS POST when one of its sandboxes runs, stops, fails, is
// deleted, expires, is degraded or recovers. The events are made by the
// store itself, in the transaction of the write that makes the
// transition (SandboxEvents), and queued there for every endpoint that
// wants them (FanOut): the outbox lives in the store, so a restart of
// the API or hostctl loses none. A sender (api.Server.DeliverWebhooks)
// claims due deliveries with a lease, so that two processes never send
// one attempt, and records each attempt in the endpoint's delivery log.
// The rules every implementation applies live here, so that they agree.

// Event types.
const (
	EventRunning   = "sandbox.running"
	EventStopped   = "sandbox.stopped"
	EventError     = "sandbox.error"
	EventDeleted   = "sandbox.deleted"
	EventExpired   = "sandbox.expired"
	EventDegraded  = "sandbox.degraded"
	EventRecovered = "sandbox.recovered"
	// EventPing is a test ping (POST /v1/webhooks/{id}/test); it is never
	// queued, and no endpoint subscribes to it.
	EventPing = "ping"
)

// EventTypes lists the event types an endpoint may subscribe to.
var EventTypes = []string{EventRunning, EventStopped, EventError, EventDeleted, EventExpired, EventDegraded, EventRecovered}

// Audit actions that make an event by themselves, without a change of
// state: a write whose audit event has one of them, on the sandbox it
// writes, queues the event with the audit event's detail "reason".
const (
	ActionDegraded = "sandbox.degraded"
	// ActionExpired is hostctl's write that records the end of a stopped
	// sandbox's disk (DiskKept): sandbox.expired. The sandbox stays.
	ActionExpired = "sandbox.expire"
)

// Bounds and schedule (docs: Webhooks, Limits).
const (
	MaxWebhooksPerAccount = 10
	// WebhookMaxAttempts is how many times one event is tried on one
	// endpoint.
	WebhookMaxAttempts = 8
	// WebhookLogKept is how long the delivery log keeps an attempt.
	WebhookLogKept = 30 * 24 * time.Hour
)

// webhookRetry is the wait after each failed attempt, the 1st to the 7th.
var webhookRetry = []time.Duration{5 * time.Second, 30 * time.Second, 2 * time.Minute, 10 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour}

// WebhookRetryAfter is the wait after the attempts-th failed attempt;
// false when that was the last.
func WebhookRetryAfter(attempts int) (time.Duration, bool) {
	if attempts < 1 || attempts >= WebhookMaxAttempts {
		return 0, false
	}
	return webhookRetry[attempts-1], true
}

// Webhook is an account's endpoint.
type Webhook struct {
	ID        string `json:"id"` // wh_…
	AccountID string `json:"account_id"`
	Name      string `json:"name,omitempty"`
	URL       string `json:"url"`
	// Events it gets; empty: every type of EventTypes.
	Events  []string `json:"events,omitempty"`
	Enabled bool     `json:"enabled"`
	// SecretSealed is the signing secret, sealed by the API (the store
	// never sees it in the clear).
	SecretSealed []byte    `json:"secret_sealed"`
	CreatedAt    time.Time `json:"created_at"`
	UpdatedAt    time.Time `json:"updated_at"`
}

// Wants reports whether w gets events of type typ now.
func (w *Webhook) Wants(typ string) bool {
	return w.Enabled && (len(w.Events) == 0 || slices.Contains(w.Events, typ))
}

// WebhookEvent is one event, as every endpoint gets it.
type WebhookEvent struct {
	ID        string    `json:"id"` // evt_…, froog-delivery: the same on every attempt
	AccountID string    `json:"account_id"`
	Type      string    `json:"type"`
	CreatedAt time.Time `json:"created_at"`
	// Sandbox is the sandbox as the write left it.
	Sandbox *Sandbox `json:"sandbox,omitempty"`
	Reason  string   `json:"reason,omitempty"`
}

// Webhook delivery states.
const (
	WebhookPending    = "pending"
	WebhookDelivering = "delivering" // claimed until ClaimUntil
)

// WebhookDelivery is one event queued for one endpoint (the outbox). It
// leaves the outbox once delivered or failed for good; its attempts stay
// in the delivery log.
type WebhookDelivery struct {
	ID         string       `json:"id"` // whd_…
	WebhookID  string       `json:"webhook_id"`
	AccountID  string       `json:"account_id"`
	Event      WebhookEvent `json:"event"`
	State      string       `json:"state"`
	Attempts   int          `json:"attempts"`
	NextAt     time.Time    `json:"next_at"`
	Owner      string       `json:"owner,omitempty"`
	ClaimUntil time.Time    `json:"claim_until"`
}

// DueAt is when d may be claimed.
func (d *WebhookDelivery) DueAt() time.Time {
	if d.State == WebhookDelivering {
		return d.ClaimUntil
	}
	return d.NextAt
}

// Attempt results in the delivery log.
const (
	AttemptDelivered = "delivered"
	AttemptFailed    = "failed"
)

// WebhookAttempt is one entry of an endpoint's delivery log.
type WebhookAttempt struct {
	ID           string     `json:"id"` // wha_…
	WebhookID    string     `json:"webhook_id"`
	AccountID    string     `json:"account_id"`
	EventID      string     `json:"event_id"`
	Event        string     `json:"event"`
	Sandbox      string     `json:"sandbox,omitempty"` // its name
	Attempt      int        `json:"attempt"`
	Status       string     `json:"status"`
	ResponseCode int        `json:"response_code,omitempty"`
	Error        string     `json:"error,omitempty"`
	DurationMS   int64      `json:"duration_ms"`
	CreatedAt    time.Time  `json:"created_at"`
	NextAt       *time.Time `json:"next_attempt_at,omitempty"`
}

// WebhookResult is one attempt's outcome, as the sender saw it.
type WebhookResult struct {
	Code     int    // the answer's status (0: none)
	Error    string // what failed when no 2xx came; never a secret
	Duration time.Duration
	At       time.Time
}

// OK reports whether the attempt delivered the event.
func (r WebhookResult) OK() bool { return r.Code >= 200 && r.Code < 300 }

// Webhooks is the store's part of webhooks.
type Webhooks interface {
	// CreateWebhook adds an endpoint: ErrNotFound without its account, a
	// LimitError past MaxWebhooksPerAccount.
	CreateWebhook(ctx context.Context, w Webhook, ev *AuditEvent) (Webhook, error)
	// ListWebhooks lists an account's endpoints, oldest first.
	ListWebhooks(ctx context.Context, accountID string) ([]Webhook, error)
	// Webhook reads one; ErrNotFound when the account has none of that id.
	Webhook(ctx context.Context, accountID, id string) (Webhook, error)
	// UpdateWebhook applies fn to the endpoint and writes it; one left
	// disabled loses its queued deliveries in the same write (a paused
	// endpoint gets no events).
	UpdateWebhook(ctx context.Context, accountID, id string, fn func(*Webhook, *AuditEvent) error, ev *AuditEvent) (Webhook, error)
	// DeleteWebhook removes the endpoint, its queued deliveries and its
	// delivery log.
	DeleteWebhook(ctx context.Context, accountID, id string, ev *AuditEvent) error
	// WebhookAttempts lists the endpoint's delivery log newest first, at
	// most limit entries made after since.
	WebhookAttempts(ctx context.Context, accountID, webhookID string, since time.Time, limit int) ([]WebhookAttempt, error)
	// AddWebhookAttempt logs an attempt made outside the outbox (a test
	// ping); ErrNotFound without the endpoint. Entries older than
	// WebhookLogKept are dropped in the same write.
	AddWebhookAttempt(ctx context.Context, a WebhookAttempt) error
	// ClaimWebhookDeliveries claims up to limit due deliveries for owner
	// until at+lease, counting an attempt on each, and reports the
	// earliest time one not yet due will be (zero: none). A claim whose
	// lease ran out (its sender died) is due again.
	ClaimWebhookDeliveries(ctx context.Context, owner string, at time.Time, lease time.Duration, limit int) ([]WebhookDelivery, time.Time, error)
	// FinishWebhookDelivery records owner's attempt on delivery id
	// (FinishWebhookClaim) and logs it; ErrConflict when owner no longer
	// holds it (it was claimed again, or its endpoint paused or deleted).
	FinishWebhookDelivery(ctx context.Context, id, owner string, r WebhookResult) (WebhookAttempt, error)
}

// CheckWebhooks is CreateWebhook's limit, given the account's count.
func CheckWebhooks(have int) error {
	if have >= MaxWebhooksPerAccount {
		return &LimitError{Limit: "webhooks", Max: MaxWebhooksPerAccount}
	}
	return nil
}

// hostDownNote is in the error HostDown writes, and marks it.
const hostDownNote = "stopped heart-beating"

// hostDown reports whether sb is in error because its host went down.
func hostDown(sb *Sandbox) bool {
	return sb.State == StateError && strings.Contains(sb.Error, hostDownNote)
}

// SandboxEvents are the events a write that turns old (nil: a new
// sandbox) into sb makes, with ev its audit event (nil: none). Every
// implementation calls it on every sandbox it writes, in the write's
// transaction, with the sandbox as it was before the transaction.
func SandboxEvents(old, sb *Sandbox, ev *AuditEvent) []WebhookEvent {
	if sb == nil || (old != nil && old.DeletedAt != nil) {
		return nil
	}
	var out []WebhookEvent
	add := func(typ, reason string) {
		out = append(out, WebhookEvent{ID: NewID("evt"), AccountID: sb.AccountID, Type: typ, CreatedAt: Micro(time.Now()), Sandbox: sb, Reason: reason})
	}
	if sb.DeletedAt != nil {
		if old == nil {
			return nil
		}
		add(EventDeleted, "")
		return out
	}
	if ev != nil && ev.Target == sb.Name {
		switch ev.Action {
		case ActionDegraded:
			add(EventDegraded, ev.Detail["reason"])
		case ActionExpired:
			add(EventExpired, ev.Detail["reason"])
		}
	}
	oldState := ""
	if old != nil {
		oldState = old.State
	}
	if sb.State == oldState {
		return out
	}
	switch sb.State {
	case StateRunning:
		if old != nil && hostDown(old) {
			add(EventRecovered, "its host answers again")
		}
		add(EventRunning, "")
	case StateStopped:
		add(EventStopped, "")
	case StateError:
		if hostDown(sb) {
			add(EventDegraded, sb.Error)
		} else {
			add(EventError, "")
		}
	}
	return out
}

// FanOut queues each event for every endpoint of its account that wants
// it (hooks: the account's endpoints).
func FanOut(events []WebhookEvent, hooks []Webhook) []WebhookDelivery {
	var out []WebhookDelivery
	for _, e := range events {
		for i := range hooks {
			if h := &hooks[i]; h.AccountID == e.AccountID && h.Wants(e.Type) {
				out = append(out, WebhookDelivery{ID: NewID("whd"), WebhookID: h.ID, AccountID: h.AccountID, Event: e, State: WebhookPending})
			}
		}
	}
	return out
}

// ClaimWebhook claims d for owner at at when it is due; false when not.
func ClaimWebhook(d *WebhookDelivery, owner string, at time.Time, lease time.Duration) bool {
	if d.DueAt().After(at) {
		return false
	}
	d.State, d.Owner, d.ClaimUntil = WebhookDelivering, owner, Micro(at.Add(lease))
	d.Attempts++
	return true
}

// FinishWebhookClaim records owner's attempt on d and returns its log
// entry, and whether d is done (delivered, or failed its last attempt):
// then it leaves the outbox, else it is pending again on the schedule.
// ErrConflict when owner no longer holds d.
func FinishWebhookClaim(d *WebhookDelivery, owner string, r WebhookResult) (WebhookAttempt, bool, error) {
	if d.State != WebhookDelivering || d.Owner != owner {
		return WebhookAttempt{}, false, fmt.Errorf("finish webhook delivery %s: claimed by another sender: %w", d.ID, ErrConflict)
	}
	at := Micro(r.At)
	a := NewAttempt(d.WebhookID, d.AccountID, d.Event, d.Attempts, r)
	d.Owner, d.ClaimUntil = "", time.Time{}
	if r.OK() {
		return a, true, nil
	}
	wait, again := WebhookRetryAfter(d.Attempts)
	if !again {
		return a, true, nil
	}
	next := at.Add(wait)
	d.State, d.NextAt, a.NextAt = WebhookPending, next, &next
	return a, false, nil
}

// NewAttempt is the log entry of attempt n of event e on endpoint id.
func NewAttempt(webhookID, accountID string, e WebhookEvent, n int, r WebhookResult) WebhookAttempt {
	a := WebhookAttempt{ID: NewID("wha"), WebhookID: webhookID, AccountID: accountID, EventID: e.ID, Event: e.Type, Attempt: n,
		Status: AttemptFailed, ResponseCode: r.Code, Error: r.Error, DurationMS: r.Duration.Milliseconds(), CreatedAt: Micro(r.At)}
	if e.Sandbox != nil {
		a.Sandbox = e.Sandbox.Name
	}
	if r.OK() {
		a.Status, a.Error = AttemptDelivered, ""
	}
	return a
}
