package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"path/filepath"

	"froog.tech/froog/api"
	"froog.tech/froog/store"
	"froog.tech/froog/store/embedded"
	"froog.tech/froog/store/pg"
)

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
