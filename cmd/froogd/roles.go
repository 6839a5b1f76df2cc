package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"froog.tech/froog/api"
	"froog.tech/froog/store"
	"froog.tech/froog/store/embedded"
	"froog.tech/froog/store/pg"
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

func checkDomain(d string) error {
	if d == "" || strings.ContainsAny(d, "/: ") || strings.HasPrefix(d, ".") || strings.HasSuffix(d, ".") || !strings.Contains(d, ".") {
		return fmt.Errorf("--domain %q: want a domain such as froogusercontent.com", d)
	}
	return nil
}

func runDev(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newFlags("dev", stderr)
	data := f.str("data", "./.froog", "data folder: the embedded store, keys and the local CA")
	apiAddr := f.str("api-addr", "127.0.0.1:8080", "address of the /v1 API")
	edgeAddr := f.str("edge-addr", "127.0.0.1:8443", "HTTPS address of the public-URL edge")
	edgeHTTP := f.str("edge-http-addr", "127.0.0.1:8081", "HTTP address of the edge (redirects, ACME)")
	domain := f.str("domain", "froog.localhost", "public-URL domain")
	if err := f.parse(args); err != nil {
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
	secret, err := secretKey(filepath.Join(c.Data, "secret.key"))
	if err != nil {
		return err
	}
	key, err := devAccount(ctx, st, c.Data)
	if err != nil {
		return err
	}
	_, edgePort, _ := net.SplitHostPort(c.EdgeAddr)
	port, _ := strconv.Atoi(edgePort)
	srv, err := api.New(api.Options{Store: st, Domain: c.Domain, PublicPort: port, SecretKey: secret, Logger: log})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", c.APIAddr)
	if err != nil {
		return fmt.Errorf("listen for the API: %w", err)
	}
	fmt.Fprintf(stdout, "froog dev is running.\n  API:     http://%s/v1\n  API key: %s (also in %s)\n",
		ln.Addr(), key, filepath.Join(c.Data, "api-key"))
	return serveHTTP(ctx, ln, srv)
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

// secretKey reads the 32-byte key that seals URL tokens, creating it the
// first time.
func secretKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
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
	if err := srv.Shutdown(sctx); err != nil {
		return err
	}
	return nil
}

func runAPI(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newFlags("api", stderr)
	dbURL := f.str("database-url", "", "Postgres connection string (required)")
	apiAddr := f.str("api-addr", "127.0.0.1:8080", "address of the /v1 API")
	domain := f.str("domain", "", "public-URL domain (required)")
	publicPort := f.num("public-port", 443, "the edge's HTTPS port as visitors reach it")
	keyFile := f.str("secret-key-file", "", "file with the 32-byte key that seals URL tokens; every API process shares it (required)")
	if err := f.parse(args); err != nil {
		return err
	}
	var errs []error
	if *dbURL == "" {
		errs = append(errs, errors.New("--database-url is required"))
	}
	if err := checkDomain(*domain); err != nil {
		errs = append(errs, err)
	}
	if *keyFile == "" {
		errs = append(errs, errors.New("--secret-key-file is required"))
	}
	if *publicPort < 1 || *publicPort > 65535 {
		errs = append(errs, fmt.Errorf("--public-port %d: want 1-65535", *publicPort))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	secret, err := os.ReadFile(*keyFile)
	if err != nil {
		return fmt.Errorf("read --secret-key-file: %w", err)
	}
	st, err := pg.Open(ctx, pg.Options{URL: *dbURL})
	if err != nil {
		return err
	}
	defer st.Close()
	srv, err := api.New(api.Options{Store: st, Domain: *domain, PublicPort: *publicPort, SecretKey: secret, Logger: slog.New(slog.NewJSONHandler(stderr, nil))})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *apiAddr)
	if err != nil {
		return fmt.Errorf("listen for the API: %w", err)
	}
	fmt.Fprintf(stdout, "froog api on http://%s/v1\n", ln.Addr())
	return serveHTTP(ctx, ln, srv)
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

// adminStore opens Postgres when --database-url is set, else the embedded
// store in --data (which froogd dev must not be holding).
func adminStore(ctx context.Context, f flags, args []string) (store.Store, error) {
	dbURL := f.str("database-url", "", "Postgres connection string; empty: the embedded store in --data")
	data := f.str("data", "./.froog", "data folder of the embedded store")
	if err := f.parse(args); err != nil {
		return nil, err
	}
	if *dbURL != "" {
		return pg.Open(ctx, pg.Options{URL: *dbURL})
	}
	return embedded.Open(filepath.Join(*data, "store"))
}

func runCreateAccount(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newFlags("admin create-account", stderr)
	name := f.str("name", "", "account name (required)")
	maxSandboxes := f.num("max-sandboxes", 5, "sandboxes running at once")
	names := f.num("url-names-per-day", 20, "new public-URL names a day")
	st, err := adminStore(ctx, f, args)
	if err != nil {
		return err
	}
	defer st.Close()
	var errs []error
	if *name == "" {
		errs = append(errs, errors.New("--name is required"))
	}
	if *maxSandboxes < 1 || *names < 1 {
		errs = append(errs, errors.New("--max-sandboxes and --url-names-per-day must be at least 1"))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	a, err := st.CreateAccount(ctx, store.Account{Name: *name, MaxSandboxes: *maxSandboxes, URLNamesPerDay: *names, CreatedAt: time.Now().UTC()})
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, a.ID)
	return nil
}

func runCreateKey(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newFlags("admin api-key create", stderr)
	account := f.str("account", "", "account id (required)")
	name := f.str("name", "admin", "a name for the key")
	preset := f.str("preset", "", "read-only, full-sandbox, ci or admin")
	actions := f.str("actions", "", "comma-separated actions, instead of a preset")
	ttl := f.str("ttl", "90d", "lifetime: e.g. 30d, 12h, or never (at most 365d)")
	var sandboxes, labels list
	f.Var(&sandboxes, "sandbox", "limit the key to this sandbox (repeat)")
	f.Var(&labels, "label", "limit the key to sandboxes with KEY=VALUE (repeat)")
	st, err := adminStore(ctx, f, args)
	if err != nil {
		return err
	}
	defer st.Close()
	var errs []error
	if *account == "" {
		errs = append(errs, errors.New("--account is required"))
	}
	var acts []string
	switch {
	case *preset != "" && *actions != "":
		errs = append(errs, errors.New("give --preset or --actions, not both"))
	case *preset != "":
		if acts, err = api.PresetActions(*preset); err != nil {
			errs = append(errs, err)
		}
	case *actions != "":
		acts = strings.Split(*actions, ",")
		for _, a := range acts {
			if !slices.Contains(api.Actions, a) {
				errs = append(errs, fmt.Errorf("unknown action %q", a))
			}
		}
	default:
		errs = append(errs, errors.New("--preset or --actions is required"))
	}
	life, err := parseTTL(*ttl)
	if err != nil {
		errs = append(errs, err)
	}
	lab := map[string]string{}
	for _, l := range labels {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			errs = append(errs, fmt.Errorf("--label %q: want KEY=VALUE", l))
		}
		lab[k] = v
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	secret, k := api.NewAPIKey(*account, *name, acts, life, time.Now())
	k.Sandboxes = sandboxes
	if len(lab) > 0 {
		k.Labels = lab
	}
	if _, err := st.CreateAPIKey(ctx, k, nil); err != nil {
		return err
	}
	fmt.Fprintln(stdout, secret)
	return nil
}

// parseTTL reads 30d, 12h, 90m or never.
func parseTTL(s string) (time.Duration, error) {
	if s == "never" {
		return 0, nil
	}
	var d time.Duration
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil {
			return 0, fmt.Errorf("--ttl %q: want e.g. 30d, 12h or never", s)
		}
		d = time.Duration(days) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("--ttl %q: want e.g. 30d, 12h or never", s)
		}
	}
	if d <= 0 || d > 365*24*time.Hour {
		return 0, fmt.Errorf("--ttl %q: from a minute to 365d, or never", s)
	}
	return d, nil
}
