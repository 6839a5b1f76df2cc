package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"froog.tech/froog/froog"
)

// maxStdin is exec's stdin limit (the API's 1 MiB).
const maxStdin = 1 << 20

func (a *app) execCmd() *cobra.Command {
	var detach, noStdin bool
	var cwd, timeout string
	var envs []string
	c := &cobra.Command{
		Use:   "exec NAME [flags] -- COMMAND…",
		Short: "Run a command in a sandbox, streaming its output",
		Long: `Run a command (through sh) in a sandbox, stream its output and exit with its
exit code; past --timeout it is killed and froog exits 124. Stdin, when it is
a file or a pipe, is the command's (up to 1 MiB); --no-stdin skips it.

--detach runs it as a background job and prints the job's id: it keeps
running after you disconnect (froog logs, froog jobs, froog kill).
--timeout 0 starts it that way and streams it to the end.`,
		Example: `  froog exec my-box -- 'git clone https://github.com/you/app && cd app && make test'
  froog exec my-box -- python3 - < script.py
  froog exec my-box --detach -- 'npm run build && npm test'
  froog exec my-box --timeout 0 -- ./long-script.sh
  froog exec my-box --cwd app -e PORT=3000 -- npm run dev`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 1 {
				return errors.New("give the command after --: froog exec NAME -- COMMAND")
			}
			var problems []error
			env, err := envValues(envs)
			problems = append(problems, err)
			var d time.Duration
			if timeout != "" {
				if d, err = parseDuration(timeout); err != nil {
					problems = append(problems, fmt.Errorf("--timeout: %w", err))
				}
			}
			if err := errors.Join(problems...); err != nil {
				return err
			}
			o := &froog.ExecOptions{Cwd: cwd, Env: env, Timeout: d}
			if !noStdin && !isTerminal(a.stdin) {
				b, err := io.ReadAll(io.LimitReader(a.stdin, maxStdin+1))
				if err != nil {
					return fmt.Errorf("read stdin: %w", err)
				}
				if len(b) > maxStdin {
					return errors.New("stdin is over 1 MiB: use froog push or the files API")
				}
				o.Stdin = b
			}
			h, err := a.sandbox(args[0])
			if err != nil {
				return err
			}
			command := strings.Join(args[1:], " ")
			ctx := cmd.Context()
			if detach || (timeout != "" && d == 0) {
				o.Timeout = 0
				job, err := h.Spawn(ctx, command, o)
				if err != nil {
					return err
				}
				if detach {
					return a.print(map[string]string{"id": job.ID}, func(w io.Writer) { fmt.Fprintln(w, job.ID) })
				}
				code, err := job.Follow(ctx, a.stdout)
				if err != nil {
					return err
				}
				return exitWith(code)
			}
			if a.json {
				res, err := h.Exec(ctx, command, o)
				if err != nil {
					return err
				}
				if err := a.print(res, nil); err != nil {
					return err
				}
				return exitWith(res.ExitCode)
			}
			for e, err := range h.ExecStream(ctx, command, o) {
				if err != nil {
					return err
				}
				switch froog.Text(e.Type) {
				case "stdout":
					io.WriteString(a.stdout, froog.Text(e.Data))
				case "stderr":
					io.WriteString(a.stderr, froog.Text(e.Data))
				case "exit":
					if froog.Text(e.TimedOut) == "true" {
						fmt.Fprintf(a.stderr, "froog: timed out after %s\n", d)
						return exitCode(124)
					}
					return exitWith(deref(e.ExitCode))
				case "error":
					return fmt.Errorf("%s: %s", froog.Text(e.Code), froog.Text(e.Message))
				}
			}
			return errors.New("the command's stream ended without its exit code")
		},
	}
	f := c.Flags()
	f.BoolVar(&detach, "detach", false, "run it in the background and print the job's id")
	f.StringVar(&cwd, "cwd", "", "run it in this folder (relative to ~)")
	f.BoolVar(&noStdin, "no-stdin", false, "send no stdin, even from a pipe or a file (like ssh -n)")
	f.StringArrayVarP(&envs, "env", "e", nil, "a variable for this command only, KEY=VALUE (KEY alone: this shell's); repeat it")
	f.StringVar(&timeout, "timeout", "", "kill it after this long (exit 124; default 1h); 0: run it as a job, streamed to the end")
	return c
}

// exitWith ends froog with code (nil for 0); -1, a job that ended without
// one, is 1.
func exitWith(code int) error {
	switch {
	case code == 0:
		return nil
	case code < 0:
		return exitCode(1)
	}
	return exitCode(code)
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func (a *app) jobsCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "jobs NAME",
		Short:   "List a sandbox's background commands: running, exited, killed",
		Example: "  froog jobs my-box",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := a.sandbox(args[0])
			if err != nil {
				return err
			}
			jobs, err := h.Jobs(cmd.Context())
			if err != nil {
				return err
			}
			return a.print(jobs, func(w io.Writer) {
				var rows [][]string
				for _, j := range jobs {
					rows = append(rows, []string{froog.Text(j.Id), froog.Text(j.State), froog.Text(j.ExitCode), froog.Text(j.Command)})
				}
				table(w, []string{"ID", "STATE", "EXIT", "COMMAND"}, rows)
			})
		},
	}
}

func (a *app) logsCmd() *cobra.Command {
	var follow bool
	c := &cobra.Command{
		Use:   "logs NAME JOB",
		Short: "Print a background command's output (stdout and stderr together)",
		Long: `Print a background command's output so far; with -f, follow it until it ends
and exit with its exit code.`,
		Example: "  froog logs my-box job_3f2a9c1d8e7b6a50 -f",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := a.sandbox(args[0])
			if err != nil {
				return err
			}
			job := h.Job(args[1])
			if follow {
				code, err := job.Follow(cmd.Context(), a.stdout)
				if err != nil {
					return err
				}
				return exitWith(code)
			}
			var all []byte
			var last *froog.JobOutput
			for offset := 0; ; {
				out, err := job.Logs(cmd.Context(), offset)
				if err != nil {
					return err
				}
				last = out
				all = append(all, out.OutputB64...)
				if len(out.OutputB64) == 0 {
					break
				}
				offset = out.NextOffset
			}
			return a.print(map[string]any{"id": args[1], "output": string(all), "state": last.State, "exit_code": last.ExitCode}, func(w io.Writer) {
				w.Write(all)
			})
		},
	}
	c.Flags().BoolVarP(&follow, "follow", "f", false, "follow it until it ends; exit with its exit code")
	return c
}

func (a *app) killCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "kill NAME JOB",
		Short:   "Stop a background command and everything it started",
		Example: "  froog kill my-box job_3f2a9c1d8e7b6a50",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := a.sandbox(args[0])
			if err != nil {
				return err
			}
			if err := h.Job(args[1]).Kill(cmd.Context()); err != nil {
				return err
			}
			return a.print(map[string]any{"id": args[1], "killed": true}, func(w io.Writer) { fmt.Fprintf(w, "%s killed\n", args[1]) })
		},
	}
}

func (a *app) waitCmd() *cobra.Command {
	var port int
	var timeout string
	c := &cobra.Command{
		Use:   "wait NAME --port PORT",
		Short: "Wait until something listens on a port inside the sandbox",
		Long: `Return once something listens on the port inside the sandbox, on any address;
exit 1 if nothing does in time (default 60 seconds, at most 10 minutes).`,
		Example: "  froog wait my-box --port 3000 --timeout 2m",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if port < 1 || port > 65535 {
				return errors.New("--port: give a port from 1 to 65535")
			}
			var d time.Duration
			if timeout != "" {
				var err error
				if d, err = parseDuration(timeout); err != nil {
					return fmt.Errorf("--timeout: %w", err)
				}
			}
			h, err := a.sandbox(args[0])
			if err != nil {
				return err
			}
			ready, err := h.WaitForPort(cmd.Context(), port, d)
			if err != nil {
				return err
			}
			if err := a.print(map[string]any{"port": port, "ready": ready}, func(w io.Writer) {
				if !ready {
					fmt.Fprintf(a.stderr, "froog: nothing listens on port %d\n", port)
				}
			}); err != nil {
				return err
			}
			if !ready {
				return exitCode(1)
			}
			return nil
		},
	}
	c.Flags().IntVar(&port, "port", 0, "the port")
	c.Flags().StringVar(&timeout, "timeout", "", "give up after this long (default 60s, at most 10m)")
	return c
}
