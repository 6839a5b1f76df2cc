package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"froog.tech/froog/froog"
)

// eventNames is every event type an endpoint may ask for, from the SDK's
// enum, for the messages that name them.
var eventNames = []string{
	string(froog.WebhookEventsSandboxRunning), string(froog.WebhookEventsSandboxStopped), string(froog.WebhookEventsSandboxError),
	string(froog.WebhookEventsSandboxDeleted), string(froog.WebhookEventsSandboxExpired), string(froog.WebhookEventsSandboxDegraded),
	string(froog.WebhookEventsSandboxRecovered),
}

// parseEvents is the event types of --event, repeated or comma-separated,
// each checked against the API's list here, so that a typo fails before
// anything is sent; none means every event.
func parseEvents(flags []string) ([]string, error) {
	var out, bad []string
	for _, f := range flags {
		for _, e := range strings.Split(f, ",") {
			e = strings.TrimSpace(e)
			switch {
			case !froog.WebhookEvents(e).Valid():
				bad = append(bad, fmt.Sprintf("%q", e))
			case !slices.Contains(out, e):
				out = append(out, e)
			}
		}
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("--event: not an event type: %s (the types: %s)", strings.Join(bad, ", "), strings.Join(eventNames, ", "))
	}
	return out, nil
}

// eventsText is an endpoint's filter in a listing: "all" when empty.
func eventsText[E ~string](events []E) string {
	if len(events) == 0 {
		return "all"
	}
	s := make([]string, len(events))
	for i, e := range events {
		s[i] = string(e)
	}
	return strings.Join(s, ",")
}

// attemptResult is how an attempt went, in a listing: delivered with the
// endpoint's status, or failed and why.
func attemptResult(a *froog.WebhookAttempt) string {
	code := froog.Text(a.ResponseCode)
	switch {
	case a.Status == froog.WebhookAttemptStatusDelivered && code != "":
		return "delivered " + code
	case a.Status == froog.WebhookAttemptStatusDelivered:
		return "delivered"
	case froog.Text(a.Error) != "":
		return "failed: " + froog.Text(a.Error)
	case code != "":
		return "failed: answered " + code
	}
	return string(a.Status)
}

// updateBody is the PATCH of froog webhooks update from its flags: only
// what was given changes. changed says which flags were set.
func updateBody(changed func(string) bool, url, name string, events []string, allEvents, enable, disable bool) (froog.UpdateWebhook, error) {
	var body froog.UpdateWebhook
	var problems []error
	if enable && disable {
		problems = append(problems, errors.New("give --enable or --disable, not both"))
	}
	if allEvents && len(events) > 0 {
		problems = append(problems, errors.New("give --event or --all-events, not both"))
	}
	list, err := parseEvents(events)
	if err != nil {
		problems = append(problems, err)
	}
	if changed("url") {
		if url == "" {
			problems = append(problems, errors.New("--url: give the endpoint's https:// URL"))
		}
		body.Url = &url
	}
	if changed("name") {
		body.Name = &name // "" removes it
	}
	switch {
	case allEvents:
		body.Events = &[]froog.UpdateWebhookEvents{}
	case len(list) > 0:
		ev := make([]froog.UpdateWebhookEvents, len(list))
		for i, e := range list {
			ev[i] = froog.UpdateWebhookEvents(e)
		}
		body.Events = &ev
	}
	if enable || disable {
		body.Enabled = &enable
	}
	if len(problems) == 0 && body == (froog.UpdateWebhook{}) {
		problems = append(problems, errors.New("nothing to change: give --url, --name, --event, --all-events, --enable or --disable"))
	}
	return body, errors.Join(problems...)
}

// secretNote follows a signing secret printed once.
const secretNote = "It is shown only now: keep it where your receiver can read it."

func (a *app) webhooksCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "webhooks",
		Short: "Signed notifications of sandbox state changes, and their delivery log",
		Long: `An HTTPS POST to your endpoint when a sandbox becomes running, stops, fails, is
deleted or expires, is degraded or recovers, signed with the endpoint's secret
(froog-signature). The secret is printed once, by add and rotate. Endpoints
must be HTTPS on a public address; up to 10 per account. Every attempt, test
pings included, is in the endpoint's delivery log for 30 days.

Events: ` + strings.Join(eventNames, ", ") + `.`,
		Example: `  froog webhooks add https://example.com/froog --name prod   # all events; prints the signing secret once
  froog webhooks add https://example.com/froog --event sandbox.error
  froog webhooks test wh_…                                   # send a ping now
  froog webhooks update wh_… --event sandbox.stopped --disable
  froog webhooks deliveries wh_…                             # recent attempts and their results
  froog webhooks list
  froog webhooks rotate wh_…
  froog webhooks rm wh_…`,
	}
	var name string
	var events []string
	add := &cobra.Command{
		Use:   "add URL",
		Short: "Add an endpoint and print its signing secret (only this once)",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return errors.New("give the endpoint's https:// URL: froog webhooks add URL")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			list, err := parseEvents(events)
			if err != nil {
				return err
			}
			body := froog.CreateWebhook{Url: args[0]}
			if cmd.Flags().Changed("name") {
				body.Name = &name
			}
			if len(list) > 0 {
				ev := make([]froog.CreateWebhookEvents, len(list))
				for i, e := range list {
					ev[i] = froog.CreateWebhookEvents(e)
				}
				body.Events = &ev
			}
			c, err := a.sdk()
			if err != nil {
				return err
			}
			res, err := c.CreateWebhookWithResponse(cmd.Context(), body)
			if err != nil {
				return err
			}
			h := res.JSON201
			return a.print(h, func(w io.Writer) {
				fmt.Fprintf(w, "%s added: %s, %s events\nsigning secret: %s\n%s\n", h.Id, h.Url, eventsText(h.Events), h.Secret, secretNote)
			})
		},
	}
	add.Flags().StringVar(&name, "name", "", "a name for listings")
	add.Flags().StringArrayVar(&events, "event", nil, "send only this event type; repeat it (default: every event)")
	list := &cobra.Command{
		Use:   "list",
		Short: "List endpoints: URL, events, enabled (never their secrets)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.sdk()
			if err != nil {
				return err
			}
			res, err := c.ListWebhooksWithResponse(cmd.Context())
			if err != nil {
				return err
			}
			return a.print(res.JSON200, func(w io.Writer) {
				var rows [][]string
				for _, h := range res.JSON200.Webhooks {
					state := "enabled"
					if !h.Enabled {
						state = "paused"
					}
					rows = append(rows, []string{h.Id, h.Name, h.Url, eventsText(h.Events), state, froog.Text(h.CreatedAt)})
				}
				table(w, []string{"ID", "NAME", "URL", "EVENTS", "STATE", "CREATED"}, rows)
			})
		},
	}
	var url, newName string
	var newEvents []string
	var allEvents, enable, disable bool
	update := &cobra.Command{
		Use:   "update ID",
		Short: "Change an endpoint's URL, name or events, or pause (--disable) and resume it",
		Long: `Change what is given and nothing else. --event replaces the endpoint's events
(--all-events: every event again); --name "" removes its name. --disable pauses
it: it gets no events, and what it had queued is dropped, until --enable.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			body, err := updateBody(cmd.Flags().Changed, url, newName, newEvents, allEvents, enable, disable)
			if err != nil {
				return err
			}
			c, err := a.sdk()
			if err != nil {
				return err
			}
			res, err := c.UpdateWebhookWithResponse(cmd.Context(), args[0], body)
			if err != nil {
				return err
			}
			h := res.JSON200
			return a.print(h, func(w io.Writer) {
				state := "enabled"
				if !h.Enabled {
					state = "paused"
				}
				fmt.Fprintf(w, "%s updated: %s, %s events, %s\n", h.Id, h.Url, eventsText(h.Events), state)
			})
		},
	}
	uf := update.Flags()
	uf.StringVar(&url, "url", "", "send to this https:// URL")
	uf.StringVar(&newName, "name", "", `a name for listings ("" removes it)`)
	uf.StringArrayVar(&newEvents, "event", nil, "send only these event types; repeat it")
	uf.BoolVar(&allEvents, "all-events", false, "send every event type")
	uf.BoolVar(&enable, "enable", false, "resume sending")
	uf.BoolVar(&disable, "disable", false, "pause: send nothing, drop what is queued")
	rotate := &cobra.Command{
		Use:   "rotate ID",
		Short: "A new signing secret (printed once); the old one stops signing now",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.sdk()
			if err != nil {
				return err
			}
			res, err := c.RotateWebhookWithResponse(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			h := res.JSON200
			return a.print(h, func(w io.Writer) {
				fmt.Fprintf(w, "%s has a new signing secret: %s\n%s Requests are signed with it from now on.\n", h.Id, h.Secret, secretNote)
			})
		},
	}
	rm := &cobra.Command{
		Use:   "rm ID",
		Short: "Remove an endpoint and its delivery log",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.sdk()
			if err != nil {
				return err
			}
			res, err := c.DeleteWebhookWithResponse(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.print(res.JSON200, func(w io.Writer) { fmt.Fprintf(w, "%s removed\n", args[0]) })
		},
	}
	test := &cobra.Command{
		Use:   "test ID",
		Short: "Send a ping now and say how it went (exit 1 when it failed)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.sdk()
			if err != nil {
				return err
			}
			res, err := c.TestWebhookWithResponse(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			at := res.JSON200
			if err := a.print(at, func(w io.Writer) {
				fmt.Fprintf(w, "ping %s in %d ms\n", attemptResult(at), at.DurationMs)
			}); err != nil {
				return err
			}
			if at.Status != froog.WebhookAttemptStatusDelivered {
				return exitCode(1)
			}
			return nil
		},
	}
	var limit int
	deliveries := &cobra.Command{
		Use:   "deliveries ID",
		Short: "Recent attempts, newest first: time, event, attempt, result",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.sdk()
			if err != nil {
				return err
			}
			p := &froog.ListWebhookDeliveriesParams{}
			if limit > 0 {
				p.Limit = &limit
			}
			res, err := c.ListWebhookDeliveriesWithResponse(cmd.Context(), args[0], p)
			if err != nil {
				return err
			}
			return a.print(res.JSON200, func(w io.Writer) {
				var rows [][]string
				for _, d := range res.JSON200.Deliveries {
					sandbox := froog.Text(d.Sandbox)
					if sandbox == "" {
						sandbox = "-"
					}
					next := froog.Text(d.NextAttemptAt)
					if next == "" {
						next = "-"
					}
					rows = append(rows, []string{froog.Text(d.CreatedAt), d.Event, sandbox, fmt.Sprint(d.Attempt), attemptResult(&d), next, d.EventId})
				}
				table(w, []string{"TIME", "EVENT", "SANDBOX", "ATTEMPT", "RESULT", "NEXT", "EVENT ID"}, rows)
			})
		},
	}
	deliveries.Flags().IntVar(&limit, "limit", 0, "at most this many attempts (default the API's)")
	c.AddCommand(add, list, update, rotate, rm, test, deliveries)
	return c
}
