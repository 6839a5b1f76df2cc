package main

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"runtime"

	"github.com/spf13/cobra"

	"froog.tech/froog/froog"
)

// viewCmd is desktop, browser or wall: make a link, then open it in the
// browser, or print it with --print.
func (a *app) viewCmd(use, short, long, example string, args cobra.PositionalArgs, flags func(*cobra.Command) func(ctx context.Context, c *froog.Client, args []string) (*froog.Link, error)) *cobra.Command {
	var print bool
	c := &cobra.Command{Use: use, Short: short, Long: long, Example: example, Args: args}
	link := flags(c)
	c.Flags().BoolVar(&print, "print", false, "just print the link (a secret: don't log it)")
	c.RunE = func(cmd *cobra.Command, args []string) error {
		cl, err := a.sdk()
		if err != nil {
			return err
		}
		l, err := link(cmd.Context(), cl, args)
		if err != nil {
			return err
		}
		if print || a.json || openBrowser(l.URL) != nil {
			return a.print(l, func(w io.Writer) { fmt.Fprintln(w, l.URL) })
		}
		fmt.Fprintln(a.stderr, "Opened in your browser (open it within 10 minutes).")
		return nil
	}
	return c
}

// openBrowser opens u in the desktop's browser.
func openBrowser(u string) error {
	name := "xdg-open"
	if runtime.GOOS == "darwin" {
		name = "open"
	}
	return exec.Command(name, u).Start()
}

func (a *app) desktopCmd() *cobra.Command {
	return a.viewCmd("desktop NAME", "Open a sandbox's desktop in your browser",
		`Open the sandbox's desktop (XFCE, with Chrome) in froog's viewer. The link must
be opened within 10 minutes and stops working when the sandbox stops.`,
		`  froog desktop my-box
  froog desktop my-box --theme light   # dark (default) or light
  froog desktop my-box --print         # just print the link`,
		cobra.ExactArgs(1),
		func(c *cobra.Command) func(context.Context, *froog.Client, []string) (*froog.Link, error) {
			var theme string
			var viewOnly bool
			c.Flags().StringVar(&theme, "theme", "", "the viewer's theme: dark (default) or light")
			c.Flags().BoolVar(&viewOnly, "view-only", false, "a link that can watch but not type or click")
			return func(ctx context.Context, cl *froog.Client, args []string) (*froog.Link, error) {
				q := map[string]any{}
				if theme != "" {
					q["theme"] = theme
				}
				if viewOnly {
					q["viewonly"] = "1"
				}
				var p froog.CreateDesktopLinkParams
				if err := into(&p, q); err != nil {
					return nil, err
				}
				return cl.Sandbox(args[0]).Desktop(ctx, &p)
			}
		})
}

func (a *app) browserCmd() *cobra.Command {
	return a.viewCmd("browser NAME", "Open a sandbox's browser view: Chrome and nothing else",
		`Open the sandbox's browser view: only Chrome, on its own screen, with no desktop
behind it. The link opens only that view.`,
		`  froog browser my-box                                 # profile ~/.config/froog-browser
  froog browser my-box --profile /data/chrome-work     # another signed-in profile`,
		cobra.ExactArgs(1),
		func(c *cobra.Command) func(context.Context, *froog.Client, []string) (*froog.Link, error) {
			var theme, profile string
			c.Flags().StringVar(&theme, "theme", "", "the viewer's theme: dark (default) or light")
			c.Flags().StringVar(&profile, "profile", "", "Chrome's profile folder in the sandbox")
			return func(ctx context.Context, cl *froog.Client, args []string) (*froog.Link, error) {
				return cl.Sandbox(args[0]).Browser(ctx, froog.BrowserOptions{Theme: theme, Profile: profile})
			}
		})
}

func (a *app) wallCmd() *cobra.Command {
	return a.viewCmd("wall", "Open the wall: every running sandbox's desktop at once",
		`Open the wall: every running sandbox's desktop, live, in a grid of view-only
tiles, adding sandboxes as they start.`,
		"  froog wall --print", cobra.NoArgs,
		func(*cobra.Command) func(context.Context, *froog.Client, []string) (*froog.Link, error) {
			return func(ctx context.Context, cl *froog.Client, _ []string) (*froog.Link, error) { return cl.Wall(ctx) }
		})
}
