package main

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"froog.tech/froog/froog"
)

func (a *app) newCmd() *cobra.Command {
	var size, ttl, from, osName, maxLifetime, deleteAfter, repo, repoDir, setupFile string
	var files []string
	var autoStart, noEnv, noAutoStop, noSnapshots bool
	var hosts, envs, labels []string
	var count int
	c := &cobra.Command{
		Use:   "new [NAME]",
		Short: "Create a sandbox and wait until it runs",
		Long: `Create a sandbox (a random name without NAME) and return once it runs.
--host PORT[:public] gives a port a URL from the start (repeat it; PORT alone
is private). With --count N it makes NAME-1 … NAME-N. --ttl, --max-lifetime
and --delete-after take 90s, 15m, 4h or 7d.

At its first boot only (forks don't repeat it): --file PATH=LOCAL writes a
local file into ~ (mode 600, after the account's secret files; repeat it, up
to 20 files and 1 MiB together), --repo URL[#BRANCH] clones a repo into ~
(--repo-dir DIR elsewhere under ~), first in the setup job, and
--setup-file FILE runs a script once, after the account's setup.`,
		Example: `  froog new my-box
  froog new box --ttl 4h              # stops 4 hours after each start
  froog new preview --ttl 15m --auto-start --host 3000:public
  froog new ci-1 --label team=web --label job=1234
  froog new app --from web-stack --count 5   # app-1 … app-5
  froog new ci-1 --max-lifetime 2h --delete-after 1d
  froog new box --file app/.env=.env --setup-file setup.sh
  froog new pr-42 --repo https://github.com/you/app#pr-42`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			body := map[string]any{}
			var problems []error
			if len(args) == 1 {
				body["name"] = args[0]
			}
			if size != "" {
				body["size"] = size
			}
			if from != "" {
				body["from"] = from
			}
			if count > 0 {
				body["count"] = count
			}
			if autoStart {
				body["auto_start"] = true
			}
			if noEnv {
				body["environment"] = false
			}
			if noSnapshots {
				body["snapshots"] = false
			}
			if osName != "" {
				if long, ok := osNames[osName]; ok {
					osName = long
				}
				body["os"] = osName
			}
			for _, d := range []struct{ flag, val, field string }{{"--max-lifetime", maxLifetime, "max_lifetime_secs"}, {"--delete-after", deleteAfter, "delete_after_secs"}} {
				if d.val == "" {
					continue
				}
				v, err := parseDuration(d.val)
				if err != nil {
					problems = append(problems, fmt.Errorf("%s: %w", d.flag, err))
				}
				body[d.field] = int(v.Seconds())
			}
			switch {
			case noAutoStop:
				body["ttl_secs"] = 0
			case ttl != "":
				problems = append(problems, ttlInto(body, ttl))
			}
			problems = append(problems, envInto(body, envs), a.firstBootInto(body, files, repo, repoDir, setupFile))
			if l, err := keyValues("--label", labels); err != nil {
				problems = append(problems, err)
			} else if len(l) > 0 {
				body["labels"] = l
			}
			var ports []froog.HostPort
			for _, h := range hosts {
				p, public, _ := strings.Cut(h, ":")
				n, err := strconv.Atoi(p)
				if err != nil || (public != "" && public != "public") {
					problems = append(problems, fmt.Errorf("--host %q: want PORT or PORT:public", h))
					continue
				}
				hp := froog.HostPort{Port: n}
				if public != "" {
					hp.Public = froog.Ptr(true)
				}
				ports = append(ports, hp)
			}
			if err := errors.Join(problems...); err != nil {
				return err
			}
			var req froog.CreateSandbox
			if err := into(&req, body); err != nil {
				return err
			}
			c, err := a.sdk()
			if err != nil {
				return err
			}
			made, err := c.Sandboxes.CreateMany(cmd.Context(), req)
			if err != nil {
				return err
			}
			type result struct {
				Sandbox *froog.Sandbox `json:"sandbox"`
				URLs    []*froog.URL   `json:"urls,omitempty"`
			}
			var out []result
			for _, h := range made {
				r := result{}
				for _, hp := range ports {
					u, err := h.Host(cmd.Context(), hp)
					if err != nil {
						return fmt.Errorf("host %s port %d: %w", h.Name, hp.Port, err)
					}
					r.URLs = append(r.URLs, u)
				}
				if r.Sandbox, err = h.Info(cmd.Context()); err != nil {
					return err
				}
				out = append(out, r)
			}
			var v any = out
			if len(out) == 1 {
				v = out[0]
			}
			return a.print(v, func(w io.Writer) {
				for _, r := range out {
					fmt.Fprintln(w, froog.Text(r.Sandbox.Name))
					for _, u := range r.URLs {
						fmt.Fprintln(w, froog.Text(u.Url))
					}
				}
			})
		},
	}
	f := c.Flags()
	f.StringVar(&size, "size", "", "small, default or large")
	f.StringVar(&osName, "os", "", "ubuntu (24.04, the default), ubuntu-26.04, debian (13) or omarchy")
	f.StringVar(&ttl, "ttl", "", "auto-stop this long after each start (default 1h, at most 30d)")
	f.StringVar(&maxLifetime, "max-lifetime", "", "stop this long after each start, even while busy (at most 30d)")
	f.StringVar(&deleteAfter, "delete-after", "", "delete it once it has stayed stopped this long (at most 365d)")
	f.BoolVar(&noSnapshots, "no-snapshots", false, "no copies of its disk: a stop erases it")
	f.BoolVar(&noAutoStop, "no-auto-stop", false, "never stop on its own")
	f.BoolVar(&autoStart, "auto-start", false, "start on a request to one of its URLs while it is stopped")
	f.StringArrayVar(&hosts, "host", nil, "give PORT a URL: PORT (private) or PORT:public; repeat it")
	f.StringArrayVarP(&envs, "env", "e", nil, "a variable of its own, KEY=VALUE (KEY alone: this shell's); repeat it")
	f.StringArrayVar(&labels, "label", nil, "a label, KEY=VALUE; repeat it")
	f.BoolVar(&noEnv, "no-environment", false, "without the account's environment")
	f.StringArrayVar(&files, "file", nil, "write a local file into ~ at the first boot, PATH=LOCAL; repeat it")
	f.StringVar(&repo, "repo", "", "clone this repo (URL[#BRANCH]) into ~ at the first boot")
	f.StringVar(&repoDir, "repo-dir", "", "the folder under ~ for --repo (default: the repo's name)")
	f.StringVar(&setupFile, "setup-file", "", "run this script once after the first boot (- reads stdin)")
	f.StringVar(&from, "from", "", "start from a saved snapshot (its name)")
	f.IntVar(&count, "count", 0, "make N sandboxes, NAME-1 … NAME-N")
	return c
}

func (a *app) listCmd() *cobra.Command {
	var labels []string
	var prefix, state string
	c := &cobra.Command{
		Use:   "list",
		Short: "Show sandboxes; --label, --prefix and --state filter the list",
		Example: `  froog list --label team=web --state running
  froog list --prefix ci-`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.sdk()
			if err != nil {
				return err
			}
			p := &froog.ListSandboxesParams{}
			if len(labels) > 0 {
				p.Label = &labels
			}
			if prefix != "" {
				p.NamePrefix = &prefix
			}
			if state != "" {
				p.State = &state
			}
			list, err := c.Sandboxes.List(cmd.Context(), p)
			if err != nil {
				return err
			}
			return a.print(list, func(w io.Writer) {
				var rows [][]string
				for _, sb := range list {
					rows = append(rows, []string{froog.Text(sb.Name), froog.Text(sb.State), froog.Text(sb.Size)})
				}
				table(w, []string{"NAME", "STATE", "SIZE"}, rows)
			})
		},
	}
	c.Flags().StringArrayVar(&labels, "label", nil, "only sandboxes with this label, KEY=VALUE; repeat it")
	c.Flags().StringVar(&prefix, "prefix", "", "only names that start with this")
	c.Flags().StringVar(&state, "state", "", "only sandboxes in this state (running, stopped…)")
	return c
}

// oneSandbox is a command that acts on the sandbox NAME and prints it.
func (a *app) oneSandbox(use, short, example string, act func(cmd *cobra.Command, h *froog.SandboxHandle) (*froog.Sandbox, error)) *cobra.Command {
	return &cobra.Command{
		Use:     use + " NAME",
		Short:   short,
		Example: example,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := a.sandbox(args[0])
			if err != nil {
				return err
			}
			sb, err := act(cmd, h)
			if err != nil {
				return err
			}
			return a.print(sb, func(w io.Writer) {
				if use == "info" {
					fmt.Fprintf(w, "auto-stop: %s\n", autoStop(sb, time.Now()))
					fields(w, sb)
					return
				}
				fmt.Fprintf(w, "%s %s\n", froog.Text(sb.Name), froog.Text(sb.State))
			})
		},
	}
}

func (a *app) infoCmd() *cobra.Command {
	return a.oneSandbox("info", "Everything about one sandbox: state, error, auto-stop timer, settings", "  froog info my-box --json",
		func(cmd *cobra.Command, h *froog.SandboxHandle) (*froog.Sandbox, error) { return h.Info(cmd.Context()) })
}

func (a *app) startCmd() *cobra.Command {
	var size, ttl string
	var envs []string
	var noEnv, withEnv bool
	c := a.oneSandbox("start", "Start a sandbox from its disk and wait until it runs", `  froog start my-box
  froog start my-box --size large --ttl 2h   # both stay for later starts`,
		func(cmd *cobra.Command, h *froog.SandboxHandle) (*froog.Sandbox, error) {
			body := map[string]any{}
			if size != "" {
				body["size"] = size
			}
			problems := []error{envInto(body, envs)}
			if cmd.Flags().Changed("ttl") {
				problems = append(problems, ttlInto(body, ttl))
			}
			switch {
			case noEnv && withEnv:
				problems = append(problems, errors.New("--environment and --no-environment: choose one"))
			case noEnv:
				body["environment"] = false
			case withEnv:
				body["environment"] = true
			}
			if err := errors.Join(problems...); err != nil {
				return nil, err
			}
			var req froog.StartSandbox
			if err := into(&req, body); err != nil {
				return nil, err
			}
			return h.Start(cmd.Context(), req)
		})
	c.Long = `Start a stopped sandbox from its disk and return once it runs; within the warm
window (10 minutes after the stop) its processes carry on. --size, --ttl, -e
and --no-environment (--environment with it again) stay for later starts.`
	f := c.Flags()
	f.StringVar(&size, "size", "", "start it at another size: small, default or large")
	f.StringVar(&ttl, "ttl", "", "a new auto-stop timer, counted from this start (0: none)")
	f.StringArrayVarP(&envs, "env", "e", nil, "add a variable of its own, KEY=VALUE (KEY alone: this shell's); repeat it")
	f.BoolVar(&noEnv, "no-environment", false, "boot without the account's environment")
	f.BoolVar(&withEnv, "environment", false, "boot with the account's environment again")
	return c
}

// osNames are the short names --os takes, as the docs give them.
var osNames = map[string]string{"ubuntu": "ubuntu-24.04", "debian": "debian-13"}

func (a *app) stopCmd() *cobra.Command {
	var noWait bool
	var status string
	c := &cobra.Command{
		Use:   "stop NAME",
		Short: "Snapshot a sandbox's disk and stop it; wait until it has",
		Long: `Snapshot the sandbox's disk and stop it, and return once it has stopped.
--no-wait prints the stop's id instead, and froog stop --status ID shows it
(pending, completed or failed).`,
		Example: `  froog stop my-box
  froog stop my-box --no-wait    # prints stop_…
  froog stop --status stop_…`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (status != "") == (len(args) == 1) {
				return errors.New("give a NAME, or --status ID")
			}
			c, err := a.sdk()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if status != "" {
				res, err := c.GetStopWithResponse(ctx, status)
				if err != nil {
					return err
				}
				st := res.JSON200
				return a.print(st, func(w io.Writer) {
					fmt.Fprintf(w, "%s %s %s\n", st.Id, st.Sandbox, froog.Text(st.Status))
					if st.Error != nil {
						fmt.Fprintf(w, "error: %s\n", *st.Error)
					}
				})
			}
			if noWait {
				res, err := c.StopSandboxWithResponse(ctx, args[0])
				if err != nil {
					return err
				}
				return a.print(res.JSON202, func(w io.Writer) { fmt.Fprintln(w, res.JSON202.Id) })
			}
			sb, err := c.Sandbox(args[0]).Stop(ctx)
			if err != nil {
				return err
			}
			return a.print(sb, func(w io.Writer) { fmt.Fprintf(w, "%s %s\n", froog.Text(sb.Name), froog.Text(sb.State)) })
		},
	}
	c.Flags().BoolVar(&noWait, "no-wait", false, "print the stop's id and return at once")
	c.Flags().StringVar(&status, "status", "", "show the stop with this id: pending, completed or failed")
	return c
}

func (a *app) deleteCmd() *cobra.Command {
	var yes bool
	c := &cobra.Command{
		Use:     "delete NAME",
		Short:   "Delete a sandbox and its automatic snapshots; its saved snapshots stay",
		Example: "  froog delete try-1 -y",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !yes {
				if err := a.confirm("delete", fmt.Sprintf("Delete %s and its disk?", args[0])); err != nil {
					return err
				}
			}
			h, err := a.sandbox(args[0])
			if err != nil {
				return err
			}
			if err := h.Delete(cmd.Context()); err != nil {
				return err
			}
			return a.print(map[string]any{"name": args[0], "deleted": true}, func(w io.Writer) { fmt.Fprintf(w, "%s deleted\n", args[0]) })
		},
	}
	c.Flags().BoolVarP(&yes, "yes", "y", false, "skip the prompt")
	return c
}

func (a *app) forkCmd() *cobra.Command {
	var count int
	var size, ttl string
	var envs []string
	var noSnapshots bool
	c := &cobra.Command{
		Use:   "fork NAME[@SNAPSHOT] NEW",
		Short: "New sandboxes from a sandbox's disk (default: its current state) or a snapshot",
		Long: `Make a new sandbox from a sandbox's current disk, or from one of its snapshots
(NAME@ID, NAME@LABEL or NAME@latest), and return once it runs. It keeps the
source's size, auto-stop timer and variables unless --size, --ttl or -e say
otherwise.`,
		Example: `  froog fork my-box@before-upgrade my-box-2   # new sandbox from a snapshot
  froog fork my-box try --count 5              # try-1 … try-5
  froog fork box box-2 -e KEY=VALUE --ttl 1h`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, snap, _ := strings.Cut(args[0], "@")
			body := map[string]any{"name": args[1]}
			if snap != "" {
				body["snapshot"] = snap
			}
			if count > 0 {
				body["count"] = count
			}
			if size != "" {
				body["size"] = size
			}
			if noSnapshots {
				body["snapshots"] = false
			}
			problems := []error{envInto(body, envs)}
			if ttl != "" {
				problems = append(problems, ttlInto(body, ttl))
			}
			if err := errors.Join(problems...); err != nil {
				return err
			}
			var req froog.ForkSandbox
			if err := into(&req, body); err != nil {
				return err
			}
			h, err := a.sandbox(src)
			if err != nil {
				return err
			}
			made, err := h.ForkMany(cmd.Context(), req)
			if err != nil {
				return err
			}
			var names []string
			for _, m := range made {
				names = append(names, m.Name)
			}
			return a.print(names, func(w io.Writer) { fmt.Fprintln(w, strings.Join(names, "\n")) })
		},
	}
	f := c.Flags()
	f.IntVar(&count, "count", 0, "make N forks, NEW-1 … NEW-N")
	f.StringVar(&size, "size", "", "small, default or large (default: the source's)")
	f.StringVar(&ttl, "ttl", "", "auto-stop this long after each start (default: the source's timer)")
	f.StringArrayVarP(&envs, "env", "e", nil, "a variable on top of the source's own, KEY=VALUE (KEY alone: this shell's); repeat it")
	f.BoolVar(&noSnapshots, "no-snapshots", false, "a stop erases the copy")
	return c
}

func (a *app) restoreCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "restore NAME@SNAPSHOT",
		Short: "Roll a sandbox back to a snapshot, in place",
		Long: `Roll a sandbox back to one of its snapshots (an id), a saved snapshot (its
name), or its newest one (NAME@latest, e.g. to recover a sandbox in the error
state). The current state is snapshotted first, so a restore can be undone.`,
		Example: `  froog restore my-box@before-upgrade
  froog restore my-box@latest`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, snap, ok := strings.Cut(args[0], "@")
			if !ok || snap == "" {
				return fmt.Errorf("restore %q: want NAME@SNAPSHOT", args[0])
			}
			h, err := a.sandbox(name)
			if err != nil {
				return err
			}
			sb, err := h.Restore(cmd.Context(), snap)
			if err != nil {
				return err
			}
			return a.print(sb, func(w io.Writer) { fmt.Fprintf(w, "%s %s\n", froog.Text(sb.Name), froog.Text(sb.State)) })
		},
	}
}

// autoStop is the docs' "at 18:02 (in 3h 59m; 4h after each start)".
func autoStop(sb *froog.Sandbox, now time.Time) string {
	after := "none"
	if sb.TtlSecs > 0 {
		after = (time.Duration(sb.TtlSecs) * time.Second).String()
		after = strings.TrimSuffix(strings.TrimSuffix(after, "0s"), "0m")
	}
	if sb.AutoStopAt == nil {
		if after == "none" {
			return "none"
		}
		return after + " after each start"
	}
	at := sb.AutoStopAt.Local()
	in := at.Sub(now).Truncate(time.Minute)
	left := fmt.Sprintf("%dh %dm", int(in.Hours()), int(in.Minutes())%60)
	if in < time.Hour {
		left = fmt.Sprintf("%dm", max(int(in.Minutes()), 0))
	}
	return fmt.Sprintf("at %s (in %s; %s after each start)", at.Format("15:04"), left, after)
}

// ttlInto sets body's ttl_secs from --ttl's value.
func ttlInto(body map[string]any, ttl string) error {
	d, err := parseDuration(ttl)
	if err != nil {
		return fmt.Errorf("--ttl: %w", err)
	}
	body["ttl_secs"] = int(d.Seconds())
	return nil
}

// envInto sets body's env from the -e KEY=VALUE flags, if any.
func envInto(body map[string]any, envs []string) error {
	env, err := envValues(envs)
	if err == nil && len(env) > 0 {
		body["env"] = env
	}
	return err
}

// maxFirstBoot is the most froog reads for a new sandbox's files (1 MiB
// together) or its setup script.
const maxFirstBoot = 1<<20 + 1

// firstBootInto puts --file, --repo, --repo-dir and --setup-file into a
// create's body; the API checks paths, limits and the repo's URL.
func (a *app) firstBootInto(body map[string]any, files []string, repo, repoDir, setupFile string) error {
	var problems []error
	var list []map[string]string
	for _, f := range files {
		path, local, ok := strings.Cut(f, "=")
		if !ok || path == "" || local == "" {
			problems = append(problems, fmt.Errorf("--file %q: want PATH=LOCAL (PATH under ~, LOCAL a file here)", f))
			continue
		}
		b, err := a.readLocal(local)
		if err != nil {
			problems = append(problems, fmt.Errorf("--file %s: %w", path, err))
			continue
		}
		item := map[string]string{"path": path, "content": string(b)}
		if !utf8.Valid(b) {
			item["content"], item["encoding"] = base64.StdEncoding.EncodeToString(b), "base64"
		}
		list = append(list, item)
	}
	if len(list) > 0 {
		body["files"] = list
	}
	switch {
	case repo != "":
		url, branch, _ := strings.Cut(repo, "#")
		r := map[string]string{"url": url}
		if branch != "" {
			r["branch"] = branch
		}
		if repoDir != "" {
			r["dir"] = repoDir
		}
		body["repo"] = r
	case repoDir != "":
		problems = append(problems, errors.New("--repo-dir goes with --repo"))
	}
	if setupFile != "" {
		b, err := a.readLocal(setupFile)
		if err != nil {
			problems = append(problems, fmt.Errorf("--setup-file: %w", err))
		} else {
			body["setup"] = string(b)
		}
	}
	return errors.Join(problems...)
}

// readLocal reads a local file whole ("-": stdin), refusing one over the
// API's limits without reading it all.
func (a *app) readLocal(path string) ([]byte, error) {
	r := a.stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, maxFirstBoot))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(b) == maxFirstBoot {
		return nil, fmt.Errorf("%s is over 1 MiB", path)
	}
	return b, nil
}
