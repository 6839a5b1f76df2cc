package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"froog.tech/froog/froog"
)

func (a *app) snapshotCmd() *cobra.Command {
	var name, del string
	var deleteAuto bool
	c := &cobra.Command{
		Use:   "snapshot NAME",
		Short: "Save a sandbox's disk",
		Long: `Save a sandbox's disk. With --name the snapshot is a saved one, kept until you
delete it and usable as a template (froog new --from NAME); saving a name
again replaces it once the new copy is ready.`,
		Example: `  froog snapshot my-box --name before-upgrade
  froog snapshot my-box --delete snap_3f2a9c1d   # delete one of its snapshots
  froog snapshot my-box --delete-auto            # delete its automatic snapshots`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := a.sandbox(args[0])
			if err != nil {
				return err
			}
			if del != "" {
				if name != "" || deleteAuto {
					return errors.New("--delete, --delete-auto and --name: choose one")
				}
				if _, err := a.client.DeleteSandboxSnapshotWithResponse(cmd.Context(), args[0], del); err != nil {
					return err
				}
				return a.print(map[string]any{"id": del, "deleted": true}, func(w io.Writer) { fmt.Fprintf(w, "%s deleted\n", del) })
			}
			if deleteAuto {
				if name != "" {
					return errors.New("--delete-auto and --name: choose one")
				}
				if _, err := a.client.DeleteAutoSnapshotsWithResponse(cmd.Context(), args[0]); err != nil {
					return err
				}
				return a.print(map[string]any{"name": args[0], "deleted": true}, func(w io.Writer) {
					fmt.Fprintf(w, "deleted %s's automatic snapshots\n", args[0])
				})
			}
			snap, err := h.Snapshot(cmd.Context(), name)
			if err != nil {
				return err
			}
			return a.print(snap, func(w io.Writer) {
				fmt.Fprintf(w, "%s %s\n", froog.Text(snap.Id), froog.Text(snap.Status))
			})
		},
	}
	c.Flags().StringVar(&name, "name", "", "save it under this name")
	c.Flags().StringVar(&del, "delete", "", "delete this snapshot of the sandbox (an id or its name) instead")
	c.Flags().BoolVar(&deleteAuto, "delete-auto", false, "delete its automatic snapshots instead")
	return c
}

func (a *app) snapshotsCmd() *cobra.Command {
	var rm string
	var all bool
	c := &cobra.Command{
		Use:   "snapshots [NAME]",
		Short: "List a sandbox's snapshots, or your saved snapshots",
		Example: `  froog snapshots my-box        # its snapshots
  froog snapshots               # your saved snapshots
  froog snapshots --rm web-stack
  froog snapshots --all         # every snapshot of every sandbox`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.sdk()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			var list *[]froog.Snapshot
			switch {
			case rm != "":
				if len(args) > 0 || all {
					return errors.New("--rm takes a saved snapshot's name alone")
				}
				if _, err := c.DeleteSavedSnapshotWithResponse(ctx, rm); err != nil {
					return err
				}
				return a.print(map[string]any{"name": rm, "deleted": true}, func(w io.Writer) { fmt.Fprintf(w, "%s deleted\n", rm) })
			case all:
				res, err := c.ListSnapshotsWithResponse(ctx)
				if err != nil {
					return err
				}
				list = res.JSON200
			case len(args) == 1:
				res, err := c.ListSandboxSnapshotsWithResponse(ctx, args[0])
				if err != nil {
					return err
				}
				list = res.JSON200
			default:
				res, err := c.ListSavedSnapshotsWithResponse(ctx)
				if err != nil {
					return err
				}
				list = res.JSON200
			}
			return a.print(list, func(w io.Writer) {
				var rows [][]string
				for _, s := range *list {
					rows = append(rows, []string{froog.Text(s.Id), froog.Text(s.Name), froog.Text(s.Sandbox), froog.Text(s.Status), froog.Text(s.CreatedAt)})
				}
				table(w, []string{"ID", "NAME", "SANDBOX", "STATUS", "CREATED"}, rows)
			})
		},
	}
	c.Flags().StringVar(&rm, "rm", "", "delete this saved snapshot")
	c.Flags().BoolVar(&all, "all", false, "every snapshot of every sandbox")
	return c
}
