package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// A URL's webhook inbox: requests that match its rule are stored whole by
// the edge, answered at once, and delivered to the sandbox in arrival
// order, at least once. The rules every implementation applies live here
// (AddDeliveryIn, ClaimHead, FinishClaim), so that they agree.

// Inbox is a URL's webhook inbox, set by its owner.
type Inbox struct {
	// Method is the request method it takes ("" for any); PathPrefix the
	// start of the paths it takes (at least "/").
	Method     string `json:"method,omitempty"`
	PathPrefix string `json:"path_prefix"`
	// Status is the edge's answer to a stored request (0: 202), and Body
	// its body ("" for a small JSON document naming the delivery).
	Status int    `json:"status,omitempty"`
	Body   string `json:"body,omitempty"`
	// Verify, when set, checks each request's signature before it is
	// stored.
	Verify *InboxVerify `json:"verify,omitempty"`
}

// InboxVerify is an inbox's signature check: the provider's scheme and
// its secret, sealed by the API (the store never sees it in the clear).
type InboxVerify struct {
	Provider     string `json:"provider"`
	SecretSealed []byte `json:"secret_sealed"`
}

// Matches reports whether a request with method and path (raw, without
// the query) goes to the inbox.
func (in *Inbox) Matches(method, path string) bool {
	return in != nil && (in.Method == "" || in.Method == method) && strings.HasPrefix(path, in.PathPrefix)
}

// Delivery states.
const (
	DeliveryPending    = "pending"    // waiting for its turn or its next attempt
	DeliveryDelivering = "delivering" // claimed by an edge until ClaimUntil
	DeliveryDelivered  = "delivered"  // the app answered 2xx
	DeliveryFailed     = "failed"     // retried until RetryFor passed
)

// Bounds of an inbox (docs: Public URLs, webhook inbox).
const (
	// MaxDeliveryBody bounds one stored request's body.
	MaxDeliveryBody = 1 << 20
	// MaxDeliveryHeaders bounds the bytes of its headers.
	MaxDeliveryHeaders = 64 << 10
	// MaxPendingPerURL and MaxPendingPerAccount bound what waits to be
	// delivered; past them a request is refused (429), nothing stored.
	MaxPendingPerURL     = 1000
	MaxPendingPerAccount = 10000
	// Finished deliveries (delivered or failed) are kept for
	// DeliveriesKeptFor, at most DeliveriesKept per URL and
	// DeliveryBytesKept of bodies per URL, the oldest dropped first.
	DeliveriesKept    = 1000
	DeliveryBytesKept = 64 << 20
	DeliveriesKeptFor = 7 * 24 * time.Hour
	// RetryFor is how long after its arrival a delivery is retried before
	// it is kept as failed; the wait between attempts doubles from
	// RetryFirst up to RetryMax.
	RetryFor   = 24 * time.Hour
	RetryFirst = time.Second
	RetryMax   = 5 * time.Minute
)

// Header is one request header, as sent.
type Header struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Delivery is one request an inbox stored, and how its delivery goes.
type Delivery struct {
	ID        string `json:"id"` // Froog-Delivery, the same on every attempt
	URLID     string `json:"url_id"`
	AccountID string `json:"account_id"`
	SandboxID string `json:"sandbox_id"`
	Port      int    `json:"port"`
	// Seq orders a URL's deliveries: the store gives it, growing, at
	// arrival and again at a redelivery.
	Seq        int64     `json:"seq"`
	Method     string    `json:"method"`
	Target     string    `json:"target"` // path and query, as sent
	Headers    []Header  `json:"headers"`
	Body       []byte    `json:"body,omitempty"`
	Size       int       `json:"size"` // len(Body), also where Body is left out
	ReceivedAt time.Time `json:"received_at"`

	State       string     `json:"state"`
	Attempts    int        `json:"attempts"`
	NextAt      time.Time  `json:"next_at"` // a pending one's next attempt, not before
	LastStatus  int        `json:"last_status,omitempty"`
	LastError   string     `json:"last_error,omitempty"`
	DeliveredAt *time.Time `json:"delivered_at,omitempty"`
	// Owner and ClaimUntil: the edge delivering it, and its lease. A
	// lease that runs out (the edge died) lets another edge take it.
	Owner      string    `json:"owner,omitempty"`
	ClaimUntil time.Time `json:"claim_until"`
	// RetryUntil is when retrying ends (ReceivedAt, or the redelivery's
	// time, plus RetryFor).
	RetryUntil time.Time `json:"retry_until"`
}

// Queued reports whether d is still to be delivered.
func (d *Delivery) Queued() bool {
	return d.State == DeliveryPending || d.State == DeliveryDelivering
}

// DueAt is when d, at the head of its URL's queue, may be claimed.
func (d *Delivery) DueAt() time.Time {
	if d.State == DeliveryDelivering {
		return d.ClaimUntil
	}
	return d.NextAt
}

// DeliveryResult is one attempt's outcome.
type DeliveryResult struct {
	Status int    // the app's answer (0: none)
	Error  string // what failed, when no 2xx came
	At     time.Time
}

// Inboxes is the store's part of the webhook inbox.
type Inboxes interface {
	// AddDelivery stores a request for d.URLID as the tail of its queue,
	// pending, due at once. A LimitError past MaxPendingPerURL or
	// MaxPendingPerAccount stores nothing. Finished deliveries past the
	// retention bounds are dropped in the same write.
	AddDelivery(ctx context.Context, d Delivery) (Delivery, error)
	// DueInboxes lists the URLs whose queue head is due at at, and the
	// earliest time a head not yet due will be (zero: none).
	DueInboxes(ctx context.Context, at time.Time) (urlIDs []string, next time.Time, err error)
	// ClaimDelivery claims the head of the URL's queue for owner until
	// at+lease, counting an attempt, when it is due; ErrNotFound when none
	// is. One delivery per URL is claimed at a time: arrival order.
	ClaimDelivery(ctx context.Context, urlID, owner string, at time.Time, lease time.Duration) (Delivery, error)
	// FinishDelivery records owner's attempt on delivery id (FinishClaim);
	// ErrConflict when owner no longer holds it.
	FinishDelivery(ctx context.Context, id, owner string, r DeliveryResult) (Delivery, error)
	// Deliveries lists a URL's deliveries newest first, without bodies;
	// Delivery reads one, body included.
	Deliveries(ctx context.Context, urlID string, limit int) ([]Delivery, error)
	Delivery(ctx context.Context, urlID, id string) (Delivery, error)
	// Redeliver queues a delivery again, at the tail, with its id;
	// ErrNotFound when the URL has no such delivery, ErrConflict while it
	// is queued already.
	Redeliver(ctx context.Context, urlID, id string, at time.Time, ev *AuditEvent) (Delivery, error)
	// PurgeDeliveries removes every delivery of the URL and reports how
	// many.
	PurgeDeliveries(ctx context.Context, urlID string, ev *AuditEvent) (int, error)
	// InboxChanged returns a channel closed when a delivery may have
	// become due by another process's write: at least at every Redeliver
	// (the API's, to every edge). A request an edge stores, that edge
	// knows of itself; the edge delivering the URL's head takes the next
	// as it finishes. It may close at other commits too: the edges then
	// read DueInboxes again.
	InboxChanged() <-chan struct{}
}

// CheckDelivery is AddDelivery's check for every implementation: d is
// well formed and within the bounds, given how many deliveries its URL
// and its account have queued.
func CheckDelivery(d *Delivery, queuedURL, queuedAccount int) error {
	if d.URLID == "" || d.ID == "" {
		return fmt.Errorf("add delivery: a url and an id are required: %w", ErrConflict)
	}
	if len(d.Body) > MaxDeliveryBody {
		return &LimitError{Limit: "inbox_body_bytes", Max: MaxDeliveryBody}
	}
	n := 0
	for _, h := range d.Headers {
		n += len(h.Name) + len(h.Value) + 4
	}
	if n > MaxDeliveryHeaders {
		return &LimitError{Limit: "inbox_header_bytes", Max: MaxDeliveryHeaders}
	}
	if queuedURL >= MaxPendingPerURL {
		return &LimitError{Limit: "inbox_pending_per_url", Max: MaxPendingPerURL}
	}
	if queuedAccount >= MaxPendingPerAccount {
		return &LimitError{Limit: "inbox_pending_per_account", Max: MaxPendingPerAccount}
	}
	return nil
}

// NewDelivery makes d the tail of its queue at seq, pending, due at once.
func NewDelivery(d *Delivery, seq int64) {
	d.Seq, d.State, d.Attempts = seq, DeliveryPending, 0
	d.ReceivedAt = Micro(d.ReceivedAt)
	d.NextAt, d.RetryUntil = d.ReceivedAt, d.ReceivedAt.Add(RetryFor)
	d.Size = len(d.Body)
	d.Owner, d.ClaimUntil, d.LastStatus, d.LastError, d.DeliveredAt = "", time.Time{}, 0, "", nil
}

// Retention lists the ids of a URL's finished deliveries to drop at at:
// older than DeliveriesKeptFor, or past DeliveriesKept or
// DeliveryBytesKept, newest kept first. list is the URL's deliveries
// (its queued ones may be left out: they are passed over), bodies' sizes
// in Size.
func Retention(list []Delivery, at time.Time) []string {
	var done []Delivery
	for _, d := range list {
		if !d.Queued() {
			done = append(done, d)
		}
	}
	slices.SortFunc(done, func(a, b Delivery) int { return int(b.Seq - a.Seq) })
	var drop []string
	n, bytes := 0, 0
	for _, d := range done {
		n++
		bytes += d.Size
		if n > DeliveriesKept || bytes > DeliveryBytesKept || at.Sub(d.ReceivedAt) > DeliveriesKeptFor {
			drop = append(drop, d.ID)
		}
	}
	return drop
}

// Head is the first queued delivery of a URL's deliveries (nil: none).
func Head(list []Delivery) *Delivery {
	var h *Delivery
	for i := range list {
		if d := &list[i]; d.Queued() && (h == nil || d.Seq < h.Seq) {
			h = d
		}
	}
	return h
}

// ClaimHead claims h, its URL's queue head, for owner at at, when it is
// due; false when it is not.
func ClaimHead(h *Delivery, owner string, at time.Time, lease time.Duration) bool {
	if h == nil || h.DueAt().After(at) {
		return false
	}
	h.State, h.Owner, h.ClaimUntil = DeliveryDelivering, owner, Micro(at.Add(lease))
	h.Attempts++
	return true
}

// FinishClaim records owner's attempt on d: delivered on a 2xx; else
// pending again after a backoff, or failed once the next attempt would
// fall past RetryUntil. ErrConflict when owner no longer holds d.
func FinishClaim(d *Delivery, owner string, r DeliveryResult) error {
	if d.State != DeliveryDelivering || d.Owner != owner {
		return fmt.Errorf("finish delivery %s: claimed by another edge: %w", d.ID, ErrConflict)
	}
	at := Micro(r.At)
	d.Owner, d.ClaimUntil, d.LastStatus, d.LastError = "", time.Time{}, r.Status, r.Error
	if r.Status >= 200 && r.Status < 300 {
		d.State, d.DeliveredAt, d.LastError = DeliveryDelivered, &at, ""
		return nil
	}
	next := at.Add(Backoff(d.Attempts))
	if next.After(d.RetryUntil) {
		d.State = DeliveryFailed
		return nil
	}
	d.State, d.NextAt = DeliveryPending, next
	return nil
}

// Backoff is the wait after the attempts-th failed attempt.
func Backoff(attempts int) time.Duration {
	b := RetryFirst
	for i := 1; i < attempts && b < RetryMax; i++ {
		b *= 2
	}
	return min(b, RetryMax)
}

// RequeueDelivery makes d, finished, the tail of its queue again at seq:
// a redelivery, with its id and attempts so far.
func RequeueDelivery(d *Delivery, seq int64, at time.Time) error {
	if d.Queued() {
		return fmt.Errorf("redeliver %s: it is still queued: %w", d.ID, ErrConflict)
	}
	at = Micro(at)
	d.Seq, d.State, d.NextAt, d.RetryUntil = seq, DeliveryPending, at, at.Add(RetryFor)
	d.DeliveredAt = nil
	return nil
}
