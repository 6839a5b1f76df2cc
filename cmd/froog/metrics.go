package main

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"froog.tech/froog/froog"
)

// gb writes bytes as the docs' CLI does: decimal gigabytes, one place.
func gb(n int64) string { return fmt.Sprintf("%.1f GB", float64(n)/1e9) }

func percentOf(used, total int64) string {
	if total <= 0 {
		return "0%"
	}
	return fmt.Sprintf("%.0f%%", 100*float64(used)/float64(total))
}

func (a *app) metricsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "metrics NAME",
		Short: "CPU, memory, disk and network of a running sandbox, read now",
		Long: `Read a running sandbox's numbers now (it takes about a second): CPU use over
half a second, memory, the root disk, network bytes since boot (all interfaces
but loopback) and disk I/O pressure. A stopped sandbox answers sandbox_stopped.
For history over time, use the OpenTelemetry export.`,
		Example: `  froog metrics ci-1
  froog metrics ci-1 --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := a.sandbox(args[0])
			if err != nil {
				return err
			}
			m, err := h.Metrics(cmd.Context())
			if err != nil {
				return err
			}
			return a.print(m, func(w io.Writer) { writeMetrics(w, m) })
		},
	}
}

func writeMetrics(w io.Writer, m *froog.Metrics) {
	fmt.Fprintf(w, "cpu %.1f%% of %d vCPU\n", m.CpuPercent, m.CpuCount)
	fmt.Fprintf(w, "memory %s of %s (%s)\n", gb(m.MemoryUsedBytes), gb(m.MemoryTotalBytes), percentOf(m.MemoryUsedBytes, m.MemoryTotalBytes))
	fmt.Fprintf(w, "disk %s of %s (%s)\n", gb(m.DiskUsedBytes), gb(m.DiskTotalBytes), percentOf(m.DiskUsedBytes, m.DiskTotalBytes))
	fmt.Fprintf(w, "network %s in, %s out since boot\n", gb(m.NetworkRxBytes), gb(m.NetworkTxBytes))
	if m.IoPressure != nil {
		fmt.Fprintf(w, "io wait %.0f%% of the last minute waiting on disk\n", *m.IoPressure)
	} else {
		fmt.Fprintln(w, "io wait unknown (the kernel has no pressure stall information)")
	}
}

func (a *app) psCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "ps NAME",
		Short: "A sandbox's processes, busiest first",
		Long: `List a running sandbox's processes live, the busiest first (CPU over half a
second, as a share of all its CPUs), at most 100. A stopped sandbox shows its
busiest 12 as it stopped (kept 7 days), under a line that says so; without
them it answers sandbox_stopped.`,
		Example: `  froog ps my-box
  froog ps my-box --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := a.sandbox(args[0])
			if err != nil {
				return err
			}
			ps, err := h.Processes(cmd.Context())
			if err != nil {
				return err
			}
			return a.print(ps, func(w io.Writer) {
				if !ps.Live {
					fmt.Fprintf(w, "not running: its processes as it stopped, %s\n", ps.SampledAt.Format(time.RFC3339))
				}
				rows := make([][]string, 0, len(ps.Processes))
				for _, p := range ps.Processes {
					command := p.Command
					if command == "" {
						command = "[" + p.Name + "]"
					}
					if len(command) > 120 {
						command = command[:120] + "…"
					}
					rows = append(rows, []string{strconv.Itoa(p.Pid), strconv.Itoa(p.Ppid), p.State,
						fmt.Sprintf("%.1f", p.CpuPercent), fmt.Sprintf("%.0f", float64(p.MemoryBytes)/1e6), command})
				}
				table(w, []string{"PID", "PPID", "S", "CPU%", "MEM MB", "COMMAND"}, rows)
			})
		},
	}
}
