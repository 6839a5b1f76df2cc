package main

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"froog.tech/froog/froog"
)

func portArg(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("%q is not a port (1 to 65535)", s)
	}
	return n, nil
}

// sandboxPort is the handle on the sandbox name and the port port names:
// the NAME PORT that host and url-token take.
func (a *app) sandboxPort(name, port string) (*froog.SandboxHandle, int, error) {
	n, err := portArg(port)
	if err != nil {
		return nil, 0, err
	}
	h, err := a.sandbox(name)
	return h, n, err
}

// address is a URL's address without its token: what a listing shows.
func address(u *froog.URL) string {
	if a, _, _ := strings.Cut(u.Url, "?"); a != "" {
		return a
	}
	return "https://" + u.Host + "/"
}

func (a *app) hostCmd() *cobra.Command {
	var public, rm bool
	var subdomain, title string
	c := &cobra.Command{
		Use:   "host NAME [PORT]",
		Short: "An HTTPS URL for a port, private (with a token) unless --public; without PORT, the list",
		Long: `Give a port inside the sandbox an HTTPS address. A new URL is private: its link
carries a _token (treat it like a password). --public drops the token; hosting
the port again without it makes a new one. Without PORT, list the URLs.`,
		Example: `  froog host my-box 3000
  froog host my-box 3000 --public              # no token: anyone with the address
  froog host my-box 3000 --subdomain acme-demo
  froog host my-box 3000 --title "API docs"    # a label in listings
  froog host my-box                            # list
  froog host my-box 3000 --rm                  # remove`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if len(args) == 1 {
				if public || rm || subdomain != "" || cmd.Flags().Changed("title") {
					return errors.New("--public, --subdomain, --title and --rm need a PORT")
				}
				h, err := a.sandbox(args[0])
				if err != nil {
					return err
				}
				urls, err := h.URLs(ctx)
				if err != nil {
					return err
				}
				return a.print(urls, func(w io.Writer) {
					var rows [][]string
					for _, u := range urls {
						access := "private"
						if froog.Text(u.Public) == "true" {
							access = "public"
						}
						rows = append(rows, []string{froog.Text(u.Port), access, address(&u), froog.Text(u.Title)})
					}
					table(w, []string{"PORT", "ACCESS", "URL", "TITLE"}, rows)
				})
			}
			h, port, err := a.sandboxPort(args[0], args[1])
			if err != nil {
				return err
			}
			if rm {
				if err := h.Unhost(ctx, port); err != nil {
					return err
				}
				return a.print(map[string]any{"port": port, "deleted": true}, func(w io.Writer) { fmt.Fprintf(w, "port %d has no URL now\n", port) })
			}
			body := froog.HostPort{Port: port}
			if public {
				body.Public = froog.Ptr(true)
			}
			if subdomain != "" {
				body.Subdomain = &subdomain
			}
			if cmd.Flags().Changed("title") {
				body.Title = &title
			}
			u, err := h.Host(ctx, body)
			if err != nil {
				return err
			}
			return a.print(u, func(w io.Writer) { fmt.Fprintln(w, froog.Text(u.Url)) })
		},
	}
	f := c.Flags()
	f.BoolVar(&public, "public", false, "no token: anyone with the address")
	f.StringVar(&subdomain, "subdomain", "", "its own name, 3-40 lowercase letters, digits and hyphens")
	f.StringVar(&title, "title", "", `a label in listings ("" removes it)`)
	f.BoolVar(&rm, "rm", false, "remove the port's URL")
	return c
}

func (a *app) urlTokenCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "url-token",
		Short: "A token per viewer of a private URL: create, list, revoke",
		Long: `Give each viewer of a private URL their own token, and cut one off later
without touching the others or the URL's own token. A token expires (default a
day, 60 seconds to 30 days); every request is checked.`,
		Example: `  froog url-token create my-box 3000 --ttl 2h --label alice
  froog url-token list my-box 3000
  froog url-token revoke my-box 3000 utk_…`,
	}
	var ttl, label string
	create := &cobra.Command{
		Use:   "create NAME PORT",
		Short: "Make a viewer token and print its link (shown only this once)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var d time.Duration
			if ttl != "" {
				var err error
				if d, err = parseDuration(ttl); err != nil {
					return fmt.Errorf("--ttl: %w", err)
				}
			}
			h, port, err := a.sandboxPort(args[0], args[1])
			if err != nil {
				return err
			}
			tok, err := h.CreateURLToken(cmd.Context(), port, d, label)
			if err != nil {
				return err
			}
			return a.print(tok, func(w io.Writer) { fmt.Fprintln(w, froog.Text(tok.Url)) })
		},
	}
	create.Flags().StringVar(&ttl, "ttl", "", "how long it works (default 1d, 60s to 30d)")
	create.Flags().StringVar(&label, "label", "", "whose it is, for the list")
	list := &cobra.Command{
		Use:   "list NAME PORT",
		Short: "List a URL's live viewer tokens",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			h, port, err := a.sandboxPort(args[0], args[1])
			if err != nil {
				return err
			}
			toks, err := h.URLTokens(cmd.Context(), port)
			if err != nil {
				return err
			}
			return a.print(toks, func(w io.Writer) {
				var rows [][]string
				for _, t := range toks {
					rows = append(rows, []string{froog.Text(t.Id), froog.Text(t.Label), froog.Text(t.ExpiresAt)})
				}
				table(w, []string{"ID", "LABEL", "EXPIRES"}, rows)
			})
		},
	}
	revoke := &cobra.Command{
		Use:   "revoke NAME PORT ID",
		Short: "Revoke a viewer token: it fails at its next request",
		Args:  cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			h, port, err := a.sandboxPort(args[0], args[1])
			if err != nil {
				return err
			}
			if err := h.RevokeURLToken(cmd.Context(), port, args[2]); err != nil {
				return err
			}
			return a.print(map[string]any{"id": args[2], "revoked": true}, func(w io.Writer) { fmt.Fprintf(w, "%s revoked\n", args[2]) })
		},
	}
	c.AddCommand(create, list, revoke)
	return c
}
