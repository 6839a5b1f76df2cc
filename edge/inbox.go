package edge

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"froog.tech/froog/edge/route"
	"froog.tech/froog/store"
)

// The webhook inbox's accept path: a request that matches its URL's
// inbox, once past the token (or, for an inbox that verifies, past its
// signature instead), is read whole, verified, stored durably, and
// answered by the edge itself; DeliverInboxes (inbox_deliver.go) takes it
// to the app later. It is one step of the pipeline, after strip (what is
// stored is what the app would have got) and before the hold: a stopped
// sandbox holds nobody.

// Inbox is what the webhook inbox needs of the store (store.Inboxes).
type Inbox interface {
	AddDelivery(ctx context.Context, d store.Delivery) (store.Delivery, error)
	DueInboxes(ctx context.Context, at time.Time) ([]string, time.Time, error)
	ClaimDelivery(ctx context.Context, urlID, owner string, at time.Time, lease time.Duration) (store.Delivery, error)
	FinishDelivery(ctx context.Context, id, owner string, r store.DeliveryResult) (store.Delivery, error)
	InboxChanged() <-chan struct{}
}

var _ Inbox = store.Store(nil)

// storeTimeout bounds the write that makes a request durable.
const storeTimeout = 10 * time.Second

var (
	errInboxTooLarge = problem{status: http.StatusRequestEntityTooLarge, code: "payload_too_large", title: "Too large",
		message: "This address's inbox takes requests of up to 1 MiB."}
	errInboxFull = problem{status: http.StatusTooManyRequests, code: "inbox_full", title: "Too many waiting",
		message: "This address's inbox holds as many requests as it keeps waiting. Try again later.", retryAfter: 30}
	errSignature = problem{status: http.StatusUnauthorized, code: "signature_invalid", title: "Signature refused",
		message: "The request's signature does not match this address's inbox, or its time is too far from now."}
	errInboxUnavailable = problem{status: http.StatusServiceUnavailable, code: "unavailable", title: "Not available",
		message: "This address cannot take the request right now.", retryAfter: 5}
)

// inboxState is the edge's side of delivery: who it is to the store's
// leases, and the kick that tells DeliverInboxes a request was stored.
type inboxState struct {
	owner string
	kick  chan struct{}
}

func newInboxState() inboxState {
	return inboxState{owner: store.NewID("edge"), kick: make(chan struct{}, 1)}
}

// verifiedInbox reports whether c goes to rt's inbox and that inbox
// checks signatures: then the signature stands in for the URL's token (a
// sender cannot carry froog's token; the app stays closed to others).
func (s *Server) verifiedInbox(rt *route.Route, c *call) bool {
	in := rt.Inbox
	return s.o.Inbox != nil && in != nil && in.Verify != nil && !c.upgrade && in.Matches(c.method, c.path)
}

// The inbox's rule is a prefix of the path as sent, byte for byte; an
// app reads the path decoded and resolved (route.AppPath). Where the
// two disagree on whether a request is under the prefix, a signed
// request could leave it ("/inbox/../admin": the rest of a private URL,
// without its token) or an unsigned one enter the app's side of it past
// the signature check ("/%69nbox/hook" on a public URL). Such a request
// is refused (400), as the framing guard refuses what two parsers would
// read two ways.

// inboxAmbiguous reports whether inbox in and an app disagree on
// whether a request with method and path (raw, without the query) is
// under the inbox's prefix.
func inboxAmbiguous(in *store.Inbox, method, path string) bool {
	if in == nil || in.Method != "" && in.Method != method {
		return false
	}
	return route.Ambiguous(path, in.PathPrefix)
}

// inbox answers a request that goes to its URL's inbox, and reports
// whether it did.
func (s *Server) inbox(ex exchange, f *flow) bool {
	c, d, rec := &f.c, &f.d, &f.rec
	in := d.rt.Inbox
	if s.o.Inbox == nil || c.upgrade || !in.Matches(c.method, c.path) {
		return false
	}
	body, p := s.inboxBody(ex, d, rec, c.body)
	if p != nil {
		if p == &errInboxTooLarge {
			s.m.inbox.WithLabelValues("too_large").Inc()
		}
		s.answer(ex, rec, p, c.html)
		return true
	}
	rec.requestTap().write(body) // the capture's, when on (capture.go)
	hs := ex.headers(f.fields[:0])
	if in.Verify != nil {
		if p := s.checkSignature(d.rt, hs, body, rec.id); p != nil {
			outcome := "unavailable"
			if p == &errSignature {
				outcome = "signature_refused"
			}
			s.m.inbox.WithLabelValues(outcome).Inc()
			s.answer(ex, rec, p, c.html)
			return true
		}
	}
	dl := store.Delivery{ID: store.NewID("dlv"), URLID: d.rt.URLID, AccountID: d.rt.AccountID, SandboxID: d.rt.SandboxID, Port: d.port,
		Method: strings.Clone(c.method), Target: strings.Clone(c.path), Headers: storedHeaders(hs, d.host), Body: body, ReceivedAt: s.o.Now()}
	if q := stripQuery(c.query); q != "" {
		dl.Target += "?" + q
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	dl, err := s.o.Inbox.AddDelivery(ctx, dl)
	cancel()
	switch {
	case errors.Is(err, store.ErrLimit):
		s.m.inbox.WithLabelValues("full").Inc()
		s.answer(ex, rec, &errInboxFull, c.html)
		return true
	case err != nil:
		s.o.Logger.Warn("inbox: store a request", slog.String("request_id", rec.id), slog.String("url", d.rt.URLID), slog.String("error", err.Error()))
		s.m.inbox.WithLabelValues("unavailable").Inc()
		s.answer(ex, rec, &errInboxUnavailable, c.html)
		return true
	}
	s.m.inbox.WithLabelValues("stored").Inc()
	select {
	case s.ib.kick <- struct{}{}:
	default:
	}
	status, answer := in.Status, []byte(in.Body)
	if status == 0 {
		status = http.StatusAccepted
	}
	if in.Body == "" {
		ex.setResponse("Content-Type", "application/json")
		answer = []byte(`{"delivery":"` + dl.ID + `"}`)
	} else {
		ex.setResponse("Content-Type", "text/plain; charset=utf-8")
	}
	ex.setResponse("Froog-Delivery", dl.ID)
	ex.setResponse("Cache-Control", "no-store")
	rec.status = status
	rec.bytesOut.Store(int64(len(answer)))
	ex.respond(status, answer)
	s.finish(rec)
	return true
}

// inboxBody reads the body whole, up to store.MaxDeliveryBody; a problem
// when it is larger (413) or the client's body failed.
func (s *Server) inboxBody(ex exchange, d *decision, rec *record, hasBody bool) ([]byte, *problem) {
	if !hasBody {
		return nil, nil
	}
	r := ex.body()
	if r == nil {
		hb, ok := ex.(interface{ headBody() []byte })
		if !ok {
			return nil, nil
		}
		b := hb.headBody()
		if len(b) > store.MaxDeliveryBody {
			return nil, &errInboxTooLarge
		}
		return append([]byte(nil), b...), nil
	}
	if ex.bodyLen() > store.MaxDeliveryBody {
		ex.drain(s, true)
		return nil, &errInboxTooLarge
	}
	cr := countingReader{r: r, n: &rec.bytesIn}
	s.paced(&cr, ex.setReadDeadline)
	b, err := io.ReadAll(io.LimitReader(&cr, store.MaxDeliveryBody+1))
	if err != nil {
		p := s.proxyProblem(d.rt, d.port, rec.id, err, &cr)
		return nil, &p
	}
	if len(b) > store.MaxDeliveryBody {
		ex.drain(s, true)
		return nil, &errInboxTooLarge
	}
	return b, nil
}

// checkSignature verifies a request for rt's inbox: nil when it passes.
// Neither the secret nor the signature is ever logged.
func (s *Server) checkSignature(rt *route.Route, hs []field, body []byte, requestID string) *problem {
	v := rt.Inbox.Verify
	if s.o.OpenSecret == nil {
		s.o.Logger.Warn("inbox: no key to open verify secrets", slog.String("request_id", requestID), slog.String("url", rt.URLID))
		return &errInboxUnavailable
	}
	secret, err := s.o.OpenSecret(v.SecretSealed, rt.URLID)
	if err != nil {
		s.o.Logger.Warn("inbox: open the verify secret", slog.String("request_id", requestID), slog.String("url", rt.URLID), slog.String("error", err.Error()))
		return &errInboxUnavailable
	}
	get := func(name string) string {
		for _, h := range hs {
			if strings.EqualFold(h.name, name) {
				return h.value
			}
		}
		return ""
	}
	if err := verify(v.Provider, secret, get, body, s.o.Now()); err != nil {
		s.o.Logger.Info("inbox: signature refused", slog.String("request_id", requestID), slog.String("url", rt.URLID), slog.String("provider", v.Provider), slog.String("reason", err.Error()))
		return &errSignature
	}
	return nil
}

// storedHeaders copies the headers as they go to the app, Host first (the
// public host), without the framing headers delivery sets itself.
func storedHeaders(hs []field, host string) []store.Header {
	out := make([]store.Header, 0, len(hs)+1)
	out = append(out, store.Header{Name: "Host", Value: host})
	for _, h := range hs {
		switch {
		case strings.EqualFold(h.name, "Host"), strings.EqualFold(h.name, "Content-Length"), strings.EqualFold(h.name, "Transfer-Encoding"):
			continue
		}
		out = append(out, store.Header{Name: strings.Clone(h.name), Value: strings.Clone(h.value)})
	}
	return out
}
