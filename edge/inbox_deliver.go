package edge

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"froog.tech/froog/store"
	"froog.tech/froog/wake"
)

// Delivery: the edge dials sandboxes (through the tunnel), so it is the
// edge that takes its inboxes' requests to the apps. The store is the
// bus: any edge may deliver what any edge stored. Each URL's queue gives
// out its head alone, leased to one edge (deliveryLease): arrival order
// per URL holds across edges, and a lease that runs out (its edge died
// between "stored" and "delivered") lets another edge, or this one
// restarted, deliver it again with the same Froog-Delivery. At least once:
// an app that answered but whose answer was lost sees the id twice.

const (
	// deliveryLease bounds how long one edge holds a delivery: a wake (up
	// to the hold's 20 s, three times) and one attempt.
	deliveryLease = 2 * time.Minute
	// attemptTimeout bounds one attempt: connect, send, the app's answer.
	attemptTimeout = 30 * time.Second
	// inboxRescan is how long the edge trusts its own kicks, the store's
	// InboxChanged (a redelivery, from any process) and the route table's
	// changes alone: a read of what is due that failed (the store down)
	// is tried again within it.
	inboxRescan = 5 * time.Second
	// wakeTimeout bounds a start asked for a delivery.
	wakeTimeout = 60 * time.Second
	// maxAnswerRead is how much of the app's answer is read (and dropped).
	maxAnswerRead = 64 << 10
)

// Headers the edge sets on every delivery; a sender's own are dropped.
const (
	deliveryHeader = "Froog-Delivery"
	attemptHeader  = "Froog-Attempt"
)

// DeliverInboxes delivers inboxes' requests until ctx ends: the URLs with
// a request due, each URL's one at a time. Without Options.Inbox it only
// waits for ctx.
func (s *Server) DeliverInboxes(ctx context.Context) error {
	if s.o.Inbox == nil {
		<-ctx.Done()
		return nil
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	// Close ends the deliveries under way too (their attempts are
	// recorded as failed, and another edge, or this one again, retries).
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	busy := map[string]bool{}
	for {
		changed, queued := s.o.Routes.Changed(), s.o.Inbox.InboxChanged()
		now := s.o.Now()
		due, next, err := s.o.Inbox.DueInboxes(ctx, now)
		if err != nil && ctx.Err() == nil {
			s.o.Logger.Warn("inbox: read what is due", slog.String("error", err.Error()))
		}
		for _, id := range due {
			mu.Lock()
			if busy[id] {
				mu.Unlock()
				continue
			}
			busy[id] = true
			mu.Unlock()
			wg.Go(func() {
				s.deliverURL(ctx, id)
				mu.Lock()
				delete(busy, id)
				mu.Unlock()
				s.kickInbox() // what arrived while it was busy
			})
		}
		wait := inboxRescan
		if !next.IsZero() {
			wait = min(wait, max(next.Sub(now), 10*time.Millisecond))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-s.done:
			t.Stop()
			return nil
		case <-s.ib.kick:
		case <-changed:
		case <-queued:
		case <-t.C:
		}
		t.Stop()
	}
}

func (s *Server) kickInbox() {
	select {
	case s.ib.kick <- struct{}{}:
	default:
	}
}

// deliverURL delivers the URL's queue, head first, until it is empty or
// its head waits for a retry.
func (s *Server) deliverURL(ctx context.Context, urlID string) {
	var up upstream
	defer up.close()
	for ctx.Err() == nil {
		d, err := s.o.Inbox.ClaimDelivery(ctx, urlID, s.ib.owner, s.o.Now(), deliveryLease)
		if errors.Is(err, store.ErrNotFound) {
			return
		}
		if err != nil {
			if ctx.Err() == nil {
				s.o.Logger.Warn("inbox: claim a delivery", slog.String("url", urlID), slog.String("error", err.Error()))
			}
			return
		}
		r := s.attempt(ctx, &d, &up)
		f, err := s.finishDelivery(ctx, &d, r)
		if err != nil {
			s.o.Logger.Warn("inbox: record a delivery", slog.String("delivery", d.ID), slog.String("error", err.Error()))
			return
		}
		s.o.Logger.Info("inbox delivery", slog.String("delivery", d.ID), slog.String("url", urlID), slog.Int("attempt", d.Attempts),
			slog.Int("status", r.Status), slog.String("state", f.State), slog.String("error", r.Error))
		outcome := map[string]string{store.DeliveryDelivered: "delivered", store.DeliveryFailed: "failed"}[f.State]
		if outcome == "" {
			outcome = "retry"
		}
		s.m.deliveries.WithLabelValues(outcome).Inc()
		if f.State != store.DeliveryDelivered {
			return
		}
	}
}

// finishDelivery records the attempt r on d, trying again while the
// store fails (Postgres restarting) and d's lease lasts: given up, the
// URL's queue would wait for the lease to run out, and the app would get
// d again. Recorded even as the edge stops (one more try once ctx ends):
// the next attempt, by any edge, follows the backoff rather than the
// lease.
func (s *Server) finishDelivery(ctx context.Context, d *store.Delivery, r store.DeliveryResult) (store.Delivery, error) {
	pause := 100 * time.Millisecond
	for {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
		f, err := s.o.Inbox.FinishDelivery(fctx, d.ID, s.ib.owner, r)
		cancel()
		if err == nil || errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) || ctx.Err() != nil ||
			!s.o.Now().Add(pause).Before(d.ClaimUntil) {
			return f, err
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done(): // Close too
		case <-t.C:
		}
		t.Stop()
		pause = min(2*pause, 5*time.Second)
	}
}

// upstream is a connection to the app that deliverURL keeps between its
// deliveries (an SSH channel takes tens of milliseconds to open).
type upstream struct {
	conn net.Conn
	br   *bufio.Reader
}

func (u *upstream) close() {
	if u.conn != nil {
		u.conn.Close()
		u.conn, u.br = nil, nil
	}
}

// attempt makes one attempt at d: the sandbox woken if it must be and
// may, then the request sent as stored, on up's connection when it has
// one (a kept connection the app closed meanwhile is dialed again once).
func (s *Server) attempt(ctx context.Context, d *store.Delivery, up *upstream) store.DeliveryResult {
	fail := func(format string, args ...any) store.DeliveryResult {
		up.close()
		return store.DeliveryResult{Error: fmt.Sprintf(format, args...), At: s.o.Now()}
	}
	sb := s.o.Routes.Sandbox(d.SandboxID)
	if sb == nil {
		return fail("the sandbox is not known to the edge")
	}
	if sb.State != store.StateRunning {
		up.close()
		if !sb.AutoStart {
			return fail("the sandbox is %s and auto_start is off", sb.State)
		}
		wctx, cancel := context.WithTimeout(ctx, wakeTimeout)
		err := s.starts.w.Wait(wctx, wake.Ask{SandboxID: d.SandboxID, Port: d.Port, Known: wakeSandbox(sb),
			Audit: &store.AuditEvent{AccountID: d.AccountID, At: s.o.Now(), Actor: "public-url", ActorLabel: "webhook inbox",
				Detail: map[string]string{"port": itoa(d.Port), "delivery": d.ID}}})
		cancel()
		if err != nil {
			return fail("start the sandbox: %v", err)
		}
	}
	actx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	for try := 0; ; try++ {
		kept := up.conn != nil
		if !kept {
			conn, err := s.o.Dialer.DialContext(actx, d.SandboxID, d.Port)
			if err != nil {
				return fail("connect to port %d: %v", d.Port, err)
			}
			up.conn, up.br = conn, bufio.NewReader(conn)
		}
		status, err := exchangeDelivery(actx, up, d)
		if err != nil {
			up.close()
			if kept && try == 0 && actx.Err() == nil {
				continue // the app closed the kept connection
			}
			return fail("%v", err)
		}
		r := store.DeliveryResult{Status: status, At: s.o.Now()}
		if status < 200 || status > 299 {
			r.Error = "the app answered " + strconv.Itoa(status)
		}
		return r
	}
}

// exchangeDelivery sends d on up and reads the app's answer; up keeps
// its connection only when the answer leaves it reusable.
func exchangeDelivery(ctx context.Context, up *upstream, d *store.Delivery) (int, error) {
	conn := up.conn
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	bw := bufio.NewWriter(conn)
	writeDelivery(bw, d)
	if err := bw.Flush(); err != nil {
		stop()
		return 0, fmt.Errorf("send: %w", err)
	}
	resp, err := http.ReadResponse(up.br, nil)
	if err != nil {
		stop()
		return 0, fmt.Errorf("read the app's answer: %w", err)
	}
	n, _ := io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswerRead+1))
	resp.Body.Close()
	if !stop() || resp.Close || n > maxAnswerRead {
		up.close()
	} else {
		conn.SetDeadline(time.Time{})
	}
	return resp.StatusCode, nil
}

// writeDelivery writes d as an HTTP/1.1 request, target and headers as
// stored (the parser that took them refused what would break a line), the
// edge's delivery headers added and the body framed by its length.
func writeDelivery(w *bufio.Writer, d *store.Delivery) {
	w.WriteString(d.Method + " " + d.Target + " HTTP/1.1\r\n")
	for _, h := range d.Headers {
		if strings.EqualFold(h.Name, deliveryHeader) || strings.EqualFold(h.Name, attemptHeader) || strings.EqualFold(h.Name, "Connection") {
			continue
		}
		w.WriteString(h.Name + ": " + h.Value + "\r\n")
	}
	w.WriteString(deliveryHeader + ": " + d.ID + "\r\n")
	w.WriteString(attemptHeader + ": " + strconv.Itoa(d.Attempts) + "\r\n")
	w.WriteString("Content-Length: " + strconv.Itoa(len(d.Body)) + "\r\n\r\n")
	w.Write(d.Body)
}
