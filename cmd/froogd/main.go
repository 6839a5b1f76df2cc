package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"froog.tech/froog/internal/version"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The first signal stops gracefully (an edge drains); a second one
	// ends the process at once.
	go func() { <-ctx.Done(); stop() }()
	if code, ok := asGuest(ctx, os.Args, os.Stdout, os.Stderr); ok {
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
  froogd admin api-key list|revoke|rotate
                                an account's keys (--account), or revoke or rotate one (--id)
  froogd admin hosts [drain|undrain --host NAME [--stop]]
                                list the hosts (address, state, capacity, sandboxes,
                                last heartbeat), or drain or undrain one
  froogd version                this build's version, commit and Go version
  froogd env-example ROLE       the environment file of a role (edge, api, hostctl,
                                migrate, common), written from its flags
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
		if len(rest) >= 2 && rest[0] == "api-key" {
			return runAdminKey(ctx, rest[1], rest[2:], stdout, stderr)
		}
		if len(rest) >= 1 && rest[0] == "hosts" {
			return runHosts(ctx, rest[1:], stdout, stderr)
		}
		return errors.New("admin commands: create-account, api-key create|list|revoke|rotate, hosts [drain|undrain]")
	case "version", "--version":
		fmt.Fprintln(stdout, version.Get())
		return nil
	case "env-example":
		return runEnvExample(rest, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	return fmt.Errorf("unknown command %q (see froogd help)", cmd)
}
