package main

import (
	"io"
	"time"

	"github.com/spf13/cobra"

	"froog.tech/froog/froog"
)

// historyPoll is how often history -f reads a running command's output.
const historyPoll = time.Second

func (a *app) historyCmd() *cobra.Command {
	var stderr, follow bool
	var limit int
	c := &cobra.Command{
		Use:   "history NAME [CMD_ID]",
		Short: "Past commands and their output, also while the sandbox is stopped",
		Long: `Without CMD_ID, list the sandbox's recorded commands (exec and background
commands run through froog), newest first. With CMD_ID, print that command's
stored stdout (--stderr: its stderr); with -f, follow it until it ends and exit
with its exit code. The history is kept while the sandbox is stopped; nothing
is recorded for a sandbox made with monitoring off.`,
		Example: `  froog history my-box
  froog history my-box cmd_3f2a9c1d8e7b6a50 --stderr
  froog history my-box job_3f2a9c1d8e7b6a50 -f`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := a.sandbox(args[0])
			if err != nil {
				return err
			}
			if len(args) == 1 {
				page, err := h.History(cmd.Context(), &froog.ListCommandHistoryParams{Limit: &limit})
				if err != nil {
					return err
				}
				return a.print(page, func(w io.Writer) {
					rows := make([][]string, 0, len(page.Commands))
					for _, r := range page.Commands {
						rows = append(rows, []string{r.Id, string(r.Mode), string(r.Status), froog.Text(r.ExitCode),
							r.StartedAt.Local().Format("Jan 2 15:04:05"), oneLine(r.Command, 80)})
					}
					table(w, []string{"ID", "MODE", "STATUS", "EXIT", "STARTED", "COMMAND"}, rows)
				})
			}
			stream := "stdout"
			if stderr {
				stream = "stderr"
			}
			var all []byte
			for offset := 0; ; {
				out, err := h.CommandLogs(cmd.Context(), args[1], stream, offset)
				if err != nil {
					return err
				}
				if follow && !a.json {
					a.stdout.Write([]byte(out.Data))
				} else {
					all = append(all, out.Data...)
				}
				offset = out.NextOffset
				if out.Done || !follow && out.Data == "" {
					break
				}
				if out.Data == "" {
					select {
					case <-cmd.Context().Done():
						return cmd.Context().Err()
					case <-time.After(historyPoll):
					}
				}
			}
			rec, err := h.Command(cmd.Context(), args[1])
			if err != nil {
				return err
			}
			if err := a.print(map[string]any{"id": rec.Id, "stream": stream, "output": string(all), "status": rec.Status, "exit_code": rec.ExitCode},
				func(w io.Writer) { w.Write(all) }); err != nil {
				return err
			}
			if follow && rec.ExitCode != nil {
				return exitWith(*rec.ExitCode)
			}
			return nil
		},
	}
	c.Flags().BoolVar(&stderr, "stderr", false, "print the command's stderr instead of its stdout")
	c.Flags().BoolVarP(&follow, "follow", "f", false, "follow a running command until it ends; exit with its exit code")
	c.Flags().IntVar(&limit, "limit", 50, "list at most this many (1-200)")
	return c
}

// oneLine is s on one line, cut to at most n runes.
func oneLine(s string, n int) string {
	r := []rune(s)
	for i, c := range r {
		if c == '\n' || c == '\r' || c == '\t' {
			r[i] = ' '
		}
	}
	if len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return string(r)
}
