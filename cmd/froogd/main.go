package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if code, ok := asDesktop(ctx, os.Args, os.Stdout, os.Stderr); ok {
		os.Exit(code)
	}
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		var de desktopExit
		if errors.As(err, &de) {
			os.Exit(int(de)) // froog-desktop said why
		}
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "froogd:", err)
		}
		os.Exit(2)
	}
}

const usage = `froogd: froog's edge, API and host controller in one binary.

  froogd dev                    every role in one process, embedded store, no setup
  froogd api                    the /v1 API against Postgres
  froogd hostctl                run the sandboxes of one host (local driver)
  froogd edge                   serve public URLs against Postgres
  froogd migrate                bring the Postgres schema up to date
  froogd admin create-account   make an account
  froogd admin api-key create   make an API key for an account
  froogd desktop start|status|stop [--kind desktop|browser]
                                the sandbox's desktop (run inside it; also as froog-desktop)

Run froogd COMMAND -h for its flags; each has a FROOG_* environment equivalent.
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("a command is required")
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "dev":
		return runDev(ctx, rest, stdout, stderr)
	case "api":
		return runAPI(ctx, rest, stdout, stderr)
	case "edge":
		return runEdge(ctx, rest, stdout, stderr)
	case "hostctl":
		return runHostctl(ctx, rest, stdout, stderr)
	case "desktop":
		return runDesktop(ctx, rest, stdout, stderr)
	case "migrate":
		return runMigrate(ctx, rest, stdout, stderr)
	case "admin":
		if len(rest) >= 1 && rest[0] == "create-account" {
			return runCreateAccount(ctx, rest[1:], stdout, stderr)
		}
		if len(rest) >= 2 && rest[0] == "api-key" && rest[1] == "create" {
			return runCreateKey(ctx, rest[2:], stdout, stderr)
		}
		return errors.New("admin commands: create-account, api-key create")
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	return fmt.Errorf("unknown command %q (see froogd help)", cmd)
}

// flags is a flag set whose defaults come from FROOG_* variables.
type flags struct {
	*flag.FlagSet
	errs *[]error // bad environment values, reported by parse
}

func newFlags(name string, stderr io.Writer) flags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return flags{fs, new([]error)}
}

// parse parses args and reports every bad value at once.
func (f flags) parse(args []string) error {
	if err := f.Parse(args); err != nil {
		return err
	}
	if f.NArg() > 0 {
		*f.errs = append(*f.errs, fmt.Errorf("unexpected argument %q", f.Arg(0)))
	}
	return errors.Join(*f.errs...)
}

func envName(flagName string) string {
	return "FROOG_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

func (f flags) str(name, def, usage string) *string {
	if v, ok := os.LookupEnv(envName(name)); ok {
		def = v
	}
	return f.String(name, def, usage+" ("+envName(name)+")")
}

func (f flags) num(name string, def int, usage string) *int {
	p := new(int)
	*p = def
	if v, ok := os.LookupEnv(envName(name)); ok {
		if _, err := fmt.Sscan(v, p); err != nil {
			*f.errs = append(*f.errs, fmt.Errorf("%s=%q: want a whole number", envName(name), v))
		}
	}
	f.IntVar(p, name, *p, usage+" ("+envName(name)+")")
	return p
}

// list is a repeatable string flag.
type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

// required reports each named flag whose value is empty.
func required(flags map[string]string) []error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(flags)) {
		if flags[name] == "" {
			errs = append(errs, fmt.Errorf("%s is required", name))
		}
	}
	return errs
}
