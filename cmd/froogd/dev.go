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

	"froog.tech/froog/api"
	"froog.tech/froog/certs"
	"froog.tech/froog/internal/health"
	"froog.tech/froog/internal/keyfile"
	"froog.tech/froog/store"
	"froog.tech/froog/store/embedded"
)

// devConfig is froogd dev's configuration.
type devConfig struct {
	Data                                                 string
	APIAddr, EdgeAddr, EdgeHTTPAddr, MetricsAddr, Domain string
	Rate                                                 rateConfig
	Driver                                               driverConfig
	Capacity                                             int
}

func (c *devConfig) bind(f flags) {
	f.str(&c.Data, "data", "./.froog", "data folder: the embedded store, keys, sandboxes and the local CA")
	f.str(&c.APIAddr, "api-addr", "127.0.0.1:8080", "address of the /v1 API")
	f.str(&c.EdgeAddr, "edge-addr", "127.0.0.1:8443", "HTTPS address of the public-URL edge")
	f.str(&c.EdgeHTTPAddr, "edge-http-addr", "127.0.0.1:8081", "HTTP address of the edge (redirects, ACME)")
	f.str(&c.Domain, "domain", "froog.localhost", "public-URL domain")
	bindMetrics(f, &c.MetricsAddr)
	f.num(&c.Capacity, "capacity", 16, "sandboxes the local host runs at once")
	c.Rate.bind(f)
	c.Driver.bind(f)
}

func (c *devConfig) validate() error {
	var errs []error
	for _, a := range []struct{ flag, addr string }{{"--api-addr", c.APIAddr}, {"--edge-addr", c.EdgeAddr}, {"--edge-http-addr", c.EdgeHTTPAddr}} {
		if _, _, err := net.SplitHostPort(a.addr); err != nil {
			errs = append(errs, fmt.Errorf("%s %q: want HOST:PORT", a.flag, a.addr))
		}
	}
	if c.Data == "" {
		errs = append(errs, errors.New("--data must name a folder"))
	}
	if c.Capacity < 1 {
		errs = append(errs, errors.New("--capacity must be at least 1"))
	}
	errs = append(errs, checkDomain(c.Domain), c.Rate.validate(), c.Driver.validate())
	return errors.Join(errs...)
}

// runDev runs every role in one process: the embedded store, hostctl with
// the local driver, the tunnel, the API and the edge with the local CA.
func runDev(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var c devConfig
	f := newFlags("dev", stderr)
	c.bind(f)
	if err := f.parse(args); err != nil {
		return err
	}
	c.Domain = strings.ToLower(c.Domain)
	if err := c.validate(); err != nil {
		return err
	}
	return runProc(ctx, func(p *proc) error {
		st, err := embedded.Open(filepath.Join(c.Data, "store"))
		if err != nil {
			return err
		}
		p.onClose(func() { st.Close() })
		secret, err := keyfile.LoadOrCreateSecret(filepath.Join(c.Data, "secret.key"), secretKeySize)
		if err != nil {
			return err
		}
		key, err := controlKey(filepath.Join(c.Data, "control_key"), true)
		if err != nil {
			return err
		}
		apiKey, err := devAccount(p.ctx, st, c.Data)
		if err != nil {
			return err
		}
		sh := parts{store: st, key: key, reg: newRegistry("dev"), log: slog.New(slog.NewJSONHandler(stderr, nil))}
		if err := openTunnel(p, &sh); err != nil {
			return err
		}
		lns, err := listen(p, c.APIAddr, c.EdgeAddr, c.EdgeHTTPAddr, c.MetricsAddr)
		if err != nil {
			return err
		}
		apiLn, edgeLn, httpLn := lns[0], lns[1], lns[2]
		// Links name the edge's port as given (visitors reach it there).
		_, edgePort, _ := net.SplitHostPort(c.EdgeAddr)
		publicPort, _ := strconv.Atoi(edgePort)
		hostCheck, err := startHostctl(p, hostctlConfig{HostName: "dev", Data: c.Data, Driver: c.Driver, Capacity: c.Capacity}, sh)
		if err != nil {
			return err
		}
		if err := startAPI(p, apiConfig{Domain: c.Domain, PublicPort: publicPort}, secret, sh, apiLn); err != nil {
			return err
		}
		ec := edgeConfig{Domain: c.Domain, PublicPort: publicPort, Rate: c.Rate, Certs: certs.Config{LocalCADir: c.Data}, DrainSecs: 10}
		checks, err := startEdge(p, ec, sh, secret, edgeLn, httpLn)
		if err != nil {
			return err
		}
		serveAdmin(p, lns[3], sh.reg, append([]health.Check{storeCheck(st), hostCheck}, checks...)...)
		fmt.Fprintf(stdout, "froog dev is running.\n  API:     http://%s/v1\n  API key: %s (also in %s)\n", apiLn.Addr(), apiKey, filepath.Join(c.Data, "api-key"))
		printEdge(stdout, edgeLn.Addr(), httpLn.Addr(), c.Domain, filepath.Join(c.Data, "ca.pem"))
		printAdmin(stdout, lns[3])
		return nil
	})
}

// printEdge prints where the edge is: its own address, which answers
// over TLS with the local CA's certificate (not_found: no URL is named),
// the form of the URLs it serves, and how tools that do not resolve
// *.localhost names themselves (Python, Node, wget on Debian) reach one.
func printEdge(w io.Writer, edge, plain net.Addr, domain, ca string) {
	host := "NAME-PORT-RAND." + domain
	ip, port, _ := net.SplitHostPort(edge.String())
	fmt.Fprintf(w, "  Edge:    https://%s (HTTP %s), certificates from %s (curl --cacert %s)\n", edge, plain, ca, ca)
	fmt.Fprintf(w, "  URLs:    https://%s:%s; for tools that do not resolve *.%s:\n", host, port, domain)
	fmt.Fprintf(w, "           curl --resolve %s:%s:%s …, or the line \"%s %s\" in /etc/hosts\n", host, port, ip, ip, host)
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
	if err := keyfile.Write(path, []byte(secret+"\n")); err != nil {
		return "", fmt.Errorf("write the dev API key: %w", err)
	}
	return secret, nil
}
