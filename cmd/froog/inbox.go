package main

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/spf13/cobra"

	"froog.tech/froog/froog"
)

// failedOldestFirst is the ids of list's failed deliveries (list as the
// API gives it, newest first), oldest first: redelivered in that order,
// they reach the app in the order they first arrived.
func failedOldestFirst(list []froog.Delivery) []string {
	var ids []string
	for _, d := range slices.Backward(list) {
		if d.State == "failed" {
			ids = append(ids, d.Id)
		}
	}
	return ids
}

// lastAnswer is a delivery's last outcome in a listing: the app's status,
// else what failed.
func lastAnswer(d *froog.Delivery) string {
	switch {
	case d.LastStatus != 0:
		return fmt.Sprint(d.LastStatus)
	case d.LastError != "":
		return d.LastError
	}
	return "-"
}

func (a *app) inboxCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "inbox",
		Short: "A URL's webhook inbox: list its deliveries, redeliver, purge",
		Long: `A URL's webhook inbox (turned on with "inbox" on POST …/urls) answers matching
requests itself once they are stored, then delivers them to the app in arrival
order, at least once, each with its Froog-Delivery id. List a URL's deliveries
(the newest 100), queue finished ones again with their ids, or remove them all.`,
		Example: `  froog inbox list my-box 3000
  froog inbox redeliver my-box 3000 dlv_…
  froog inbox redeliver my-box 3000 --failed   # every failed one, oldest first
  froog inbox purge my-box 3000 -y`,
	}
	list := &cobra.Command{
		Use:   "list NAME PORT",
		Short: "List a URL's deliveries, newest first: state, attempts, last answer",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ds, err := a.deliveries(cmd, args)
			if err != nil {
				return err
			}
			return a.print(ds, func(w io.Writer) {
				var rows [][]string
				for _, d := range ds {
					rows = append(rows, []string{d.Id, string(d.State), fmt.Sprint(d.Attempts), lastAnswer(&d),
						froog.Text(d.ReceivedAt), d.Method + " " + d.Target})
				}
				table(w, []string{"ID", "STATE", "ATTEMPTS", "LAST", "RECEIVED", "REQUEST"}, rows)
			})
		},
	}
	var failed bool
	redeliver := &cobra.Command{
		Use:   "redeliver NAME PORT [ID...]",
		Short: "Queue finished deliveries again, with their ids, after those waiting",
		Long: `Queue delivered or failed deliveries again, after those waiting: the app gets each
with its Froog-Delivery id and the next Froog-Attempt. --failed takes every
failed one of the newest 100, oldest first.`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ids := args[2:]
			switch {
			case failed && len(ids) > 0:
				return errors.New("give delivery ids or --failed, not both")
			case !failed && len(ids) == 0:
				return errors.New("give the ids of the deliveries to redeliver, or --failed")
			}
			if failed {
				ds, err := a.deliveries(cmd, args)
				if err != nil {
					return err
				}
				ids = failedOldestFirst(ds)
			}
			h, port, err := a.sandboxPort(args[0], args[1])
			if err != nil {
				return err
			}
			c, err := a.sdk()
			if err != nil {
				return err
			}
			out := []froog.Delivery{}
			for _, id := range ids {
				res, err := c.RedeliverWithResponse(cmd.Context(), h.Name, port, id)
				if err != nil {
					return err // the API's message names the id
				}
				out = append(out, *res.JSON200)
			}
			return a.print(out, func(w io.Writer) {
				if len(out) == 0 {
					fmt.Fprintln(w, "no failed deliveries")
				}
				for _, d := range out {
					fmt.Fprintf(w, "%s queued again\n", d.Id)
				}
			})
		},
	}
	redeliver.Flags().BoolVar(&failed, "failed", false, "every failed delivery of the newest 100, oldest first")
	var yes bool
	purge := &cobra.Command{
		Use:   "purge NAME PORT",
		Short: "Remove every delivery of a URL, waiting ones too",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			h, port, err := a.sandboxPort(args[0], args[1])
			if err != nil {
				return err
			}
			if !yes {
				if err := a.confirm("purge", fmt.Sprintf("Remove every delivery of %s port %d, those waiting too?", args[0], port)); err != nil {
					return err
				}
			}
			c, err := a.sdk()
			if err != nil {
				return err
			}
			res, err := c.PurgeDeliveriesWithResponse(cmd.Context(), h.Name, port)
			if err != nil {
				return err
			}
			return a.print(res.JSON200, func(w io.Writer) { fmt.Fprintf(w, "%d deliveries removed\n", res.JSON200.Purged) })
		},
	}
	purge.Flags().BoolVarP(&yes, "yes", "y", false, "skip the prompt")
	c.AddCommand(list, redeliver, purge)
	return c
}

// deliveries lists the deliveries of the URL that args (NAME PORT …)
// name, newest first.
func (a *app) deliveries(cmd *cobra.Command, args []string) ([]froog.Delivery, error) {
	h, port, err := a.sandboxPort(args[0], args[1])
	if err != nil {
		return nil, err
	}
	c, err := a.sdk()
	if err != nil {
		return nil, err
	}
	res, err := c.ListDeliveriesWithResponse(cmd.Context(), h.Name, port)
	if err != nil {
		return nil, err
	}
	return *res.JSON200, nil
}
