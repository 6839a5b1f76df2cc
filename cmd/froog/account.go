package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"froog.tech/froog/froog"
)

func (a *app) apiKeyCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "api-key",
		Short: "API keys: create, list, rotate, revoke",
		Long: `API keys for scripts, CI and agents. A key expires after 90 days unless you
choose otherwise (--ttl up to 365d, or --ttl never); it is printed once.
--preset (ci, read-only…) or --actions limit what it may do; --sandbox and
--label limit it to some sandboxes.`,
		Example: `  froog api-key create ci-bot --preset ci --ttl 30d   # prints the key once
  froog api-key create box-agent --sandbox my-box
  froog api-key create team-a --preset ci --label team=a
  froog api-key list
  froog api-key rotate key_3f2a9c1d8e7b
  froog api-key revoke key_3f2a9c1d8e7b`,
	}
	var preset, ttl, actions string
	var sandboxes, labels []string
	var never bool
	create := &cobra.Command{
		Use:   "create LABEL",
		Short: "Make a key and print it (only this once)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			body := map[string]any{"label": args[0]}
			if preset != "" {
				body["preset"] = preset
			}
			if actions != "" {
				body["actions"] = strings.Split(actions, ",")
			}
			if len(sandboxes) > 0 {
				body["sandboxes"] = sandboxes
			}
			l, err := keyValues("--label", labels)
			if err != nil {
				return err
			}
			if len(l) > 0 {
				body["labels"] = l
			}
			if ttl == "never" {
				never, ttl = true, ""
			}
			if never {
				body["never_expires"] = true
			}
			if ttl != "" {
				d, err := parseDuration(ttl)
				if err != nil {
					return fmt.Errorf("--ttl: %w", err)
				}
				body["ttl_days"] = int((d.Hours() + 23) / 24)
			}
			var req froog.CreateAPIKey
			if err := into(&req, body); err != nil {
				return err
			}
			c, err := a.sdk()
			if err != nil {
				return err
			}
			res, err := c.CreateAPIKeyWithResponse(cmd.Context(), req)
			if err != nil {
				return err
			}
			return a.print(res.JSON201, func(w io.Writer) { fmt.Fprintln(w, froog.Text(res.JSON201.Key)) })
		},
	}
	f := create.Flags()
	f.StringVar(&preset, "preset", "", "what it may do: a preset (ci, read-only, admin…)")
	f.StringVar(&actions, "actions", "", "what it may do: actions, comma-separated")
	f.StringArrayVar(&sandboxes, "sandbox", nil, "only this sandbox; repeat it")
	f.StringArrayVar(&labels, "label", nil, "only sandboxes with this label, KEY=VALUE; repeat it")
	f.StringVar(&ttl, "ttl", "", "expire after this long (default 90d, at most 365d), or never")
	f.BoolVar(&never, "never-expires", false, "never expire (as --ttl never)")
	list := &cobra.Command{
		Use:   "list",
		Short: "List keys: scope, expiry, last use",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.sdk()
			if err != nil {
				return err
			}
			res, err := c.ListAPIKeysWithResponse(cmd.Context())
			if err != nil {
				return err
			}
			return a.print(res.JSON200, func(w io.Writer) {
				var rows [][]string
				for _, k := range res.JSON200.ApiKeys {
					rows = append(rows, []string{froog.Text(k.Id), froog.Text(k.Label), short(strings.Join(k.Actions, ","), 40), froog.Text(k.ExpiresAt), froog.Text(k.LastUsedAt)})
				}
				table(w, []string{"ID", "LABEL", "ACTIONS", "EXPIRES", "LAST USED"}, rows)
			})
		},
	}
	rotate := &cobra.Command{
		Use:   "rotate ID",
		Short: "A new secret for the key (printed once), same id, scope and expiry",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.sdk()
			if err != nil {
				return err
			}
			res, err := c.RotateAPIKeyWithResponse(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.print(res.JSON200, func(w io.Writer) { fmt.Fprintln(w, froog.Text(res.JSON200.Key)) })
		},
	}
	revoke := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a key",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.sdk()
			if err != nil {
				return err
			}
			if _, err := c.RevokeAPIKeyWithResponse(cmd.Context(), args[0]); err != nil {
				return err
			}
			return a.print(map[string]any{"id": args[0], "revoked": true}, func(w io.Writer) { fmt.Fprintf(w, "%s revoked\n", args[0]) })
		},
	}
	c.AddCommand(create, list, rotate, revoke)
	return c
}

func (a *app) auditCmd() *cobra.Command {
	var limit int
	var cursor string
	c := &cobra.Command{
		Use:     "audit",
		Short:   "The audit log, newest first (needs account.admin)",
		Example: "  froog audit --limit 20",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.sdk()
			if err != nil {
				return err
			}
			p := &froog.ListAuditParams{}
			if limit > 0 {
				p.Limit = &limit
			}
			if cursor != "" {
				p.Cursor = &cursor
			}
			res, err := c.ListAuditWithResponse(cmd.Context(), p)
			if err != nil {
				return err
			}
			page := res.JSON200
			return a.print(page, func(w io.Writer) {
				var rows [][]string
				for _, e := range page.Events {
					rows = append(rows, []string{froog.Text(e.At), froog.Text(e.Action), froog.Text(e.Target), froog.Text(e.Actor)})
				}
				table(w, []string{"AT", "ACTION", "TARGET", "ACTOR"}, rows)
				if next := froog.Text(page.NextCursor); next != "" {
					fmt.Fprintf(a.stderr, "more: froog audit --cursor %s\n", next)
				}
			})
		},
	}
	c.Flags().IntVar(&limit, "limit", 0, "at most this many events")
	c.Flags().StringVar(&cursor, "cursor", "", "the page after this cursor")
	return c
}

func (a *app) limitsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "limits",
		Short: "Your limits and how much of each you've used",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.sdk()
			if err != nil {
				return err
			}
			res, err := c.GetLimitsWithResponse(cmd.Context())
			if err != nil {
				return err
			}
			return a.print(res.JSON200, func(w io.Writer) { fields(w, res.JSON200) })
		},
	}
}

func (a *app) completionsCmd() *cobra.Command {
	return &cobra.Command{
		Use:       "completions bash|zsh|fish",
		Short:     "Print shell completions",
		Example:   "  froog completions bash > /etc/bash_completion.d/froog",
		Args:      cobra.MatchAll(cobra.ExactArgs(1), cobra.OnlyValidArgs),
		ValidArgs: []string{"bash", "zsh", "fish"},
		RunE: func(cmd *cobra.Command, args []string) error {
			root := cmd.Root()
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(a.stdout, true)
			case "zsh":
				return root.GenZshCompletion(a.stdout)
			default:
				return root.GenFishCompletion(a.stdout, true)
			}
		},
	}
}

// short cuts s to n runes, with … when it did.
func short(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
