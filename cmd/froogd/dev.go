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
	"slices"
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
	Tunnel                                               tunnelConfig
	Driver                                               driverConfig
	Capacity, UpstreamIdleSecs                           int
	DesktopBrowser, HTTP3                                bool
}

func (c *devConfig) bind(f flags) {
	f.str(&c.Data, "data", "./.froog", "data folder: the embedded store, keys, sandboxes and the local CA")
	f.str(&c.APIAddr, "api-addr", "127.0.0.1:8080", "address of the /v1 API")
	f.str(&c.EdgeAddr, "edge-addr", "127.0.0.1:8443", "HTTPS address of the public-URL edge")
	f.str(&c.EdgeHTTPAddr, "edge-http-addr", "127.0.0.1:8081", "HTTP address of the edge (redirects, ACME)")
	f.str(&c.Domain, "domain", "froog.localhost", "public-URL domain")
	bindMetrics(f, &c.MetricsAddr)
	f.num(&c.Capacity, "capacity", 16, "sandboxes the local host runs at once")
	bindDesktopBrowser(f, &c.DesktopBrowser)
	bindHTTP3(f, &c.HTTP3)
	bindUpstreamIdle(f, &c.UpstreamIdleSecs)
	c.Rate.bind(f)
	c.Tunnel.bind(f)
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
	if c.UpstreamIdleSecs < 1 {
		errs = append(errs, fmt.Errorf("--upstream-idle-secs %d: want 1 or more", c.UpstreamIdleSecs))
	}
	errs = append(errs, checkDomain(c.Domain), c.Rate.validate(), c.Tunnel.validate(), c.Driver.validate())
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
		if err := openTunnel(p, &sh, c.Tunnel); err != nil {
			return err
		}
		lns, err := listen(p, c.APIAddr, c.EdgeAddr, c.EdgeHTTPAddr, c.MetricsAddr)
		if err != nil {
			return err
		}
		apiLn, edgeLn, httpLn := lns[0], lns[1], lns[2]
		var quic net.PacketConn
		if c.HTTP3 {
			if edgeLn, quic, err = listenQUIC(p, c.EdgeAddr, edgeLn); err != nil {
				return err
			}
		}
		// Links name the edge's port as given (visitors reach it there).
		_, edgePort, _ := net.SplitHostPort(c.EdgeAddr)
		publicPort, _ := strconv.Atoi(edgePort)
		var lost []store.Sandbox
		if c.Driver.Driver == "local" {
			if lost, err = lostProcesses(p.ctx, st); err != nil {
				return err
			}
		}
		hostCheck, err := startHostctl(p, hostctlConfig{HostName: "dev", Data: c.Data, Driver: c.Driver, Capacity: c.Capacity}, secret, sh)
		if err != nil {
			return err
		}
		ec := edgeConfig{Domain: c.Domain, PublicPort: publicPort, Rate: c.Rate, Certs: certs.Config{LocalCADir: c.Data}, DrainSecs: 10, UpstreamIdleSecs: c.UpstreamIdleSecs, DesktopBrowser: c.DesktopBrowser, HTTP3: c.HTTP3}
		edgeSrv, checks, err := startEdge(p, ec, sh, secret, edgeLn, httpLn, quic)
		if err != nil {
			return err
		}
		// The API reads URLs' traffic from this process's edge.
		if err := startAPI(p, apiConfig{Domain: c.Domain, PublicPort: publicPort}, secret, sh, apiLn, edgeSrv); err != nil {
			return err
		}
		serveAdmin(p, lns[3], sh.reg, append([]health.Check{storeCheck(st), hostCheck}, checks...)...)
		keyFile := filepath.Join(c.Data, "api-key")
		fmt.Fprintf(stdout, "froog dev is running.\n  API:     http://%s/v1\n  API key: %s (also in %s)\n", apiLn.Addr(), apiKey, keyFile)
		printCLI(stdout, apiLn.Addr(), keyFile)
		printEdge(stdout, edgeLn.Addr(), httpLn.Addr(), c.Domain, filepath.Join(c.Data, "ca.pem"))
		printAdmin(stdout, lns[3])
		printLost(stdout, lost)
		return nil
	})
}

// lostProcesses finds the sandboxes whose processes the last froogd dev
// ended: the local driver's processes end with it (a killed one's are
// ended at the next start), and hostctl starts the sandboxes again with
// nothing running in them — jobs lost, URLs answering 502. Each is
// recorded as sandbox.degraded, as the docs' event for a sandbox whose
// processes ended under it, and returned, so that the start says so.
func lostProcesses(ctx context.Context, st store.Store) ([]store.Sandbox, error) {
	all, err := st.AllSandboxes(ctx)
	if err != nil {
		return nil, fmt.Errorf("list the sandboxes: %w", err)
	}
	var lost []store.Sandbox
	for _, sb := range all {
		if sb.State != store.StateRunning {
			continue
		}
		now := store.Micro(time.Now())
		ev := &store.AuditEvent{AccountID: sb.AccountID, At: now, Action: "sandbox.degraded", Target: sb.Name, Actor: "froogd-dev",
			Detail: map[string]string{"reason": "froogd dev restarted: the local driver's processes (jobs, servers) ended when it stopped; start them again"}}
		if _, err := st.UpdateSandbox(ctx, sb.ID, func(*store.Sandbox, *store.AuditEvent) error { return nil }, ev); err != nil {
			return nil, fmt.Errorf("record sandbox %s's lost processes: %w", sb.Name, err)
		}
		lost = append(lost, sb)
	}
	return lost, nil
}

// printLost names the sandboxes lostProcesses found, if any.
func printLost(w io.Writer, lost []store.Sandbox) {
	if len(lost) == 0 {
		return
	}
	names := make([]string, len(lost))
	for i, sb := range lost {
		names[i] = sb.Name
	}
	slices.Sort(names)
	fmt.Fprintf(w, "  Restarted: these sandboxes' processes ended when froogd dev stopped (their jobs are lost; start them again): %s\n", strings.Join(names, ", "))
}

// printCLI prints how to point the froog CLI (bin/froog, beside froogd)
// at this froog: the key by its file, never again in full.
func printCLI(w io.Writer, api net.Addr, keyFile string) {
	fmt.Fprintf(w, "  CLI:     export FROOG_API_URL=http://%s/v1 FROOG_API_KEY=$(cat %s)\n", api, keyFile)
	fmt.Fprintf(w, "           or: froog login --url http://%s/v1 < %s\n", api, keyFile)
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
