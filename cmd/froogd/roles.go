package main

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/crypto/ssh"
	"golang.org/x/sync/errgroup"

	"froog.tech/froog/api"
	"froog.tech/froog/certs"
	"froog.tech/froog/edge"
	"froog.tech/froog/edge/route"
	"froog.tech/froog/hostctl"
	"froog.tech/froog/hostctl/local"
	"froog.tech/froog/hostctl/qemu"
	"froog.tech/froog/internal/sshkey"
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
	load := sshkey.Load
	if create {
		load = func(path string) (ssh.Signer, []byte, error) { return sshkey.LoadOrCreate(path, "froog control plane") }
	}
	s, _, err := load(path)
	if err != nil {
		return nil, fmt.Errorf("control key: %w", err)
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
	drvFlags := driverFlagsOf(f)
	data := f.str("data", "./.froog", "data folder for the sandboxes' files")
	capacity := f.num("capacity", 16, "sandboxes this host runs at once")
	ctlKey := f.str("control-key-file", "", "the control plane's SSH private key; sandboxes accept its public half (required)")
	if err := f.parse(args); err != nil {
		return err
	}
	errs := required(map[string]string{"--database-url": *dbURL, "--host-name": *name, "--control-key-file": *ctlKey})
	errs = append(errs, drvFlags.check())
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
	drv, closeDrv, err := drvFlags.open(*data, signer, log)
	if err != nil {
		return err
	}
	defer closeDrv()
	ctl, err := hostctl.New(hostctl.Options{Store: st, Driver: drv, HostName: *name, Capacity: *capacity, MinFreeMemory: drvFlags.minFreeMemory(), Logger: log})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "froog hostctl %s running (%s driver)\n", *name, *drvFlags.driver)
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
	ctlKey := f.str("control-key-file", "", "the control plane's SSH private key, to reach sandboxes (required)")
	metricsAddr := f.str("metrics-addr", "", "address for Prometheus metrics (/metrics); empty: none")
	rate := edgeRateFlags(f)
	tlsFlags := edgeCertFlags(f)
	if err := f.parse(args); err != nil {
		return err
	}
	errs := required(map[string]string{"--database-url": *dbURL, "--control-key-file": *ctlKey})
	errs = append(errs, rate.check(), tlsFlags.check())
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
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	tun, err := tunnel.New(tunnel.Options{Sandboxes: st, Signer: signer, Logger: log, Registerer: reg})
	if err != nil {
		return err
	}
	defer tun.Close()
	lns, err := listenAll(*edgeAddr, *edgeHTTP, *metricsAddr)
	if err != nil {
		return err
	}
	// The route table first: certs asks it which names to order, and the
	// edge which sandbox port a host is.
	routes, err := route.New(route.Options{Store: st, Domain: *domain, Logger: log, Registerer: reg})
	if err != nil {
		return err
	}
	o := edge.Options{Routes: routes, Sandboxes: st, Dialer: tun, HTTPSPort: *publicPort, Logger: log, Registerer: reg}
	rate.apply(&o)
	if err := tlsFlags.apply(&o, *domain, st, routes, lns, reg, log); err != nil {
		return err
	}
	srv, err := edge.New(o)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "froog edge on https://%s (HTTP %s)\n", lns[0].Addr(), lns[1].Addr())
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { routes.Run(gctx); return nil })
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

// edgeCerts chooses where the edge's certificates come from: ACME (the
// default), an operator's wildcard, or the local CA.
type edgeCerts struct {
	caDir, wildCert, wildKey            *string
	acmeCA, email, eabKID, eabMAC, root *string
	maxOrders                           *int
}

func edgeCertFlags(f flags) edgeCerts {
	return edgeCerts{
		caDir:     f.str("ca-dir", "", "folder of a local CA that signs the edge's certificates (ca.pem): development and tests, instead of ACME"),
		wildCert:  f.str("wildcard-cert", "", "PEM certificate for *.DOMAIN, served for every URL instead of ordering one per name (reread when it changes)"),
		wildKey:   f.str("wildcard-key", "", "the wildcard certificate's PEM key"),
		acmeCA:    f.str("acme-ca", certs.LetsEncrypt, "ACME directory URL"),
		email:     f.str("acme-email", "", "contact address for the ACME account"),
		eabKID:    f.str("acme-eab-kid", "", "external account binding key id, for CAs that want one"),
		eabMAC:    f.str("acme-eab-hmac", "", "external account binding MAC key (base64url)"),
		root:      f.str("acme-ca-root", "", "PEM file of a root to trust for the ACME CA's HTTPS (private CAs, tests)"),
		maxOrders: f.num("acme-max-orders", 4, "ACME orders this edge runs at once"),
	}
}

func (c edgeCerts) check() error {
	var errs []error
	if (*c.wildCert == "") != (*c.wildKey == "") {
		errs = append(errs, errors.New("--wildcard-cert and --wildcard-key go together"))
	}
	if *c.caDir != "" && *c.wildCert != "" {
		errs = append(errs, errors.New("--ca-dir and --wildcard-cert are two sources of certificates: give one"))
	}
	if *c.maxOrders < 1 {
		errs = append(errs, fmt.Errorf("--acme-max-orders %d: want 1 or more", *c.maxOrders))
	}
	return errors.Join(errs...)
}

// apply sets the edge's certificate source (and, for ACME, its HTTP-01
// answers); names is the route table, lns the edge's listeners.
func (c edgeCerts) apply(o *edge.Options, domain string, st certs.Store, names certs.Names, lns []net.Listener, reg prometheus.Registerer, log *slog.Logger) error {
	switch {
	case *c.caDir != "":
		ca, err := certs.NewLocalCA(certs.LocalCAOptions{Dir: *c.caDir, Domains: []string{domain}, Names: names})
		if err != nil {
			return err
		}
		o.GetCertificate = ca.GetCertificate
	case *c.wildCert != "":
		w, err := certs.OpenWildcard(*c.wildCert, *c.wildKey, domain)
		if err != nil {
			return err
		}
		o.GetCertificate = w.GetCertificate
	default:
		var roots *x509.CertPool
		if *c.root != "" {
			pemBytes, err := os.ReadFile(*c.root)
			if err != nil {
				return fmt.Errorf("--acme-ca-root: %w", err)
			}
			if roots, err = x509.SystemCertPool(); err != nil {
				roots = x509.NewCertPool()
			}
			if !roots.AppendCertsFromPEM(pemBytes) {
				return fmt.Errorf("--acme-ca-root %s: no PEM certificate in it", *c.root)
			}
		}
		a, err := certs.NewACME(certs.ACMEOptions{Store: st, Names: names, CA: *c.acmeCA, Email: *c.email,
			EABKeyID: *c.eabKID, EABMACKey: *c.eabMAC, Roots: roots, MaxOrders: *c.maxOrders,
			HTTPPort: lns[1].Addr().(*net.TCPAddr).Port, TLSPort: lns[0].Addr().(*net.TCPAddr).Port, Registerer: reg, Logger: log})
		if err != nil {
			return err
		}
		o.GetCertificate, o.HTTPChallenge = a.GetCertificate, a.HTTPChallenge
	}
	return nil
}

// driverFlags choose and configure the driver that runs sandboxes, and
// the host memory hostctl keeps free for them.
type driverFlags struct {
	driver, kernel, initrd, accel, net, images *string
	cpus, memoryMB, diskGB, minFreeMB          *int
}

func driverFlagsOf(f flags) driverFlags {
	cache, _ := os.UserCacheDir()
	tiny := filepath.Join(cache, "froog", "tinyvm")
	return driverFlags{
		driver:    f.str("driver", "local", "local (development; not an isolation boundary) or qemu (a VM per sandbox)"),
		kernel:    f.str("kernel", filepath.Join(tiny, "vmlinuz"), "qemu: the guest kernel (deploy/tinyvm/build.sh makes the test guest)"),
		initrd:    f.str("initrd", filepath.Join(tiny, "initramfs.gz"), "qemu: the guest's initramfs"),
		images:    f.str("images", "", "qemu: OS images by os, OS=DIR[,OS=DIR…], each made by deploy/images/build.sh; a sandbox whose os has none boots --kernel and --initrd"),
		accel:     f.str("accel", "auto", "qemu: auto (KVM where it works, else TCG), kvm or tcg"),
		net:       f.str("vm-net", "user", "qemu: user (user-mode networking, no root) or tap (a tap device per VM on bridge froogbr0, isolated by nftables; root)"),
		cpus:      f.num("vm-cpus", 0, "qemu: vCPUs of every VM whatever its size; 0: the sizes' (2, 4, 8)"),
		memoryMB:  f.num("vm-memory-mb", 0, "qemu: memory of every VM whatever its size; 0: the sizes' (4, 8, 16 GB)"),
		diskGB:    f.num("vm-disk-gb", 10, "qemu: each sandbox's disk"),
		minFreeMB: f.num("min-free-memory-mb", 1024, "below this much available host memory, warm (stopped, paused) sandboxes give up their processes, the longest stopped first; qemu saves their memory to disk so they still resume with every process"),
	}
}

func (d driverFlags) check() error {
	var errs []error
	switch *d.driver {
	case "local", "qemu":
	default:
		errs = append(errs, fmt.Errorf("--driver %q: want local or qemu", *d.driver))
	}
	if _, err := parseImages(*d.images); err != nil {
		errs = append(errs, err)
	}
	if *d.cpus < 0 || *d.memoryMB < 0 || *d.diskGB < 1 || *d.minFreeMB < 1 {
		errs = append(errs, errors.New("--vm-cpus and --vm-memory-mb must be 0 or more, --vm-disk-gb and --min-free-memory-mb 1 or more"))
	}
	return errors.Join(errs...)
}

var osName = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{0,39}$`)

// parseImages reads --images: OS=DIR pairs, comma-separated.
func parseImages(s string) (map[string]string, error) {
	out := map[string]string{}
	if s == "" {
		return out, nil
	}
	for _, pair := range strings.Split(s, ",") {
		name, dir, ok := strings.Cut(pair, "=")
		switch {
		case !ok || dir == "":
			return nil, fmt.Errorf("--images: %q is not OS=DIR", pair)
		case !osName.MatchString(name):
			return nil, fmt.Errorf("--images: %q is not an os name (lowercase letters, digits, dots and dashes)", name)
		case out[name] != "":
			return nil, fmt.Errorf("--images: %s twice", name)
		}
		out[name] = dir
	}
	return out, nil
}

func (d driverFlags) minFreeMemory() uint64 { return uint64(*d.minFreeMB) << 20 }

// open makes the driver, its files under data; close ends what must end
// with the process (the local driver's sandboxes; VMs outlive it).
func (d driverFlags) open(data string, key ssh.Signer, log *slog.Logger) (hostctl.Driver, func(), error) {
	if *d.driver == "local" {
		drv, err := local.New(local.Options{Dir: filepath.Join(data, "sandboxes"), ControlKey: key.PublicKey(), Logger: log})
		if err != nil {
			return nil, nil, err
		}
		return drv, func() { drv.Close() }, nil
	}
	dirs, err := parseImages(*d.images)
	if err != nil {
		return nil, nil, err
	}
	drv, err := qemu.New(qemu.Options{Dir: filepath.Join(data, "vms"), Kernel: *d.kernel, Initrd: *d.initrd, ImageDirs: dirs, Accel: *d.accel, Net: *d.net,
		CPUs: *d.cpus, MemoryMB: *d.memoryMB, DiskSize: int64(*d.diskGB) << 30, ControlKey: key, Logger: log})
	if err != nil {
		return nil, nil, err
	}
	return drv, func() {}, nil
}
