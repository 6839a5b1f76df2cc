package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"froog.tech/froog/store"
)

// hostsConfig is froogd admin hosts' configuration: list the hosts, or
// drain or undrain one.
type hostsConfig struct {
	Store    adminStoreConfig
	Host     string
	Stop     bool
	DownSecs int
	action   string // list, drain or undrain
}

func (c *hostsConfig) bind(f flags) {
	c.Store.bind(f)
	if c.action == "list" {
		f.num(&c.DownSecs, "host-down-secs", 30, "a host silent this long shows as silent (hostctl's --host-down-secs marks it down)")
		return
	}
	f.str(&c.Host, "host", "", "the host's name (required)")
	if c.action == "drain" {
		f.BoolVar(&c.Stop, "stop", false, "also stop the host's running sandboxes now (else they stop at their own timers)")
	}
}

func (c *hostsConfig) validate() error {
	if c.action != "list" && c.Host == "" {
		return errors.New("--host is required")
	}
	if c.action == "list" && c.DownSecs < 1 {
		return errors.New("--host-down-secs must be at least 1")
	}
	return nil
}

// runHosts is froogd admin hosts [drain|undrain].
func runHosts(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := hostsConfig{action: "list"}
	if len(args) > 0 && (args[0] == "drain" || args[0] == "undrain") {
		c.action, args = args[0], args[1:]
	}
	if err := parseConfig("admin hosts "+c.action, &c, args, stderr); err != nil {
		return err
	}
	st, err := c.Store.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	if c.action == "list" {
		hosts, err := st.Hosts(ctx)
		if err != nil {
			return err
		}
		printHosts(stdout, hosts, time.Now(), time.Duration(c.DownSecs)*time.Second)
		return nil
	}
	h, err := st.SetHostDraining(ctx, c.Host, c.action == "drain")
	if err != nil {
		return err
	}
	if c.action == "undrain" {
		fmt.Fprintf(stdout, "host %s takes new sandboxes again\n", h.Name)
		return nil
	}
	fmt.Fprintf(stdout, "host %s is draining: no new sandboxes are placed on it\n", h.Name)
	if !c.Stop {
		return nil
	}
	list, err := st.HostSandboxes(ctx, h.ID)
	if err != nil {
		return err
	}
	n := 0
	for _, sb := range list {
		if sb.HostID != h.ID || sb.DeletedAt != nil || sb.DesiredState != store.StateRunning {
			continue
		}
		now := store.Micro(time.Now())
		ev := &store.AuditEvent{AccountID: sb.AccountID, At: now, Action: "sandbox.stop", Target: sb.Name, Actor: "admin: drain host " + h.Name}
		if _, err := st.StopSandbox(ctx, sb.ID, now, ev); err != nil && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("stop sandbox %s: %w", sb.ID, err)
		}
		n++
	}
	fmt.Fprintf(stdout, "asked %d running sandboxes on %s to stop\n", n, h.Name)
	return nil
}

// printHosts writes the hosts as a table. A host's state is down (marked
// so), silent (no heartbeat for downAfter, not marked yet) or up, and
// ",draining" when it takes no new sandboxes.
func printHosts(w io.Writer, hosts []store.Host, now time.Time, downAfter time.Duration) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tADDRESS\tSTATE\tCAPACITY\tSANDBOXES\tLAST HEARTBEAT")
	for _, h := range hosts {
		state := "up"
		switch {
		case h.DownAt != nil:
			state = "down"
		case now.Sub(h.SeenAt) > downAfter:
			state = "silent"
		}
		if h.Draining {
			state += ",draining"
		}
		addr := h.Address
		if addr == "" {
			addr = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s (%s ago)\n", h.Name, addr, state, h.Capacity, h.Sandboxes,
			h.SeenAt.UTC().Format(time.RFC3339), now.Sub(h.SeenAt).Truncate(time.Second))
	}
	tw.Flush()
}

// hostsCollector reports the hosts on every scrape of a hostctl's
// /metrics, as the store has them: how many are in each state, and
// each host's capacity and sandboxes. A store that does not answer
// within the scrape gives none of these (the store check says why).
type hostsCollector struct {
	st interface {
		Hosts(context.Context) ([]store.Host, error)
	}
	downAfter time.Duration
}

var (
	hostsDesc         = prometheus.NewDesc("froog_hosts", "Hosts by state: up, silent (no heartbeat for --host-down-secs, not marked yet) or down; draining ones also counted as draining=\"true\".", []string{"state", "draining"}, nil)
	hostCapacityDesc  = prometheus.NewDesc("froog_host_capacity", "A host's capacity (sandboxes).", []string{"host"}, nil)
	hostSandboxesDesc = prometheus.NewDesc("froog_host_sandboxes", "Sandboxes placed on a host, deleted ones aside.", []string{"host"}, nil)
)

func (c hostsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- hostsDesc
	ch <- hostCapacityDesc
	ch <- hostSandboxesDesc
}

func (c hostsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	hosts, err := c.st.Hosts(ctx)
	if err != nil {
		return
	}
	now := time.Now()
	counts := map[[2]string]int{}
	for _, s := range []string{"up", "silent", "down"} {
		for _, d := range []string{"false", "true"} {
			counts[[2]string{s, d}] = 0
		}
	}
	for _, h := range hosts {
		state := "up"
		switch {
		case h.DownAt != nil:
			state = "down"
		case now.Sub(h.SeenAt) > c.downAfter:
			state = "silent"
		}
		counts[[2]string{state, strconv.FormatBool(h.Draining)}]++
		ch <- prometheus.MustNewConstMetric(hostCapacityDesc, prometheus.GaugeValue, float64(h.Capacity), h.Name)
		ch <- prometheus.MustNewConstMetric(hostSandboxesDesc, prometheus.GaugeValue, float64(h.Sandboxes), h.Name)
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(hostsDesc, prometheus.GaugeValue, float64(n), k[0], k[1])
	}
}
