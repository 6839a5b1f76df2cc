package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/mholt/acmez/v3/acme"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"froog.tech/froog/store"
)

// LetsEncrypt is the default ACME directory.
const LetsEncrypt = "https://acme-v02.api.letsencrypt.org/directory"

// Names says who holds a host name: the edge's route table (in memory,
// kept current by the change feed) answers.
type Names interface {
	// Owner gives the account whose URL holds name, or an error when no
	// URL does or the table is not current.
	Owner(name string) (accountID string, err error)
}

// Store is what issuance needs of the store: the certificate area and
// each account's daily allowance of new names.
type Store interface {
	store.CertStorage
	Account(ctx context.Context, id string) (store.Account, error)
}

// ACMEOptions configure on-demand certificates.
type ACMEOptions struct {
	Store Store // required
	Names Names // required
	// CA is the ACME directory URL; empty means Let's Encrypt.
	CA    string
	Email string
	// EABKeyID and EABMACKey bind the ACME account to an external one,
	// for CAs that want it.
	EABKeyID, EABMACKey string
	// Roots are trusted for the CA's own HTTPS (a private CA, tests); nil
	// means the system's.
	Roots *x509.CertPool
	// HTTPPort and TLSPort are the edge's listeners, where challenges are
	// answered (HTTP-01 through HTTPChallenge, TLS-ALPN-01 through
	// GetCertificate). Required.
	HTTPPort, TLSPort int
	// Challenges names the challenge types offered: "http-01",
	// "tls-alpn-01"; empty means both.
	Challenges []string
	// MaxOrders bounds the orders this edge runs at once; 0 means 4.
	MaxOrders int
	// RenewCheckInterval and RenewalWindowRatio are certmagic's; zero
	// means its defaults (10 minutes, a third of the lifetime).
	RenewCheckInterval time.Duration
	RenewalWindowRatio float64
	Registerer         prometheus.Registerer
	Logger             *slog.Logger
	Now                func() time.Time
}

// ACME issues a certificate for each URL host on its first visit, from an
// ACME CA, with certmagic: a name no URL holds is refused before any ACME
// traffic, every order is counted against its account's daily allowance
// across the cluster, and certificates, ACME accounts, challenge tokens
// and locks live in the store, shared by every edge.
type ACME struct {
	o      ACMEOptions
	cfg    *certmagic.Config
	cache  *certmagic.Cache
	issuer *certmagic.ACMEIssuer
	orders chan struct{}
	m      acmeMetrics

	mu      sync.Mutex
	started map[string]time.Time // name → when its order began

	closer sync.Once
}

// Close stops certmagic's maintenance of the certificates in memory
// (renewals, OCSP staples: a goroutine its cache starts when NewACME
// builds it). Certificates already in memory are still served; none is
// renewed any more. It may be called more than once.
func (a *ACME) Close() error {
	a.closer.Do(a.cache.Stop)
	return nil
}

// NewACME builds the issuer; it contacts nobody until a certificate is
// needed, but its certmagic cache starts a maintenance goroutine at once
// (certmagic.NewCache has no other way): Close stops it.
func NewACME(o ACMEOptions) (*ACME, error) {
	var errs []error
	if o.Store == nil || o.Names == nil {
		errs = append(errs, errors.New("certs: ACME needs a store and the edge's names"))
	}
	if o.HTTPPort <= 0 || o.TLSPort <= 0 {
		errs = append(errs, errors.New("certs: ACME needs the edge's HTTP and TLS ports"))
	}
	if (o.EABKeyID == "") != (o.EABMACKey == "") {
		errs = append(errs, errors.New("certs: an external account binding needs both its key id and its MAC key"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for _, c := range o.Challenges {
		if c != "http-01" && c != "tls-alpn-01" {
			errs = append(errs, fmt.Errorf("certs: challenge %q: want http-01 or tls-alpn-01", c))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if o.CA == "" {
		o.CA = LetsEncrypt
	}
	if o.MaxOrders <= 0 {
		o.MaxOrders = 4
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	a := &ACME{o: o, orders: make(chan struct{}, o.MaxOrders), m: newACMEMetrics(o.Registerer), started: map[string]time.Time{}}
	var cfg *certmagic.Config
	cache := certmagic.NewCache(certmagic.CacheOptions{
		GetConfigForCert:   func(certmagic.Certificate) (*certmagic.Config, error) { return cfg, nil },
		RenewCheckInterval: o.RenewCheckInterval,
		Logger:             zap.NewNop(),
	})
	cfg = certmagic.New(cache, certmagic.Config{
		Storage:            NewStorage(o.Store, o.Logger),
		RenewalWindowRatio: o.RenewalWindowRatio,
		OnDemand:           &certmagic.OnDemandConfig{DecisionFunc: a.decide},
		OnEvent:            a.event,
		Logger:             zap.NewNop(),
	})
	tmpl := certmagic.ACMEIssuer{
		CA: o.CA, Email: o.Email, Agreed: true, TrustedRoots: o.Roots,
		AltHTTPPort: o.HTTPPort, AltTLSALPNPort: o.TLSPort,
		DisableHTTPChallenge:    len(o.Challenges) > 0 && !slices.Contains(o.Challenges, "http-01"),
		DisableTLSALPNChallenge: len(o.Challenges) > 0 && !slices.Contains(o.Challenges, "tls-alpn-01"),
		Logger:                  zap.NewNop(),
	}
	if o.EABKeyID != "" {
		tmpl.ExternalAccount = &acme.EAB{KeyID: o.EABKeyID, MACKey: o.EABMACKey}
	}
	a.issuer = certmagic.NewACMEIssuer(cfg, tmpl)
	cfg.Issuers = []certmagic.Issuer{&budgeted{ACMEIssuer: a.issuer, a: a}}
	a.cfg, a.cache = cfg, cache
	return a, nil
}

// GetCertificate serves a certificate: from memory, from the store, or
// ordered now for a name a URL holds. It also answers TLS-ALPN-01.
func (a *ACME) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	c, err := a.cfg.GetCertificate(hello)
	if err == nil {
		a.m.served.Inc()
	}
	return c, err
}

// HTTPChallenge answers an ACME HTTP-01 challenge, this edge's or (from
// the store) another edge's, and reports whether r was one.
func (a *ACME) HTTPChallenge(w http.ResponseWriter, r *http.Request) bool {
	return a.issuer.HandleHTTPChallenge(w, r)
}

// decide is certmagic's decision function: only a name a URL holds, and
// only while the edge's table is current. No ACME traffic happens for
// anything else.
func (a *ACME) decide(_ context.Context, name string) error {
	if _, err := a.o.Names.Owner(name); err != nil {
		a.m.refused.Inc()
		a.o.Logger.Warn("certificate refused", slog.String("host", name), slog.String("reason", err.Error()))
		return err
	}
	return nil
}

// budgeted is the ACME issuer behind this edge's order slots and each
// account's daily allowance: it runs at the moment an order would start.
type budgeted struct {
	*certmagic.ACMEIssuer
	a *ACME
}

func (b *budgeted) Issue(ctx context.Context, csr *x509.CertificateRequest) (*certmagic.IssuedCertificate, error) {
	a := b.a
	if len(csr.DNSNames) != 1 {
		return nil, fmt.Errorf("certs: one name per certificate, got %d", len(csr.DNSNames))
	}
	name := csr.DNSNames[0]
	refuse := func(err error) (*certmagic.IssuedCertificate, error) {
		a.m.refused.Inc()
		a.o.Logger.Warn("certificate refused", slog.String("host", name), slog.String("reason", err.Error()))
		return nil, certmagic.ErrNoRetry{Err: err} // a refusal is an answer, not a failure to retry
	}
	acct, err := a.o.Names.Owner(name)
	if err != nil {
		return refuse(err)
	}
	select {
	case a.orders <- struct{}{}:
		defer func() { <-a.orders }()
	case <-ctx.Done():
		return refuse(ctx.Err())
	}
	if err := a.spend(ctx, acct); err != nil {
		return refuse(err)
	}
	return b.ACMEIssuer.Issue(ctx, csr)
}

// spend takes one new name from the account's allowance for today (UTC),
// counted in the store so that every edge shares it.
func (a *ACME) spend(ctx context.Context, accountID string) error {
	acct, err := a.o.Store.Account(ctx, accountID)
	if err != nil {
		return fmt.Errorf("certs: the account's allowance: %w", err)
	}
	day := a.o.Now().UTC().Format("2006-01-02")
	key := "froog/issuance/" + accountID + "/" + day
	lease := "froog/issuance/" + accountID
	owner := randomHex(8)
	for {
		ok, err := a.o.Store.AcquireLease(ctx, lease, owner, 10*time.Second)
		if err != nil {
			return fmt.Errorf("certs: the account's allowance: %w", err)
		}
		if ok {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	defer a.o.Store.ReleaseLease(context.WithoutCancel(ctx), lease, owner)
	used := 0
	switch kv, err := a.o.Store.KVGet(ctx, key); {
	case err == nil:
		used, _ = strconv.Atoi(string(kv.Value))
	case !errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("certs: the account's allowance: %w", err)
	}
	if used >= acct.URLNamesPerDay {
		return fmt.Errorf("certs: account %s has used its %d new certificates for %s", accountID, acct.URLNamesPerDay, day)
	}
	if err := a.o.Store.KVPut(ctx, key, []byte(strconv.Itoa(used+1))); err != nil {
		return fmt.Errorf("certs: the account's allowance: %w", err)
	}
	return nil
}

// event turns certmagic's events into metrics and log lines.
func (a *ACME) event(_ context.Context, event string, data map[string]any) error {
	name, _ := data["identifier"].(string)
	switch event {
	case "cert_obtaining":
		a.m.started.Inc()
		a.mu.Lock()
		a.started[name] = time.Now()
		a.mu.Unlock()
	case "cert_obtained":
		a.m.succeeded.Inc()
		a.mu.Lock()
		if t, ok := a.started[name]; ok {
			a.m.latency.Observe(time.Since(t).Seconds())
			delete(a.started, name)
		}
		a.mu.Unlock()
		a.o.Logger.Info("certificate obtained", slog.String("host", name), slog.Any("renewal", data["renewal"]))
	case "cert_failed":
		a.m.failed.Inc()
		a.mu.Lock()
		delete(a.started, name)
		a.mu.Unlock()
		a.o.Logger.Warn("certificate failed", slog.String("host", name), slog.Any("renewal", data["renewal"]), slog.Any("reason", data["error"]))
	case "cached_managed_cert":
		a.m.fromStorage.Inc()
	}
	return nil
}

type acmeMetrics struct {
	served, started, succeeded, failed, refused, fromStorage prometheus.Counter
	latency                                                  prometheus.Histogram
}

func newACMEMetrics(r prometheus.Registerer) acmeMetrics {
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: "froog_certs_" + name, Help: help})
	}
	m := acmeMetrics{
		served:      c("served_total", "Handshakes served a certificate (from memory, the store or a new order)."),
		started:     c("orders_started_total", "ACME orders started (new names and renewals)."),
		succeeded:   c("orders_succeeded_total", "ACME orders that gave a certificate."),
		failed:      c("orders_failed_total", "ACME orders that failed."),
		refused:     c("refused_total", "Certificates refused before any order: unknown name, stale route table, allowance used, store down."),
		fromStorage: c("loaded_from_storage_total", "Certificates loaded from the store into memory (issued by this or another edge)."),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "froog_certs_issuance_seconds", Help: "From an order's start to its certificate.",
			Buckets: prometheus.ExponentialBuckets(0.25, 2, 10)}),
	}
	if r != nil {
		r.MustRegister(m.served, m.started, m.succeeded, m.failed, m.refused, m.fromStorage, m.latency)
	}
	return m
}
