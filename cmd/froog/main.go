package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"froog.tech/froog/froog"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// exitCode is an error that ends froog with its code and no message of
// froog's own: a command's exit code passed through, or a wait that ran out.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit code %d", int(e)) }

// run is froog with args; it returns the process's exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr}
	root := a.root()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	var code exitCode
	switch {
	case err == nil:
		return 0
	case errors.As(err, &code):
		return int(code)
	}
	fmt.Fprintf(stderr, "froog: %s\n", strings.TrimPrefix(err.Error(), "froog: "))
	return 1
}

// app is one run's state: its streams and the --json flag.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	json           bool
	client         *froog.Client
}

func (a *app) root() *cobra.Command {
	root := &cobra.Command{
		Use:   "froog",
		Short: "froog gives every agent its own Linux VM",
		Long: `froog gives every agent its own Linux virtual machine (a sandbox), driven from
this CLI or the HTTP API.

The CLI reads FROOG_API_KEY and FROOG_API_URL from the environment, which
override ~/.config/froog/config.json (written by froog login). Every command
accepts --json for machine-readable output.`,
		Example: `  froog login --key froog_…
  froog new my-box
  froog exec my-box -- 'make test'
  froog host my-box 3000
  froog stop my-box`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().BoolVar(&a.json, "json", false, "print machine-readable JSON")
	root.AddGroup(&cobra.Group{ID: "sandbox", Title: "Sandboxes:"}, &cobra.Group{ID: "run", Title: "Commands:"},
		&cobra.Group{ID: "web", Title: "Public URLs and desktops:"}, &cobra.Group{ID: "account", Title: "Account:"})
	add := func(group string, cmds ...*cobra.Command) {
		for _, c := range cmds {
			c.GroupID = group
			root.AddCommand(c)
		}
	}
	add("sandbox", a.newCmd(), a.listCmd(), a.infoCmd(), a.startCmd(), a.stopCmd(), a.deleteCmd(), a.forkCmd(),
		a.snapshotCmd(), a.snapshotsCmd(), a.restoreCmd())
	add("run", a.execCmd(), a.jobsCmd(), a.logsCmd(), a.killCmd(), a.waitCmd(), a.sshCmd(), a.pushCmd(), a.scpCmd(),
		a.psCmd(), a.metricsCmd(), a.historyCmd())
	add("web", a.hostCmd(), a.portCmd(), a.urlTokenCmd(), a.inboxCmd(), a.desktopCmd(), a.browserCmd(), a.wallCmd())
	add("account", a.loginCmd(), a.logoutCmd(), a.statusCmd(), a.apiKeyCmd(), a.auditCmd(), a.limitsCmd(),
		a.envCmd(), a.environmentCmd(), a.webhooksCmd())
	root.AddCommand(a.completionsCmd())
	root.CompletionOptions.DisableDefaultCmd = true
	return root
}

// sdk is the SDK client, made from the environment and the config file.
func (a *app) sdk() (*froog.Client, error) {
	if a.client != nil {
		return a.client, nil
	}
	cfg, err := loadConfig()
	if err != nil {
		return nil, err
	}
	if cfg.APIKey == "" {
		return nil, errors.New("not logged in: run froog login, or set FROOG_API_KEY")
	}
	c, err := froog.NewWithOptions(froog.Options{APIKey: cfg.APIKey, URL: cfg.APIURL, UserAgent: "froog-cli"})
	if err != nil {
		return nil, err
	}
	a.client = c
	return c, nil
}

// sandbox is a handle on name.
func (a *app) sandbox(name string) (*froog.SandboxHandle, error) {
	c, err := a.sdk()
	if err != nil {
		return nil, err
	}
	return c.Sandbox(name), nil
}

// print writes v as JSON with --json, else what human writes.
func (a *app) print(v any, human func(w io.Writer)) error {
	if a.json {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	if human != nil {
		human(a.stdout)
	}
	return nil
}

// confirm asks question on the terminal before verb (delete, purge)
// goes ahead, as -y skips; an error when the answer is not yes, or when
// stdin is no terminal to ask on.
func (a *app) confirm(verb, question string) error {
	if !isTerminal(a.stdin) {
		return fmt.Errorf("%s asks first: give -y to %s without asking", verb, verb)
	}
	fmt.Fprintf(a.stderr, "%s [y/N] ", question)
	line, _ := bufio.NewReader(a.stdin).ReadString('\n')
	if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
		return fmt.Errorf("not %sd", verb)
	}
	return nil
}

// table writes rows under header, aligned.
func table(w io.Writer, header []string, rows [][]string) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	tw.Flush()
}

// fields writes v's JSON fields as "key: value" lines, sorted, nested
// objects as their JSON.
func fields(w io.Writer, v any) {
	b, _ := json.Marshal(v)
	var m map[string]any
	json.Unmarshal(b, &m)
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		val := m[k]
		switch x := val.(type) {
		case nil:
			continue
		case string:
			fmt.Fprintf(w, "%s: %s\n", k, x)
		default:
			j, _ := json.Marshal(x)
			fmt.Fprintf(w, "%s: %s\n", k, j)
		}
	}
}

// into fills dst, one of the SDK's request types, from m through JSON: the
// flags name the API's fields, whatever Go types the generator chose.
func into(dst any, m map[string]any) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, dst)
}
