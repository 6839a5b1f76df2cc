package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"froog.tech/froog/froog"
)

// maxInput is the most froog reads from stdin or a file for the
// environment: the largest thing it holds is a 64 KiB file or script.
const maxInput = 64<<10 + 1

// readValue reads a value from r: all of it, less the one newline echo
// adds.
func readValue(r io.Reader, what string) (string, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxInput))
	if err != nil {
		return "", fmt.Errorf("read %s: %w", what, err)
	}
	return strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r"), nil
}

func (a *app) envCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "env",
		Short: "Environment variables every sandbox you start gets",
		Long: `Variables on your account, in every sandbox you start (but those made with
--no-environment): in shells, froog exec and background commands. Values are
encrypted at rest and never shown again. A sandbox gets them when it starts,
so changes reach running sandboxes on their next start. Up to 50 variables,
16 KiB in total.`,
		Example: `  froog env set ANTHROPIC_API_KEY              # prompts for the value
  echo "$DATABASE_URL" | froog env set DATABASE_URL
  froog env list                              # names and masked previews
  froog env rm DATABASE_URL`,
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "Names and masked previews",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.sdk()
			if err != nil {
				return err
			}
			res, err := c.ListEnvWithResponse(cmd.Context())
			if err != nil {
				return err
			}
			return a.print(res.JSON200, func(w io.Writer) {
				var rows [][]string
				for _, v := range res.JSON200.Variables {
					rows = append(rows, []string{v.Name, v.Preview, froog.Text(v.UpdatedAt)})
				}
				table(w, []string{"NAME", "PREVIEW", "UPDATED"}, rows)
			})
		},
	}
	set := &cobra.Command{
		Use:   "set NAME [VALUE]",
		Short: "Set a variable; without VALUE it is read from stdin",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var value string
			if len(args) == 2 {
				value = args[1]
			} else {
				in := a.stdin
				if isTerminal(a.stdin) {
					// One line typed at the prompt.
					fmt.Fprintf(a.stderr, "value for %s: ", args[0])
					line, err := bufio.NewReader(a.stdin).ReadString('\n')
					if err != nil && line == "" {
						return errors.New("no value given")
					}
					in = strings.NewReader(line)
				}
				v, err := readValue(in, "the value")
				if err != nil {
					return err
				}
				value = v
			}
			c, err := a.sdk()
			if err != nil {
				return err
			}
			res, err := c.SetEnvWithResponse(cmd.Context(), args[0], froog.SetEnvJSONRequestBody{Value: value})
			if err != nil {
				return err
			}
			return a.print(res.JSON200, func(w io.Writer) { fmt.Fprintf(w, "%s set (%s)\n", res.JSON200.Name, res.JSON200.Preview) })
		},
	}
	rm := &cobra.Command{
		Use:   "rm NAME",
		Short: "Remove a variable",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.sdk()
			if err != nil {
				return err
			}
			res, err := c.RemoveEnvWithResponse(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.print(res.JSON200, func(w io.Writer) { fmt.Fprintf(w, "%s removed\n", args[0]) })
		},
	}
	c.AddCommand(list, set, rm)
	return c
}

func (a *app) environmentCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "environment",
		Short: "Repos, secret files and a setup script for every sandbox",
		Long: `Besides variables (froog env), your account's environment says what every new
sandbox starts with: repos cloned into ~, secret files such as .npmrc or
app/.env (mode 600), and a setup script run from ~ in a login shell. File
contents are never shown again. Up to 20 repos, 50 files (64 KiB each, 1 MiB
in total) and a 64 KiB script.`,
		Example: `  froog environment add-repo https://github.com/you/app   # optionally #branch
  froog environment add-file app/.env ./app/.env            # or pipe it on stdin
  echo 'cd ~/app && npm ci' | froog environment setup -
  froog environment show`,
	}
	show := &cobra.Command{
		Use:   "show",
		Short: "Repos, the setup script and secret files (paths and sizes)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, err := a.environment(cmd.Context())
			if err != nil {
				return err
			}
			return a.print(e, func(w io.Writer) { printEnvironment(w, e) })
		},
	}
	addRepo := &cobra.Command{
		Use:   "add-repo URL[#BRANCH]",
		Short: "Clone a repo into ~ of every sandbox",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			url, branch, _ := strings.Cut(args[0], "#")
			return a.changeRepos(cmd.Context(), func(repos []froog.EnvRepo) ([]froog.EnvRepo, error) {
				r := froog.EnvRepo{Url: url}
				if branch != "" {
					r.Branch = &branch
				}
				return append(repos, r), nil
			})
		},
	}
	rmRepo := &cobra.Command{
		Use:   "rm-repo URL",
		Short: "Stop cloning a repo (the clones made stay)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			url, _, _ := strings.Cut(args[0], "#")
			return a.changeRepos(cmd.Context(), func(repos []froog.EnvRepo) ([]froog.EnvRepo, error) {
				out := []froog.EnvRepo{}
				for _, r := range repos {
					if r.Url != url {
						out = append(out, r)
					}
				}
				if len(out) == len(repos) {
					return nil, fmt.Errorf("the environment has no repo %s", url)
				}
				return out, nil
			})
		},
	}
	var clear bool
	setup := &cobra.Command{
		Use:   "setup FILE|-",
		Short: "Set the setup script from FILE (- for stdin), or --clear it",
		Args:  cobra.RangeArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var script string
			switch {
			case clear && len(args) == 0:
			case clear || len(args) != 1:
				return errors.New("give FILE, - for stdin, or --clear alone")
			default:
				b, err := a.readInput(args[0], "the script")
				if err != nil {
					return err
				}
				if b == "" {
					return errors.New("the script is empty: use --clear to remove it")
				}
				script = b
			}
			c, err := a.sdk()
			if err != nil {
				return err
			}
			res, err := c.UpdateEnvironmentWithResponse(cmd.Context(), froog.UpdateEnvironment{Setup: &script})
			if err != nil {
				return err
			}
			return a.print(res.JSON200, func(w io.Writer) { printEnvironment(w, res.JSON200) })
		},
	}
	setup.Flags().BoolVar(&clear, "clear", false, "remove the setup script")
	addFile := &cobra.Command{
		Use:   "add-file PATH [LOCAL]",
		Short: "Write a secret file at ~/PATH in every sandbox, from LOCAL or stdin",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			from := "-"
			if len(args) == 2 {
				from = args[1]
			}
			content, err := a.readInput(from, "the file")
			if err != nil {
				return err
			}
			enc := froog.EnvFileBase64
			c, err := a.sdk()
			if err != nil {
				return err
			}
			res, err := c.PutEnvironmentFileWithResponse(cmd.Context(), froog.PutEnvironmentFile{Path: args[0],
				Content: base64.StdEncoding.EncodeToString([]byte(content)), Encoding: &enc})
			if err != nil {
				return err
			}
			return a.print(res.JSON200, func(w io.Writer) { printEnvironment(w, res.JSON200) })
		},
	}
	rmFile := &cobra.Command{
		Use:   "rm-file PATH",
		Short: "Stop writing a secret file (the copies written stay)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.sdk()
			if err != nil {
				return err
			}
			res, err := c.RemoveEnvironmentFileWithResponse(cmd.Context(), &froog.RemoveEnvironmentFileParams{Path: args[0]})
			if err != nil {
				return err
			}
			return a.print(res.JSON200, func(w io.Writer) { printEnvironment(w, res.JSON200) })
		},
	}
	c.AddCommand(show, addRepo, rmRepo, setup, addFile, rmFile)
	return c
}

// readInput reads a file's content whole, or stdin's for "-".
func (a *app) readInput(from, what string) (string, error) {
	if from == "-" {
		b, err := io.ReadAll(io.LimitReader(a.stdin, maxInput))
		if err != nil {
			return "", fmt.Errorf("read %s from stdin: %w", what, err)
		}
		return string(b), nil
	}
	f, err := os.Open(from)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxInput))
	if err != nil {
		return "", fmt.Errorf("read %s: %w", from, err)
	}
	return string(b), nil
}

func (a *app) environment(ctx context.Context) (*froog.Environment, error) {
	c, err := a.sdk()
	if err != nil {
		return nil, err
	}
	res, err := c.GetEnvironmentWithResponse(ctx)
	if err != nil {
		return nil, err
	}
	return res.JSON200, nil
}

// changeRepos reads the repos, changes them with fn and writes them back.
func (a *app) changeRepos(ctx context.Context, fn func([]froog.EnvRepo) ([]froog.EnvRepo, error)) error {
	e, err := a.environment(ctx)
	if err != nil {
		return err
	}
	repos, err := fn(e.Repos)
	if err != nil {
		return err
	}
	c, err := a.sdk()
	if err != nil {
		return err
	}
	res, err := c.UpdateEnvironmentWithResponse(ctx, froog.UpdateEnvironment{Repos: &repos})
	if err != nil {
		return err
	}
	return a.print(res.JSON200, func(w io.Writer) { printEnvironment(w, res.JSON200) })
}

func printEnvironment(w io.Writer, e *froog.Environment) {
	fmt.Fprintln(w, "repos:")
	for _, r := range e.Repos {
		if b := froog.Text(r.Branch); b != "" {
			fmt.Fprintf(w, "  %s#%s\n", r.Url, b)
		} else {
			fmt.Fprintf(w, "  %s\n", r.Url)
		}
	}
	fmt.Fprintln(w, "files:")
	for _, f := range e.Files {
		fmt.Fprintf(w, "  %s (%s bytes)\n", f.Path, strconv.Itoa(f.Size))
	}
	if e.Setup == nil {
		fmt.Fprintln(w, "setup: none")
		return
	}
	fmt.Fprintln(w, "setup:")
	for _, line := range strings.Split(strings.TrimRight(*e.Setup, "\n"), "\n") {
		fmt.Fprintf(w, "  %s\n", line)
	}
}
