package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"

	"froog.tech/froog/api"
	"froog.tech/froog/internal/keyfile"
	"froog.tech/froog/internal/traffic"
	"froog.tech/froog/wake"
)

// apiConfig is froogd api's configuration.
type apiConfig struct {
	DatabaseURL, ControlKeyFile, SecretKeyFile string
	Addr, MetricsAddr                          string
	Domain                                     string
	PublicPort                                 int    // the edge's HTTPS port as visitors reach it
	APIURL                                     string // where clients reach the API, for signed file links
	EdgeTraffic                                string // the edges' --traffic-addr, comma-separated
	Tunnel                                     tunnelConfig
}

func (c *apiConfig) bind(f flags) {
	f.str(&c.DatabaseURL, "database-url", "", "Postgres connection string (required)")
	f.str(&c.Addr, "api-addr", "127.0.0.1:8080", "address of the /v1 API")
	bindMetrics(f, &c.MetricsAddr)
	f.str(&c.Domain, "domain", "", "public-URL domain (required)")
	f.num(&c.PublicPort, "public-port", 443, "the edge's HTTPS port as visitors reach it")
	f.str(&c.SecretKeyFile, "secret-key-file", "", "file with the 32-byte key that seals URL tokens; every API process shares it (required)")
	f.str(&c.ControlKeyFile, "control-key-file", "", "the control plane's SSH private key, to run commands in sandboxes (required)")
	f.str(&c.EdgeTraffic, "edge-traffic", "", "comma-separated addresses of the edges' --traffic-addr (http://HOST:PORT), from which this API reads URLs' recent requests and sends replays; empty: GET …/requests and replay answer 501")
	f.str(&c.APIURL, "api-url", "", "the API's address as clients reach it, e.g. https://api.example.com (signed file links); empty: the request's host")
	c.Tunnel.bind(f)
}

func (c *apiConfig) validate() error {
	errs := required(map[string]string{"--database-url": c.DatabaseURL, "--secret-key-file": c.SecretKeyFile, "--control-key-file": c.ControlKeyFile})
	errs = append(errs, checkDomain(c.Domain), checkPort("--public-port", c.PublicPort), c.Tunnel.validate())
	if c.APIURL != "" {
		if u, err := url.Parse(c.APIURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			errs = append(errs, fmt.Errorf("--api-url %q: want the API's scheme and host, e.g. https://api.example.com", c.APIURL))
		}
	}
	for _, e := range c.edges() {
		if u, err := url.Parse(e); err != nil || u.Scheme != "http" || u.Host == "" || (u.Path != "" && u.Path != "/") {
			errs = append(errs, fmt.Errorf("--edge-traffic %q: want an edge's --traffic-addr as http://HOST:PORT", e))
		}
	}
	return errors.Join(errs...)
}

// edges are --edge-traffic's addresses.
func (c *apiConfig) edges() []string {
	var out []string
	for _, e := range strings.Split(c.EdgeTraffic, ",") {
		if e = strings.TrimSuffix(strings.TrimSpace(e), "/"); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// secretKeySize is the length of the key that seals URL tokens.
const secretKeySize = 32

// startAPI serves the /v1 API on ln, with secret sealing URL tokens and
// sh's store, tunnel and logger, its goroutine in p. traffic is the
// edges' request rings: the edge in the same process (froogd dev), or
// the edges of --edge-traffic; nil answers 501 to the requests routes
// (package api's traffic.go says why).
func startAPI(p *proc, c apiConfig, secret []byte, sh parts, ln net.Listener, traffic api.Traffic) error {
	now, _ := testClock()
	// The API keeps no route table: its waits follow the feed themselves.
	fl, err := wake.NewFollower(p.ctx, sh.store)
	if err != nil {
		return err
	}
	wk, err := wake.New(wake.Options{Store: sh.store, Feed: fl, Dialer: sh.tun, Now: now})
	if err != nil {
		return err
	}
	srv, err := api.New(api.Options{Store: sh.store, Domain: c.Domain, PublicPort: c.PublicPort, SecretKey: secret, Sessions: sh.tun, Waker: wk, Logger: sh.log, APIURL: c.APIURL,
		Now: now, Webhooks: testWebhooks(), Traffic: traffic})
	if err != nil {
		return err
	}
	p.Go(func(ctx context.Context) error { fl.Run(ctx); return nil })
	p.Go(func(ctx context.Context) error { return serveHTTP(ctx, ln, srv) })
	p.Go(srv.DeliverWebhooks)  // leased through the store: every API process may send
	p.Go(srv.RunHistoryCopier) // one API process at a time copies (a lease in the store)
	return nil
}

func runAPI(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var c apiConfig
	if err := parseConfig("api", &c, args, stderr); err != nil {
		return err
	}
	secret, err := keyfile.LoadSecret(c.SecretKeyFile, secretKeySize)
	if err != nil {
		return err
	}
	return runPG(ctx, "api", c.DatabaseURL, c.ControlKeyFile, c.Tunnel, stderr, func(p *proc, sh parts) error {
		lns, err := listen(p, c.Addr, c.MetricsAddr)
		if err != nil {
			return err
		}
		var rings api.Traffic // none: 501
		if edges := c.edges(); len(edges) > 0 {
			rings = &traffic.Remote{Edges: edges, Key: traffic.KeyFrom(secret)}
		}
		if err := startAPI(p, c, secret, sh, lns[0], rings); err != nil {
			return err
		}
		serveAdmin(p, lns[1], sh.reg, storeCheck(sh.store))
		fmt.Fprintf(stdout, "froog api on http://%s/v1\n", lns[0].Addr())
		printAdmin(stdout, lns[1])
		return nil
	})
}
