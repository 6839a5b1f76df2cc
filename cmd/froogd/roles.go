package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/crypto/ssh"
	"golang.org/x/sync/errgroup"

	"froog.tech/froog/api"
	"froog.tech/froog/certs"
	"froog.tech/froog/edge"
	"froog.tech/froog/hostctl"
	"froog.tech/froog/hostctl/local"
	"froog.tech/froog/store/pg"
	"froog.tech/froog/tunnel"
)

func checkDomain(d string) error {
	if d == "" || strings.ContainsAny(d, "/: ") || strings.HasPrefix(d, ".") || strings.HasSuffix(d, ".") || !strings.Contains(d, ".") {
		return fmt.Errorf("--domain %q: want a domain such as froogusercontent.com", d)
	}
	return nil
}

// secretKey reads the 32-byte key that seals URL tokens, creating it the
// first time when create is set.
func secretKey(path string, create bool) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) && create {
		b = make([]byte, 32)
		rand.Read(b)
		if err := writeFileAtomic(path, b); err != nil {
			return nil, fmt.Errorf("write secret key: %w", err)
		}
		return b, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read secret key: %w", err)
	}
	if len(b) != 32 {
		return nil, fmt.Errorf("secret key %s: want 32 bytes, got %d", path, len(b))
	}
	return b, nil
}

// controlKey reads the control plane's SSH key (the key the API and the
// edge log in to sandboxes with), creating it the first time when create
// is set.
func controlKey(path string, create bool) (ssh.Signer, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) && create {
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, err
		}
		block, err := ssh.MarshalPrivateKey(priv, "froog control plane")
		if err != nil {
			return nil, err
		}
		b = pem.EncodeToMemory(block)
		if err := writeFileAtomic(path, b); err != nil {
			return nil, fmt.Errorf("write control key: %w", err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("read control key: %w", err)
	}
	s, err := ssh.ParsePrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("control key %s: %w", path, err)
	}
	return s, nil
}

func writeFileAtomic(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// openShared opens what every Postgres role shares: the control key and
// the store. The caller closes the store.
func openShared(ctx context.Context, dbURL, ctlKey string) (ssh.Signer, *pg.Store, error) {
	signer, err := controlKey(ctlKey, false)
	if err != nil {
		return nil, nil, err
	}
	st, err := pg.Open(ctx, pg.Options{URL: dbURL})
	if err != nil {
		return nil, nil, err
	}
	return signer, st, nil
}

// serveHTTP serves h on ln until ctx ends, then shuts down gracefully.
func serveHTTP(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}

func runAPI(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newFlags("api", stderr)
	dbURL := f.str("database-url", "", "Postgres connection string (required)")
	apiAddr := f.str("api-addr", "127.0.0.1:8080", "address of the /v1 API")
	domain := f.str("domain", "", "public-URL domain (required)")
	publicPort := f.num("public-port", 443, "the edge's HTTPS port as visitors reach it")
	keyFile := f.str("secret-key-file", "", "file with the 32-byte key that seals URL tokens; every API process shares it (required)")
	ctlKey := f.str("control-key-file", "", "the control plane's SSH private key, to run commands in sandboxes (required)")
	if err := f.parse(args); err != nil {
		return err
	}
	errs := required(map[string]string{"--database-url": *dbURL, "--secret-key-file": *keyFile, "--control-key-file": *ctlKey})
	if err := checkDomain(*domain); err != nil {
		errs = append(errs, err)
	}
	if *publicPort < 1 || *publicPort > 65535 {
		errs = append(errs, fmt.Errorf("--public-port %d: want 1-65535", *publicPort))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	secret, err := secretKey(*keyFile, false)
	if err != nil {
		return err
	}
	signer, st, err := openShared(ctx, *dbURL, *ctlKey)
	if err != nil {
		return err
	}
	defer st.Close()
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	tun, err := tunnel.New(tunnel.Options{Sandboxes: st, Signer: signer, Logger: log})
	if err != nil {
		return err
	}
	defer tun.Close()
	srv, err := api.New(api.Options{Store: st, Domain: *domain, PublicPort: *publicPort, SecretKey: secret, Sessions: tun, Logger: log})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *apiAddr)
	if err != nil {
		return fmt.Errorf("listen for the API: %w", err)
	}
	fmt.Fprintf(stdout, "froog api on http://%s/v1\n", ln.Addr())
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return tun.Watch(ctx, st) })
	g.Go(func() error { return serveHTTP(ctx, ln, srv) })
	return g.Wait()
}

func runHostctl(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newFlags("hostctl", stderr)
	dbURL := f.str("database-url", "", "Postgres connection string (required)")
	name := f.str("host-name", "", "this host's name (required)")
	driver := f.str("driver", "local", "local (development; not an isolation boundary) or qemu")
	data := f.str("data", "./.froog", "data folder for the sandboxes' files")
	capacity := f.num("capacity", 16, "sandboxes this host runs at once")
	ctlKey := f.str("control-key-file", "", "the control plane's SSH private key; sandboxes accept its public half (required)")
	if err := f.parse(args); err != nil {
		return err
	}
	errs := required(map[string]string{"--database-url": *dbURL, "--host-name": *name, "--control-key-file": *ctlKey})
	switch *driver {
	case "local":
	case "qemu":
		errs = append(errs, errors.New("--driver qemu: the qemu driver is not built yet"))
	default:
		errs = append(errs, fmt.Errorf("--driver %q: want local or qemu", *driver))
	}
	if *capacity < 1 {
		errs = append(errs, errors.New("--capacity must be at least 1"))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	signer, st, err := openShared(ctx, *dbURL, *ctlKey)
	if err != nil {
		return err
	}
	defer st.Close()
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	drv, err := local.New(local.Options{Dir: filepath.Join(*data, "sandboxes"), ControlKey: signer.PublicKey(), Logger: log})
	if err != nil {
		return err
	}
	defer drv.Close()
	ctl, err := hostctl.New(hostctl.Options{Store: st, Driver: drv, HostName: *name, Capacity: *capacity, Logger: log})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "froog hostctl %s running (%s driver)\n", *name, *driver)
	return ctl.Run(ctx)
}

func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newFlags("migrate", stderr)
	dbURL := f.str("database-url", "", "Postgres connection string (required)")
	if err := f.parse(args); err != nil {
		return err
	}
	if *dbURL == "" {
		return errors.New("--database-url is required")
	}
	if err := pg.Migrate(ctx, pg.Options{URL: *dbURL}); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "schema is up to date")
	return nil
}

func runEdge(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newFlags("edge", stderr)
	dbURL := f.str("database-url", "", "Postgres connection string (required)")
	edgeAddr := f.str("edge-addr", "127.0.0.1:8443", "HTTPS address of the public-URL edge")
	edgeHTTP := f.str("edge-http-addr", "127.0.0.1:8081", "HTTP address (redirects to HTTPS)")
	domain := f.str("domain", "", "public-URL domain (required)")
	publicPort := f.num("public-port", 443, "the HTTPS port as visitors reach it, for redirects")
	caDir := f.str("ca-dir", "", "folder of the local CA that signs the edge's certificates (ca.pem); until ACME lands, required")
	ctlKey := f.str("control-key-file", "", "the control plane's SSH private key, to reach sandboxes (required)")
	metricsAddr := f.str("metrics-addr", "", "address for Prometheus metrics (/metrics); empty: none")
	rate := edgeRateFlags(f)
	if err := f.parse(args); err != nil {
		return err
	}
	errs := required(map[string]string{"--database-url": *dbURL, "--ca-dir": *caDir, "--control-key-file": *ctlKey})
	errs = append(errs, rate.check())
	if err := checkDomain(*domain); err != nil {
		errs = append(errs, err)
	}
	if *publicPort < 1 || *publicPort > 65535 {
		errs = append(errs, fmt.Errorf("--public-port %d: want 1-65535", *publicPort))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	signer, st, err := openShared(ctx, *dbURL, *ctlKey)
	if err != nil {
		return err
	}
	defer st.Close()
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	reg := prometheus.NewRegistry()
	tun, err := tunnel.New(tunnel.Options{Sandboxes: st, Signer: signer, Logger: log, Registerer: reg})
	if err != nil {
		return err
	}
	defer tun.Close()
	ca, err := certs.OpenLocalCA(*caDir, *domain)
	if err != nil {
		return err
	}
	o := edge.Options{Store: st, Dialer: tun, Domain: *domain, GetCertificate: ca.GetCertificate, HTTPSPort: *publicPort, Logger: log, Registerer: reg}
	rate.apply(&o)
	srv, err := edge.New(o)
	if err != nil {
		return err
	}
	lns, err := listenAll(*edgeAddr, *edgeHTTP, *metricsAddr)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "froog edge on https://%s (HTTP %s)\n", lns[0].Addr(), lns[1].Addr())
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { srv.Run(gctx); return nil })
	g.Go(func() error { return tun.Watch(gctx, st) })
	g.Go(func() error { return srv.ServeTLS(gctx, lns[0]) })
	g.Go(func() error { return srv.ServeRedirect(gctx, lns[1]) })
	if lns[2] != nil {
		g.Go(func() error { return serveHTTP(gctx, lns[2], promhttp.HandlerFor(reg, promhttp.HandlerOpts{})) })
	}
	return g.Wait()
}

// listenAll listens on each address ("" gives a nil listener), closing
// them all when one fails.
func listenAll(addrs ...string) ([]net.Listener, error) {
	lns := make([]net.Listener, len(addrs))
	for i, a := range addrs {
		if a == "" {
			continue
		}
		ln, err := net.Listen("tcp", a)
		if err != nil {
			for _, l := range lns[:i] {
				if l != nil {
					l.Close()
				}
			}
			return nil, fmt.Errorf("listen on %s: %w", a, err)
		}
		lns[i] = ln
	}
	return lns, nil
}

// edgeRate is the edge's per-address rate limit, as flags.
type edgeRate struct{ limit, burst *int }

func edgeRateFlags(f flags) edgeRate {
	return edgeRate{
		f.num("rate-limit", 200, "requests a second one client address may send the edge, on average; 0 turns the limit off (a benchmark, or an edge behind a trusted proxy that limits)"),
		f.num("rate-burst", 2000, "requests one client address may send the edge at once"),
	}
}

func (r edgeRate) check() error {
	if *r.limit < 0 || *r.burst < 1 {
		return fmt.Errorf("--rate-limit %d --rate-burst %d: want a limit of 0 or more and a burst of 1 or more", *r.limit, *r.burst)
	}
	return nil
}

func (r edgeRate) apply(o *edge.Options) {
	o.RateLimit, o.RateBurst = float64(*r.limit), *r.burst
	if *r.limit == 0 {
		o.RateLimit = -1 // off
	}
}
