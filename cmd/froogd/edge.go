package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"froog.tech/froog/api"
	"froog.tech/froog/certs"
	"froog.tech/froog/desktop"
	"froog.tech/froog/edge"
	"froog.tech/froog/edge/route"
	"froog.tech/froog/internal/health"
	"froog.tech/froog/internal/keyfile"
	"froog.tech/froog/internal/traffic"
	"froog.tech/froog/names"
)

// edgeConfig is froogd edge's configuration.
type edgeConfig struct {
	DatabaseURL, ControlKeyFile string
	SecretKeyFile               string // signs desktop sessions; none: no desktops
	Addr, HTTPAddr, MetricsAddr string
	TrafficAddr                 string // the rings for froogd api (traffic.Handler); "": none
	Domain                      string
	PublicPort                  int // the HTTPS port as visitors reach it
	DrainSecs, DrainDelaySecs   int
	UpstreamIdleSecs            int
	DesktopBrowser              bool // a desktop the edge starts opens a browser window
	HTTP3                       bool // HTTP/3 on the HTTPS port's number, over UDP
	Rate                        rateConfig
	Tunnel                      tunnelConfig
	Certs                       certs.Config
}

func (c *edgeConfig) bind(f flags) {
	f.str(&c.DatabaseURL, "database-url", "", "Postgres connection string (required)")
	f.str(&c.Addr, "edge-addr", "127.0.0.1:8443", "HTTPS address of the public-URL edge")
	f.str(&c.HTTPAddr, "edge-http-addr", "127.0.0.1:8081", "HTTP address (redirects to HTTPS)")
	f.str(&c.Domain, "domain", "", "public-URL domain (required)")
	f.num(&c.PublicPort, "public-port", 443, "the HTTPS port as visitors reach it, for redirects")
	f.str(&c.ControlKeyFile, "control-key-file", "", "the control plane's SSH private key, to reach sandboxes (required)")
	bindMetrics(f, &c.MetricsAddr)
	f.str(&c.TrafficAddr, "traffic-addr", "", "internal address where this edge serves URLs' recent requests (the owners' traffic view) to froogd api processes (--edge-traffic), with a key made from --secret-key-file; empty: none")
	f.num(&c.DrainSecs, "drain-secs", 30, "on SIGTERM, how long requests in flight may take to finish before their connections are cut")
	f.num(&c.DrainDelaySecs, "drain-delay-secs", 0, "on SIGTERM, how long to keep accepting with /readyz failing before the listeners close, so that load balancers take this edge out first")
	f.str(&c.SecretKeyFile, "secret-key-file", "", "the 32-byte key file every API and edge process shares (the API's --secret-key-file): desktop sessions are signed with a key made from it, and the keys of the TLS session tickets every edge opens are sealed with it in the store; without it this edge serves no desktops, and its tickets resume only at itself")
	bindDesktopBrowser(f, &c.DesktopBrowser)
	bindHTTP3(f, &c.HTTP3)
	bindUpstreamIdle(f, &c.UpstreamIdleSecs)
	c.Rate.bind(f)
	c.Tunnel.bind(f)
	bindCerts(f, &c.Certs)
}

// bindHTTP3 declares --http3, the edge's and dev's.
func bindHTTP3(f flags, p *bool) {
	f.boolean(p, "http3", true, "serve HTTP/3 (QUIC) on UDP at the HTTPS port's number, and advertise it (Alt-Svc) on HTTPS answers; false: HTTP/1.1 and HTTP/2 only")
}

// bindUpstreamIdle declares --upstream-idle-secs, the edge's and dev's.
func bindUpstreamIdle(f flags, p *int) {
	f.num(p, "upstream-idle-secs", 30, "how long a pooled connection to a sandbox's port may stay idle before the edge closes it; set it under the apps' own keep-alive timeout when they close first")
}

// bindDesktopBrowser declares --desktop-browser, the edge's and dev's.
func bindDesktopBrowser(f flags, p *bool) {
	f.boolean(p, "desktop-browser", true, "a desktop that a link starts opens a browser window (Chromium, where the sandbox has it), as the docs' desktop has")
}

func (c *edgeConfig) validate() error {
	errs := required(map[string]string{"--database-url": c.DatabaseURL, "--control-key-file": c.ControlKeyFile})
	errs = append(errs, c.Rate.validate(), c.Tunnel.validate(), c.Certs.Validate(), checkDomain(c.Domain), checkPort("--public-port", c.PublicPort))
	if c.DrainSecs < 1 || c.DrainDelaySecs < 0 {
		errs = append(errs, fmt.Errorf("--drain-secs %d --drain-delay-secs %d: want 1 or more, and 0 or more", c.DrainSecs, c.DrainDelaySecs))
	}
	if c.UpstreamIdleSecs < 1 {
		errs = append(errs, fmt.Errorf("--upstream-idle-secs %d: want 1 or more", c.UpstreamIdleSecs))
	}
	if c.TrafficAddr != "" && c.SecretKeyFile == "" {
		errs = append(errs, errors.New("--traffic-addr needs --secret-key-file: the API processes that read it share that key"))
	}
	if c.Certs.ACME.MaxOrders < 1 {
		errs = append(errs, fmt.Errorf("--acme-max-orders %d: want 1 or more", c.Certs.ACME.MaxOrders))
	}
	return errors.Join(errs...)
}

// checkDomain reports a --domain that cannot be the public-URL domain.
func checkDomain(d string) error {
	if !names.ValidDomain(d) {
		return fmt.Errorf("--domain %q: want a domain such as froogusercontent.com", d)
	}
	return nil
}

// rateConfig is the edge's per-address rate limit.
type rateConfig struct{ Limit, Burst int }

func (r *rateConfig) bind(f flags) {
	f.num(&r.Limit, "rate-limit", 200, "requests a second one client address may send the edge, on average; 0 turns the limit off (a benchmark, or an edge behind a trusted proxy that limits)")
	f.num(&r.Burst, "rate-burst", 2000, "requests one client address may send the edge at once")
}

func (r rateConfig) validate() error {
	if r.Limit < 0 || r.Burst < 1 {
		return fmt.Errorf("--rate-limit %d --rate-burst %d: want a limit of 0 or more and a burst of 1 or more", r.Limit, r.Burst)
	}
	return nil
}

// bindCerts maps the certificate flags to c; its Domain is --domain,
// set by startEdge.
func bindCerts(f flags, c *certs.Config) {
	f.str(&c.LocalCADir, "ca-dir", "", "folder of a local CA that signs the edge's certificates (ca.pem): development and tests, instead of ACME")
	f.str(&c.WildcardCert, "wildcard-cert", "", "PEM certificate for *.DOMAIN, served for every URL instead of ordering one per name (reread when it changes)")
	f.str(&c.WildcardKey, "wildcard-key", "", "the wildcard certificate's PEM key")
	f.str(&c.ACME.Directory, "acme-ca", certs.LetsEncrypt, "ACME directory URL")
	f.str(&c.ACME.Email, "acme-email", "", "contact address for the ACME account")
	f.str(&c.ACME.EABKeyID, "acme-eab-kid", "", "external account binding key id, for CAs that want one")
	f.str(&c.ACME.EABMACKey, "acme-eab-hmac", "", "external account binding MAC key (base64url)")
	f.str(&c.ACME.RootsFile, "acme-ca-root", "", "PEM file of a root to trust for the ACME CA's HTTPS (private CAs, tests)")
	f.num(&c.ACME.MaxOrders, "acme-max-orders", 4, "ACME orders this edge runs at once")
}

// bindMetrics declares --metrics-addr, the admin listener every role has.
func bindMetrics(f flags, p *string) {
	f.str(p, "metrics-addr", "", "address of the admin endpoints: /healthz, /readyz and Prometheus /metrics; empty: none")
}

var _ api.Traffic = (*edge.Server)(nil)

// startEdge starts the public-URL edge on its HTTPS and HTTP listeners,
// with sh's store, tunnel, registry and logger, its goroutines in p;
// with secret (the shared secret key), also the desktops' view hosts. It
// returns the edge (its request rings are the API's Traffic, where both
// run in one process) and its readiness checks: the route table follows
// the store, the certificates load, and the edge is not draining.
func startEdge(p *proc, c edgeConfig, sh parts, secret []byte, tlsLn, httpLn net.Listener, quic net.PacketConn) (*edge.Server, []health.Check, error) {
	// The route table first: certs asks it which names to order or sign,
	// and the edge which sandbox port a host is.
	now, _ := testClock()
	routes, err := route.New(route.Options{Store: sh.store, Domain: c.Domain, Logger: sh.log, Registerer: sh.reg, Now: now})
	if err != nil {
		return nil, nil, err
	}
	cc := c.Certs
	cc.Domain = c.Domain
	var names certs.Names = routes
	if secret != nil { // the desktops' view hosts, walls among them
		names = viewNames{Table: routes, Accounts: sh.store, Domain: c.Domain}
	}
	src, err := certs.Open(cc, certs.Deps{Store: sh.store, Names: names, HTTPPort: port(httpLn), TLSPort: port(tlsLn), Registerer: sh.reg, Logger: sh.log})
	if err != nil {
		return nil, nil, err
	}
	p.onClose(func() { src.Close() }) // ACME's certificate maintenance
	o := edge.Options{Routes: routes, Sandboxes: sh.store, Dialer: sh.tun, GetCertificate: src.GetCertificate, HTTPChallenge: src.HTTPChallenge,
		HTTPSPort: c.PublicPort, DrainTimeout: time.Duration(c.DrainSecs) * time.Second, DrainDelay: time.Duration(c.DrainDelaySecs) * time.Second, UpstreamIdle: time.Duration(c.UpstreamIdleSecs) * time.Second, RateLimit: float64(c.Rate.Limit), RateBurst: c.Rate.Burst, Logger: sh.log, Registerer: sh.reg, Now: now}
	if c.Rate.Limit == 0 {
		o.RateLimit = -1 // off
	}
	if o.HTTPSPort == 0 { // froogd dev on port 0: visitors reach the one bound
		o.HTTPSPort = port(tlsLn)
	}
	o.HTTP3 = quic != nil
	o.Inbox = sh.store
	if secret != nil {
		if o.OpenSecret, err = api.InboxSecretOpener(secret); err != nil {
			return nil, nil, err
		}
		dsk, err := desktop.New(desktop.Options{Links: sh.store, Starter: &desktop.SSHStarter{Sessions: sh.tun, Sandboxes: routes, Browser: c.DesktopBrowser},
			Dialer: sh.tun, Sandboxes: routes, Key: desktop.KeyFrom(secret), Domain: c.Domain, Log: sh.log, Now: now,
			Accounts: wallAccounts{Table: routes}, Linker: wallLinker{Store: sh.store, Domain: c.Domain, Port: c.PublicPort, Now: now}})
		if err != nil {
			return nil, nil, err
		}
		p.onClose(func() { dsk.Close() })
		o.Views = dsk
		if o.Tickets, err = edge.NewTicketKeys(sh.store, secret, now, sh.log); err != nil {
			return nil, nil, err
		}
		p.Go(func(ctx context.Context) error { o.Tickets.Run(ctx); return nil })
	}
	srv, err := edge.New(o)
	if err != nil {
		return nil, nil, err
	}
	p.Go(func(ctx context.Context) error { routes.Run(ctx); return nil })
	p.Go(srv.DeliverInboxes)
	p.Go(srv.KeepTraffic)
	p.Go(func(ctx context.Context) error { return srv.ServeTLS(ctx, tlsLn) })
	if quic != nil {
		p.Go(func(ctx context.Context) error { return srv.ServeQUIC(ctx, quic) })
	}
	p.Go(func(ctx context.Context) error { return srv.ServeRedirect(ctx, httpLn) })
	return srv, []health.Check{
		{Name: "draining", Run: func(context.Context) error {
			if srv.Draining() {
				return errors.New("the edge is shutting down: finishing the requests in flight")
			}
			return nil
		}},
		{Name: "routes", Run: func(context.Context) error {
			if !routes.Current() {
				return errors.New("the route table does not follow the store's change feed (it serves the routes it knows)")
			}
			return nil
		}},
		{Name: "certs", Run: src.Check},
	}, nil
}

func runEdge(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var c edgeConfig
	if err := parseConfig("edge", &c, args, stderr); err != nil {
		return err
	}
	return runPG(ctx, "edge", c.DatabaseURL, c.ControlKeyFile, c.Tunnel, stderr, func(p *proc, sh parts) error {
		lns, err := listen(p, c.Addr, c.HTTPAddr, c.MetricsAddr, c.TrafficAddr)
		if err != nil {
			return err
		}
		var secret []byte
		if c.SecretKeyFile != "" {
			if secret, err = keyfile.LoadSecret(c.SecretKeyFile, secretKeySize); err != nil {
				return err
			}
		}
		var quic net.PacketConn
		if c.HTTP3 {
			if lns[0], quic, err = listenQUIC(p, c.Addr, lns[0]); err != nil {
				return err
			}
		}
		srv, checks, err := startEdge(p, c, sh, secret, lns[0], lns[1], quic)
		if err != nil {
			return err
		}
		if lns[3] != nil { // the rings, for froogd api apart from this edge
			h := traffic.Handler(srv, traffic.KeyFrom(secret))
			p.Go(func(ctx context.Context) error { return serveHTTP(ctx, lns[3], h) })
			fmt.Fprintf(stdout, "  traffic for froogd api on http://%s\n", lns[3].Addr())
		}
		serveAdmin(p, lns[2], sh.reg, append([]health.Check{storeCheck(sh.store)}, checks...)...)
		fmt.Fprintf(stdout, "froog edge on https://%s (HTTP %s)\n", lns[0].Addr(), lns[1].Addr())
		printAdmin(stdout, lns[2])
		return nil
	})
}
