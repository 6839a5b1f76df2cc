package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"

	"froog.tech/froog/api"
	"froog.tech/froog/certs"
	"froog.tech/froog/edge"
	"froog.tech/froog/edge/route"
	"froog.tech/froog/hostctl"
	"froog.tech/froog/store"
	"froog.tech/froog/store/embedded"
	"froog.tech/froog/tunnel"
)

// devConfig is froogd dev's configuration.
type devConfig struct {
	Data, APIAddr, EdgeAddr, EdgeHTTPAddr, Domain string
}

func (c devConfig) validate() error {
	var errs []error
	for name, addr := range map[string]string{"--api-addr": c.APIAddr, "--edge-addr": c.EdgeAddr, "--edge-http-addr": c.EdgeHTTPAddr} {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			errs = append(errs, fmt.Errorf("%s %q: want HOST:PORT", name, addr))
		}
	}
	if err := checkDomain(c.Domain); err != nil {
		errs = append(errs, err)
	}
	if c.Data == "" {
		errs = append(errs, errors.New("--data must name a folder"))
	}
	return errors.Join(errs...)
}

// runDev runs every role in one process: the embedded store, hostctl with
// the local driver, the tunnel and the API.
func runDev(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newFlags("dev", stderr)
	data := f.str("data", "./.froog", "data folder: the embedded store, keys, sandboxes and the local CA")
	apiAddr := f.str("api-addr", "127.0.0.1:8080", "address of the /v1 API")
	edgeAddr := f.str("edge-addr", "127.0.0.1:8443", "HTTPS address of the public-URL edge")
	edgeHTTP := f.str("edge-http-addr", "127.0.0.1:8081", "HTTP address of the edge (redirects, ACME)")
	domain := f.str("domain", "froog.localhost", "public-URL domain")
	metricsAddr := f.str("metrics-addr", "", "address for Prometheus metrics (/metrics); empty: none")
	rate := edgeRateFlags(f)
	drvFlags := driverFlagsOf(f)
	if err := f.parse(args); err != nil {
		return err
	}
	if err := errors.Join(rate.check(), drvFlags.check()); err != nil {
		return err
	}
	c := devConfig{Data: *data, APIAddr: *apiAddr, EdgeAddr: *edgeAddr, EdgeHTTPAddr: *edgeHTTP, Domain: strings.ToLower(*domain)}
	if err := c.validate(); err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	st, err := embedded.Open(filepath.Join(c.Data, "store"))
	if err != nil {
		return err
	}
	defer st.Close()
	secret, err := secretKey(filepath.Join(c.Data, "secret.key"), true)
	if err != nil {
		return err
	}
	signer, err := controlKey(filepath.Join(c.Data, "control_key"), true)
	if err != nil {
		return err
	}
	key, err := devAccount(ctx, st, c.Data)
	if err != nil {
		return err
	}
	drv, closeDrv, err := drvFlags.open(c.Data, signer, log)
	if err != nil {
		return err
	}
	defer closeDrv()
	ctl, err := hostctl.New(hostctl.Options{Store: st, Driver: drv, HostName: "dev", MinFreeMemory: drvFlags.minFreeMemory(), Logger: log})
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	tun, err := tunnel.New(tunnel.Options{Sandboxes: st, Signer: signer, Logger: log, Registerer: reg})
	if err != nil {
		return err
	}
	defer tun.Close()
	_, edgePort, _ := net.SplitHostPort(c.EdgeAddr)
	port, _ := strconv.Atoi(edgePort)
	srv, err := api.New(api.Options{Store: st, Domain: c.Domain, PublicPort: port, SecretKey: secret, Sessions: tun, Logger: log})
	if err != nil {
		return err
	}
	// The route table first: the local CA issues only for the names it
	// holds, and the edge reads it.
	routes, err := route.New(route.Options{Store: st, Domain: c.Domain, Logger: log, Registerer: reg})
	if err != nil {
		return err
	}
	ca, err := certs.NewLocalCA(certs.LocalCAOptions{Dir: c.Data, Domains: []string{c.Domain}, Names: routes})
	if err != nil {
		return err
	}
	eo := edge.Options{Routes: routes, Sandboxes: st, Dialer: tun, GetCertificate: ca.GetCertificate, HTTPSPort: port, Logger: log, Registerer: reg}
	rate.apply(&eo)
	edgeSrv, err := edge.New(eo)
	if err != nil {
		return err
	}
	lns, err := listenAll(c.APIAddr, c.EdgeAddr, c.EdgeHTTPAddr, *metricsAddr)
	if err != nil {
		return err
	}
	ln, edgeLn, httpLn := lns[0], lns[1], lns[2]
	fmt.Fprintf(stdout, "froog dev is running.\n  API:     http://%s/v1\n  API key: %s (also in %s)\n  Edge:    https://%s (HTTP %s), certificates from %s\n",
		ln.Addr(), key, filepath.Join(c.Data, "api-key"), edgeLn.Addr(), httpLn.Addr(), filepath.Join(c.Data, "ca.pem"))
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return ctl.Run(gctx) })
	g.Go(func() error { return tun.Watch(gctx, st) })
	g.Go(func() error { routes.Run(gctx); return nil })
	g.Go(func() error { return edgeSrv.ServeTLS(gctx, edgeLn) })
	g.Go(func() error { return edgeSrv.ServeRedirect(gctx, httpLn) })
	g.Go(func() error { return serveHTTP(gctx, ln, srv) })
	if lns[3] != nil {
		g.Go(func() error { return serveHTTP(gctx, lns[3], promhttp.HandlerFor(reg, promhttp.HandlerOpts{})) })
	}
	return g.Wait()
}

// devAccount creates the dev account and its admin key on first start,
// and reads the key back on later ones.
func devAccount(ctx context.Context, st store.Store, dir string) (string, error) {
	path := filepath.Join(dir, "api-key")
	if b, err := os.ReadFile(path); err == nil {
		return strings.TrimSpace(string(b)), nil
	}
	a, err := st.CreateAccount(ctx, store.Account{Name: "dev", MaxSandboxes: 10, URLNamesPerDay: 20, CreatedAt: time.Now().UTC()})
	if err != nil {
		return "", err
	}
	secret, k := api.NewAPIKey(a.ID, "dev", []string{"*"}, 0, time.Now())
	if _, err := st.CreateAPIKey(ctx, k, nil); err != nil {
		return "", err
	}
	if err := writeFileAtomic(path, []byte(secret+"\n")); err != nil {
		return "", fmt.Errorf("write the dev API key: %w", err)
	}
	return secret, nil
}
