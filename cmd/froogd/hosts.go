package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

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
