package api

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"sync"
	"syscall"
	"time"

	"froog.tech/froog/store"
)

// The webhook sender: any API process may run it, because deliveries are
// leased through the store (two processes never send one attempt).

const (
	// webhookTimeout is how long an endpoint has to answer (docs: 10 s).
	webhookTimeout = 10 * time.Second
	// webhookLease covers one attempt and its bookkeeping; a sender that
	// dies leaves its claims to another after it.
	webhookLease = 30 * time.Second
	// webhookBatch is how many deliveries one claim takes (sent at once).
	webhookBatch = 16
	// webhookPoll bounds the wait for new events: they are made by any
	// process's writes (hostctl's), so the sender looks again this often.
	webhookPoll = time.Second
)

// errBlockedTarget is the refusal of a non-public address.
var errBlockedTarget = errors.New("refused: the address is not public")

// webhookDialer dials endpoints: it resolves the name itself and dials
// only public addresses, and its dialer's Control checks the address
// actually dialled again, so a name that resolves to 10.x, or that
// changes its answer between the check and the dial (DNS rebinding),
// reaches nothing private.
type webhookDialer struct {
	allowPrivate bool
	lookup       func(ctx context.Context, host string) ([]netip.Addr, error)
	dialer       net.Dialer
}

func newWebhookDialer(allowPrivate bool, lookup func(context.Context, string) ([]netip.Addr, error)) *webhookDialer {
	d := &webhookDialer{allowPrivate: allowPrivate, lookup: lookup}
	if d.lookup == nil {
		d.lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	d.dialer = net.Dialer{Timeout: webhookTimeout}
	if !allowPrivate {
		d.dialer.Control = func(network, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil || BlockedWebhookIP(ap.Addr()) {
				return fmt.Errorf("dial %s: %w", address, errBlockedTarget)
			}
			return nil
		}
	}
	return d
}

func (d *webhookDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	var ips []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		ips = []netip.Addr{ip}
	} else if ips, err = d.lookup(ctx, host); err != nil {
		return nil, fmt.Errorf("resolve %s: %w", host, err)
	}
	errs := []error{}
	for _, ip := range ips {
		if !d.allowPrivate && BlockedWebhookIP(ip) {
			errs = append(errs, fmt.Errorf("%s resolves to %s: %w", host, ip.Unmap(), errBlockedTarget))
			continue
		}
		c, err := d.dialer.DialContext(ctx, network, net.JoinHostPort(ip.Unmap().String(), port))
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return nil, fmt.Errorf("resolve %s: no address", host)
	}
	return nil, errors.Join(errs...)
}

// newWebhookClient is the sender's HTTP client: no proxy, no redirects
// followed, the docs' answer timeout, TLS verified against roots (nil:
// the system's).
func newWebhookClient(d *webhookDialer, roots *x509.CertPool) *http.Client {
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           d.DialContext,
		TLSClientConfig:       &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots},
		TLSHandshakeTimeout:   webhookTimeout,
		ResponseHeaderTimeout: webhookTimeout,
		MaxIdleConnsPerHost:   2,
		IdleConnTimeout:       30 * time.Second,
		ForceAttemptHTTP2:     true,
	}
	return &http.Client{
		Transport:     tr,
		Timeout:       webhookTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// webhookBody is what an endpoint gets: {id, type, created_at, sandbox,
// reason?}, the sandbox as GET /v1/sandboxes/{name} shows it.
func webhookBody(e *store.WebhookEvent) []byte {
	body := struct {
		ID        string       `json:"id"`
		Type      string       `json:"type"`
		CreatedAt time.Time    `json:"created_at"`
		Sandbox   *sandboxView `json:"sandbox,omitempty"`
		Reason    string       `json:"reason,omitempty"`
	}{ID: e.ID, Type: e.Type, CreatedAt: e.CreatedAt, Reason: e.Reason}
	if e.Sandbox != nil {
		v := viewSandbox(e.Sandbox)
		body.Sandbox = &v
	}
	b, _ := json.Marshal(body)
	return b
}

// WebhookSignature is froog-signature for body sent at t with secret:
// t=<unix>,v1=<hex HMAC-SHA256 of "<t>.<body>">.
func WebhookSignature(secret string, t int64, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(strconv.FormatInt(t, 10) + "."))
	mac.Write(body)
	return "t=" + strconv.FormatInt(t, 10) + ",v1=" + hex.EncodeToString(mac.Sum(nil))
}

// sendWebhook makes attempt n of event e on hook, and says how it went.
// Its error never holds the URL (it may carry a token of the user's in
// its query) nor the secret.
func (s *Server) sendWebhook(ctx context.Context, hook *store.Webhook, secret string, e store.WebhookEvent, n int) store.WebhookResult {
	body := webhookBody(&e)
	start := time.Now()
	at := s.clock()
	res := store.WebhookResult{At: at}
	fail := func(msg string) store.WebhookResult {
		res.Error, res.Duration = msg, time.Since(start)
		return res
	}
	// The URL is checked again as stored: the rule may have tightened.
	if _, err := checkWebhookURL(hook.URL, s.allowPrivateHooks); err != nil {
		return fail("the endpoint's URL is not allowed: " + err.(*Error).Message)
	}
	ctx, cancel := context.WithTimeout(ctx, webhookTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, hook.URL, bytes.NewReader(body))
	if err != nil {
		return fail("the endpoint's URL does not parse")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "froog-webhooks/1")
	req.Header.Set("froog-event", e.Type)
	req.Header.Set("froog-delivery", e.ID)
	req.Header.Set("froog-attempt", strconv.Itoa(n))
	req.Header.Set("froog-webhook", hook.ID)
	req.Header.Set("froog-signature", WebhookSignature(secret, at.Unix(), body))
	resp, err := s.hookClient.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		switch {
		case errors.Is(err, errBlockedTarget):
			return fail("refused: the endpoint's address is not public (private, loopback, link-local or reserved)")
		case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
			return fail("no answer within 10 s")
		}
		return fail(sendFailure(err))
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	res.Code, res.Duration = resp.StatusCode, time.Since(start)
	switch {
	case res.OK():
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		res.Error = fmt.Sprintf("answered %d: redirects are not followed", resp.StatusCode)
	default:
		res.Error = fmt.Sprintf("answered %d", resp.StatusCode)
	}
	return res
}

// sendFailure says why a send failed in a few fixed words: the error
// itself names addresses, ports and certificates, and the delivery log
// is no port scanner for whoever owns an endpoint.
func sendFailure(err error) string {
	var dns *net.DNSError
	var cert *tls.CertificateVerificationError
	var op *net.OpError
	switch {
	case errors.As(err, &dns):
		return "the endpoint's name did not resolve"
	case errors.As(err, &cert):
		return "the endpoint's TLS certificate is not valid for its name"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "the endpoint refused the connection"
	case errors.As(err, &op) && op.Op == "dial":
		return "could not connect to the endpoint"
	}
	return "the exchange with the endpoint failed"
}

// DeliverWebhooks sends queued webhook events until ctx ends: it claims
// due deliveries through the store, sends each, and records the
// attempt. Several processes may run it at once.
func (s *Server) DeliverWebhooks(ctx context.Context) error {
	defer s.hookClient.CloseIdleConnections()
	owner := store.NewID("sender")
	for ctx.Err() == nil {
		list, next, err := s.store.ClaimWebhookDeliveries(ctx, owner, s.clock(), webhookLease, webhookBatch)
		if err != nil && ctx.Err() == nil {
			s.log.LogAttrs(ctx, slog.LevelWarn, "webhooks: claim deliveries", slog.String("error", err.Error()))
		}
		var wg sync.WaitGroup
		for _, d := range list {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.deliverWebhook(ctx, owner, d)
			}()
		}
		wg.Wait()
		if len(list) == webhookBatch {
			continue
		}
		wait := webhookPoll
		if !next.IsZero() {
			wait = min(wait, max(next.Sub(s.clock()), 10*time.Millisecond))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
	return nil
}

// deliverWebhook makes one claimed attempt and records it.
func (s *Server) deliverWebhook(ctx context.Context, owner string, d store.WebhookDelivery) {
	hook, err := s.store.Webhook(ctx, d.AccountID, d.WebhookID)
	if err != nil {
		return // deleted: its deliveries went with it
	}
	if !hook.Enabled {
		return // paused: its deliveries were dropped
	}
	var res store.WebhookResult
	secret, err := s.sealer.open(hook.SecretSealed, webhookAD(hook.ID))
	switch {
	case d.Attempts > store.WebhookMaxAttempts:
		// Claimed again after its last attempt's sender stopped before it
		// recorded it: never an attempt past the docs' 8; it ends here.
		res = store.WebhookResult{At: s.clock(), Error: "not sent: all 8 attempts were made"}
	case err != nil:
		res = store.WebhookResult{At: s.clock(), Error: "the signing secret does not open (the API's secret key changed?)"}
	default:
		res = s.sendWebhook(ctx, &hook, secret, d.Event, d.Attempts)
	}
	if ctx.Err() != nil {
		return // shutting down: the lease runs out and another takes it
	}
	if _, err := s.store.FinishWebhookDelivery(ctx, d.ID, owner, res); err != nil && !errors.Is(err, store.ErrConflict) {
		s.log.LogAttrs(ctx, slog.LevelWarn, "webhooks: record attempt", slog.String("webhook", hook.ID), slog.String("event", d.Event.ID), slog.String("error", err.Error()))
	}
}
