package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"froog.tech/froog/api"
	"froog.tech/froog/store"
	"froog.tech/froog/store/embedded"
	"froog.tech/froog/store/pg"
)

// migrateConfig is froogd migrate's configuration.
type migrateConfig struct{ DatabaseURL string }

func (c *migrateConfig) bind(f flags) {
	f.str(&c.DatabaseURL, "database-url", "", "Postgres connection string (required)")
}

func (c *migrateConfig) validate() error {
	if c.DatabaseURL == "" {
		return errors.New("--database-url is required")
	}
	return nil
}

func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var c migrateConfig
	if err := parseConfig("migrate", &c, args, stderr); err != nil {
		return err
	}
	if err := pg.Migrate(ctx, pg.Options{URL: c.DatabaseURL}); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "schema is up to date")
	return nil
}

// adminStoreConfig says which store an admin command writes to: Postgres
// when DatabaseURL is set, else the embedded store in Data (which froogd
// dev must not be holding).
type adminStoreConfig struct{ DatabaseURL, Data string }

func (c *adminStoreConfig) bind(f flags) {
	f.str(&c.DatabaseURL, "database-url", "", "Postgres connection string; empty: the embedded store in --data")
	f.str(&c.Data, "data", "./.froog", "data folder of the embedded store")
}

func (c adminStoreConfig) open(ctx context.Context) (store.Store, error) {
	if c.DatabaseURL != "" {
		return pg.Open(ctx, pg.Options{URL: c.DatabaseURL})
	}
	return embedded.Open(filepath.Join(c.Data, "store"))
}

// createAccountConfig is froogd admin create-account's configuration.
type createAccountConfig struct {
	Store                        adminStoreConfig
	Name                         string
	MaxSandboxes, URLNamesPerDay int
	// Starts a minute, an hour and a day (the docs' limits by default):
	// an operator raises them for an account that wakes its sandboxes
	// often, e.g. a benchmark's.
	StartsPerMinute, StartsPerHour, StartsPerDay int
}

func (c *createAccountConfig) bind(f flags) {
	f.str(&c.Name, "name", "", "account name (required)")
	f.num(&c.MaxSandboxes, "max-sandboxes", 5, "sandboxes running at once")
	f.num(&c.URLNamesPerDay, "url-names-per-day", 20, "new public-URL names a day")
	f.num(&c.StartsPerMinute, "starts-per-minute", store.DefaultStartsPerMinute, "sandbox starts a minute")
	f.num(&c.StartsPerHour, "starts-per-hour", store.DefaultStartsPerHour, "sandbox starts an hour")
	f.num(&c.StartsPerDay, "starts-per-day", store.DefaultStartsPerDay, "sandbox starts a day")
	c.Store.bind(f)
}

func (c *createAccountConfig) validate() error {
	var errs []error
	if c.Name == "" {
		errs = append(errs, errors.New("--name is required"))
	}
	for _, n := range []struct {
		flag string
		v    int
	}{{"max-sandboxes", c.MaxSandboxes}, {"url-names-per-day", c.URLNamesPerDay},
		{"starts-per-minute", c.StartsPerMinute}, {"starts-per-hour", c.StartsPerHour}, {"starts-per-day", c.StartsPerDay}} {
		if n.v < 1 {
			errs = append(errs, fmt.Errorf("--%s must be at least 1", n.flag))
		}
	}
	return errors.Join(errs...)
}

func runCreateAccount(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var c createAccountConfig
	if err := parseConfig("admin create-account", &c, args, stderr); err != nil {
		return err
	}
	st, err := c.Store.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	a, err := st.CreateAccount(ctx, store.Account{Name: c.Name, MaxSandboxes: c.MaxSandboxes, URLNamesPerDay: c.URLNamesPerDay,
		StartsPerMinute: c.StartsPerMinute, StartsPerHour: c.StartsPerHour, StartsPerDay: c.StartsPerDay, CreatedAt: time.Now().UTC()})
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, a.ID)
	return nil
}

// createKeyConfig is froogd admin api-key create's configuration.
type createKeyConfig struct {
	Store                               adminStoreConfig
	Account, Name, Preset, Actions, TTL string
	Sandboxes, Labels                   list
}

func (c *createKeyConfig) bind(f flags) {
	f.str(&c.Account, "account", "", "account id (required)")
	f.str(&c.Name, "name", "admin", "a name for the key")
	f.str(&c.Preset, "preset", "", "read-only, full-sandbox, ci or admin")
	f.str(&c.Actions, "actions", "", "comma-separated actions, instead of a preset")
	f.str(&c.TTL, "ttl", "90d", "lifetime: e.g. 30d, 12h, or never (at most 365d)")
	f.Var(&c.Sandboxes, "sandbox", "limit the key to this sandbox (repeat)")
	f.Var(&c.Labels, "label", "limit the key to sandboxes with KEY=VALUE (repeat)")
	c.Store.bind(f)
}

func (c *createKeyConfig) validate() error {
	var errs []error
	if c.Account == "" {
		errs = append(errs, errors.New("--account is required"))
	}
	_, err := c.actions()
	errs = append(errs, err)
	_, err = parseTTL(c.TTL)
	errs = append(errs, err)
	_, err = c.labels()
	return errors.Join(append(errs, err)...)
}

// actions are the key's actions, from --preset or --actions.
func (c *createKeyConfig) actions() ([]string, error) {
	switch {
	case c.Preset != "" && c.Actions != "":
		return nil, errors.New("give --preset or --actions, not both")
	case c.Preset != "":
		return api.PresetActions(c.Preset)
	case c.Actions != "":
		acts := strings.Split(c.Actions, ",")
		var errs []error
		for _, a := range acts {
			if !slices.Contains(api.Actions, a) {
				errs = append(errs, fmt.Errorf("unknown action %q", a))
			}
		}
		return acts, errors.Join(errs...)
	}
	return nil, errors.New("--preset or --actions is required")
}

// labels are the --label pairs; nil when none.
func (c *createKeyConfig) labels() (map[string]string, error) {
	if len(c.Labels) == 0 {
		return nil, nil
	}
	lab := map[string]string{}
	var errs []error
	for _, l := range c.Labels {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			errs = append(errs, fmt.Errorf("--label %q: want KEY=VALUE", l))
		}
		lab[k] = v
	}
	return lab, errors.Join(errs...)
}

func runCreateKey(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var c createKeyConfig
	if err := parseConfig("admin api-key create", &c, args, stderr); err != nil {
		return err
	}
	// validate has checked these.
	acts, _ := c.actions()
	life, _ := parseTTL(c.TTL)
	lab, _ := c.labels()
	st, err := c.Store.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	secret, k := api.NewAPIKey(c.Account, c.Name, acts, life, time.Now())
	k.ID = store.NewID("key")
	k.Sandboxes = c.Sandboxes
	k.Labels = lab
	if _, err := st.CreateAPIKey(ctx, k, operatorEvent(c.Account, "api_key.create", k.ID)); err != nil {
		return err
	}
	fmt.Fprintln(stdout, secret)
	return nil
}

// operatorEvent is the audit event of an operator's change to an
// account's keys.
func operatorEvent(account, action, target string) *store.AuditEvent {
	return &store.AuditEvent{AccountID: account, At: store.Micro(time.Now()), Action: action, Target: target,
		Actor: "operator", ActorLabel: "froogd admin"}
}

// runAdminKey runs froogd admin api-key create|list|revoke|rotate.
func runAdminKey(ctx context.Context, sub string, args []string, stdout, stderr io.Writer) error {
	switch sub {
	case "create":
		return runCreateKey(ctx, args, stdout, stderr)
	case "list":
		return runListKeys(ctx, args, stdout, stderr)
	case "revoke", "rotate":
		return runChangeKey(ctx, sub, args, stdout, stderr)
	}
	return fmt.Errorf("admin api-key %q: want create, list, revoke or rotate", sub)
}

// listKeysConfig is froogd admin api-key list's configuration.
type listKeysConfig struct {
	Store   adminStoreConfig
	Account string
}

func (c *listKeysConfig) bind(f flags) {
	f.str(&c.Account, "account", "", "account id (required)")
	c.Store.bind(f)
}

func (c *listKeysConfig) validate() error {
	return errors.Join(required(map[string]string{"--account": c.Account})...)
}

// runListKeys prints an account's keys that are not revoked: id, label,
// scope, expiry, last use and requests in 30 days (as each API process
// last wrote them: at most a minute behind).
func runListKeys(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var c listKeysConfig
	if err := parseConfig("admin api-key list", &c, args, stderr); err != nil {
		return err
	}
	st, err := c.Store.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	if _, err := st.Account(ctx, c.Account); err != nil {
		return err
	}
	keys, err := st.ListAPIKeys(ctx, c.Account)
	if err != nil {
		return err
	}
	now := time.Now()
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tLABEL\tSCOPE\tEXPIRES\tLAST USED\tREQUESTS 30D")
	for _, k := range keys {
		if k.RevokedAt != nil {
			continue
		}
		scope := strings.Join(k.Actions, ",")
		if len(k.Sandboxes) > 0 {
			scope += " sandboxes=" + strings.Join(k.Sandboxes, ",")
		}
		for _, lk := range slices.Sorted(maps.Keys(k.Labels)) {
			scope += " label=" + lk + "=" + k.Labels[lk]
		}
		expires, used := "never", "never"
		if k.ExpiresAt != nil {
			expires = k.ExpiresAt.Format(time.RFC3339)
			if !k.Live(now) {
				expires += " (expired)"
			}
		}
		if k.LastUsedAt != nil {
			used = k.LastUsedAt.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\n", k.ID, k.Name, scope, expires, used, k.Requests(now))
	}
	return tw.Flush()
}

// changeKeyConfig is froogd admin api-key revoke's and rotate's
// configuration.
type changeKeyConfig struct {
	Store adminStoreConfig
	ID    string
}

func (c *changeKeyConfig) bind(f flags) {
	f.str(&c.ID, "id", "", "the key's id, key_… (required)")
	c.Store.bind(f)
}

func (c *changeKeyConfig) validate() error {
	return errors.Join(required(map[string]string{"--id": c.ID})...)
}

// runChangeKey revokes a key (it stops at once, on every API process) or
// rotates it (it prints the new secret; the old one stops at once).
func runChangeKey(ctx context.Context, sub string, args []string, stdout, stderr io.Writer) error {
	var c changeKeyConfig
	if err := parseConfig("admin api-key "+sub, &c, args, stderr); err != nil {
		return err
	}
	st, err := c.Store.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	k, err := st.APIKeyByID(ctx, c.ID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && k.RevokedAt != nil) {
		return fmt.Errorf("no API key %s (or it is revoked)", c.ID)
	}
	if err != nil {
		return err
	}
	now := time.Now()
	if sub == "revoke" {
		if _, err := st.RevokeAPIKey(ctx, k.AccountID, k.ID, now, operatorEvent(k.AccountID, "api_key.revoke", k.ID)); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "revoked %s\n", k.ID)
		return nil
	}
	secret := api.NewSecret(api.KeyPrefix)
	_, err = st.RotateAPIKey(ctx, k.AccountID, k.ID, store.HashSecret(secret), now, operatorEvent(k.AccountID, "api_key.rotate", k.ID))
	if errors.Is(err, store.ErrKeyExpired) {
		return fmt.Errorf("API key %s expired at %s and can't be rotated: create a new one", k.ID, k.ExpiresAt.Format(time.RFC3339))
	}
	if err != nil {
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
