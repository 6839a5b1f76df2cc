package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"froog.tech/froog/froog"
)

// config is ~/.config/froog/config.json.
type config struct {
	APIKey string `json:"api_key,omitempty"`
	APIURL string `json:"api_url,omitempty"`
}

// configPath is $XDG_CONFIG_HOME/froog/config.json, or ~/.config/….
func configPath() (string, error) {
	dir := os.Getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("find the config file: %w", err)
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "froog", "config.json"), nil
}

// loadConfig reads the config file (absent is empty), then lets
// FROOG_API_KEY and FROOG_API_URL override it.
func loadConfig() (config, error) {
	var cfg config
	path, err := configPath()
	if err != nil {
		return cfg, err
	}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return cfg, fmt.Errorf("read %s: %w", path, err)
	default:
		if err := json.Unmarshal(b, &cfg); err != nil {
			return cfg, fmt.Errorf("read %s: %w", path, err)
		}
	}
	if k := os.Getenv("FROOG_API_KEY"); k != "" {
		cfg.APIKey = k
	}
	if u := os.Getenv("FROOG_API_URL"); u != "" {
		cfg.APIURL = u
	}
	return cfg, nil
}

func saveConfig(cfg config) (string, error) {
	path, err := configPath()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("save the config: %w", err)
	}
	b, _ := json.MarshalIndent(cfg, "", "  ")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return "", fmt.Errorf("save the config: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("save the config: %w", err)
	}
	return path, nil
}

func (a *app) loginCmd() *cobra.Command {
	var key, apiURL string
	c := &cobra.Command{
		Use:   "login",
		Short: "Save an API key for this computer",
		Long: `Save an API key in ~/.config/froog/config.json (mode 600), after checking it
with the API. Give the key with --key or on stdin; --url points the CLI at
another froog (e.g. the http://127.0.0.1:…/v1 that froogd dev prints).`,
		Example: `  froog login --key froog_…
  froog login --url http://127.0.0.1:8080 < key.txt`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if key == "" {
				if isTerminal(a.stdin) {
					return errors.New("give the key with --key, or on stdin")
				}
				line, err := bufio.NewReader(a.stdin).ReadString('\n')
				if err != nil && line == "" {
					return errors.New("no key on stdin")
				}
				key = strings.TrimSpace(line)
			}
			if key == "" {
				return errors.New("the key is empty")
			}
			cfg, err := loadConfig()
			if err != nil {
				return err
			}
			if apiURL != "" {
				cfg.APIURL = apiURL
			}
			c, err := froog.NewWithOptions(froog.Options{APIKey: key, URL: cfg.APIURL, UserAgent: "froog-cli"})
			if err != nil {
				return err
			}
			// A key limited to other actions may be refused the list (403),
			// which still says the key is real.
			var fe *froog.Error
			if _, err := c.ListSandboxesWithResponse(cmd.Context(), &froog.ListSandboxesParams{Limit: froog.Ptr(1)}); err != nil && !(errors.As(err, &fe) && fe.Status == 403) {
				return fmt.Errorf("check the key: %w", err)
			}
			cfg.APIKey = key
			path, err := saveConfig(cfg)
			if err != nil {
				return err
			}
			return a.print(map[string]string{"config": path, "api_url": cfg.APIURL}, func(w io.Writer) {
				fmt.Fprintf(w, "Logged in; the key is in %s\n", path)
			})
		},
	}
	c.Flags().StringVar(&key, "key", "", "the API key (else read from stdin)")
	c.Flags().StringVar(&apiURL, "url", "", "the API's address (default https://api.froog.tech)")
	return c
}

func (a *app) logoutCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "logout",
		Short: "Forget the saved key",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			path, err := configPath()
			if err != nil {
				return err
			}
			b, err := os.ReadFile(path)
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			var cfg config
			if err != nil || json.Unmarshal(b, &cfg) != nil {
				return fmt.Errorf("read %s", path)
			}
			cfg.APIKey = ""
			_, err = saveConfig(cfg)
			return err
		},
	}
}

// isTerminal says whether r is a terminal (or /dev/null): something not to
// read a key or a command's stdin from.
func isTerminal(r any) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err != nil || st.Mode()&os.ModeCharDevice != 0
}

// parseDuration is time.ParseDuration with d for days, and a bare number
// as seconds.
func parseDuration(s string) (time.Duration, error) {
	if n, err := strconv.Atoi(s); err == nil {
		return time.Duration(n) * time.Second, nil
	}
	if d, ok := strings.CutSuffix(s, "d"); ok {
		if n, err := strconv.Atoi(d); err == nil {
			return time.Duration(n) * 24 * time.Hour, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration (like 90s, 15m, 4h or 7d)", s)
	}
	return d, nil
}

// envValues parses repeated -e flags: KEY=VALUE, or KEY alone for the
// value this shell has (the docs' "-e KEY copies it from your shell").
func envValues(kvs []string) (map[string]string, error) {
	var withValue []string
	copied := map[string]string{}
	var problems []error
	for _, kv := range kvs {
		if strings.Contains(kv, "=") {
			withValue = append(withValue, kv)
			continue
		}
		v, ok := os.LookupEnv(kv)
		if !ok || kv == "" {
			problems = append(problems, fmt.Errorf("-e %s: not set in this shell (give KEY=VALUE)", kv))
			continue
		}
		copied[kv] = v
	}
	m, err := keyValues("-e", withValue)
	if err := errors.Join(append(problems, err)...); err != nil {
		return nil, err
	}
	for k, v := range copied {
		m[k] = v
	}
	return m, nil
}

// keyValues parses repeated KEY=VALUE flags.
func keyValues(flag string, kvs []string) (map[string]string, error) {
	m := map[string]string{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%s %q: want KEY=VALUE", flag, kv)
		}
		m[k] = v
	}
	return m, nil
}

func (a *app) statusCmd() *cobra.Command {
	var check bool
	c := &cobra.Command{
		Use:   "status [NAME]",
		Short: "The API's health, the signed-in key and where the config lives; with NAME, as info",
		Long: `Without NAME: the API's address and whether it answers this key, where the key
comes from (FROOG_API_KEY or the config file; never the key itself), and where
the config file and this CLI are. --check exits 1 when no key is set or the API
can't be reached with it. With NAME: the same as froog info NAME.`,
		Example: `  froog status --check
  froog status my-box`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				return a.infoCmd().RunE(cmd, args)
			}
			cfg, err := loadConfig()
			if err != nil {
				return err
			}
			path, _ := configPath()
			cli, _ := os.Executable()
			st := struct {
				APIURL   string `json:"api_url"`
				APIOK    bool   `json:"api_ok"`
				APIError string `json:"api_error,omitempty"`
				Key      string `json:"key"`
				Config   string `json:"config"`
				CLI      string `json:"cli"`
			}{APIURL: cfg.APIURL, Key: "not set", Config: path, CLI: cli}
			if st.APIURL == "" {
				st.APIURL = froog.DefaultURL
			}
			switch {
			case os.Getenv("FROOG_API_KEY") != "":
				st.Key = "FROOG_API_KEY"
			case cfg.APIKey != "":
				st.Key = "the config file"
			}
			var problem error
			if cfg.APIKey == "" {
				problem = errors.New("not logged in: run froog login, or set FROOG_API_KEY")
				st.APIError = "no key to ask with"
			} else if c, err := a.sdk(); err != nil {
				problem, st.APIError = err, err.Error()
			} else {
				// As login: a key limited to other actions may be refused
				// the list (403), which still says the API knows it.
				var fe *froog.Error
				_, err := c.ListSandboxesWithResponse(cmd.Context(), &froog.ListSandboxesParams{Limit: froog.Ptr(1)})
				if err != nil && !(errors.As(err, &fe) && fe.Status == 403) {
					problem = fmt.Errorf("the API at %s: %w", st.APIURL, err)
					st.APIError = err.Error()
				}
				st.APIOK = problem == nil
			}
			if err := a.print(st, func(w io.Writer) {
				answer := "answers"
				if !st.APIOK {
					answer = "does not answer: " + st.APIError
				}
				fmt.Fprintf(w, "api:    %s (%s)\nkey:    %s\nconfig: %s\ncli:    %s\n", st.APIURL, answer, st.Key, st.Config, st.CLI)
			}); err != nil {
				return err
			}
			if check && problem != nil {
				return problem
			}
			return nil
		},
	}
	c.Flags().BoolVar(&check, "check", false, "exit 1 when not signed in or the API can't be reached")
	return c
}
