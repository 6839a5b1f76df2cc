package hostctl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"froog.tech/froog/store"
)

// watchMemory reads the host's available memory every MemoryCheck and,
// when it is below MinFreeMemory, asks warm sandboxes to give up their
// processes.
func (c *Controller) watchMemory(ctx context.Context) {
	defer c.wg.Done()
	tick := time.NewTicker(c.o.MemoryCheck)
	defer tick.Stop()
	warned := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		short, err := c.relieve(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			c.o.Logger.Warn("memory check", slog.String("error", err.Error()))
		case short && !warned:
			c.o.Logger.Warn("host low on memory, and no warm sandbox is left to give up its process")
		}
		warned = short
	}
}

// relieve releases warm sandboxes one at a time, the longest stopped
// first, until the host has MinFreeMemory available. It reports whether
// memory is still short when none is left to release.
func (c *Controller) relieve(ctx context.Context) (bool, error) {
	tried := map[string]bool{} // each once: one that failed is not asked again at once
	for ctx.Err() == nil {
		avail, err := c.o.MemAvailable()
		if err != nil {
			return false, err
		}
		if avail >= c.o.MinFreeMemory {
			return false, nil
		}
		list, err := c.o.Store.HostSandboxes(ctx, c.hostID)
		if err != nil {
			return false, err
		}
		c.mu.Lock()
		list = slices.DeleteFunc(list, func(sb store.Sandbox) bool {
			return sb.HostID != c.hostID || sb.DeletedAt != nil || sb.DesiredState != store.StateStopped ||
				sb.State != store.StateStopped || sb.WarmUntil == nil || sb.StoppedAt == nil || c.released[sb.ID] || tried[sb.ID]
		})
		c.mu.Unlock()
		if len(list) == 0 {
			return true, nil
		}
		oldest := slices.MinFunc(list, func(a, b store.Sandbox) int { return a.StoppedAt.Compare(*b.StoppedAt) })
		tried[oldest.ID] = true
		done := make(chan struct{})
		c.mu.Lock()
		c.releases[oldest.ID] = done
		c.mu.Unlock()
		c.kick(ctx, oldest.ID)
		select {
		case <-done:
		case <-ctx.Done():
		}
	}
	return false, ctx.Err()
}

// memAvailable reads MemAvailable from /proc/meminfo.
func memAvailable() (uint64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	return parseMemAvailable(string(b))
}

// parseMemAvailable finds "MemAvailable: N kB" in meminfo's text and
// returns N KiB in bytes.
func parseMemAvailable(meminfo string) (uint64, error) {
	for line := range strings.Lines(meminfo) {
		name, rest, ok := strings.Cut(line, ":")
		if !ok || name != "MemAvailable" {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("meminfo: MemAvailable is %q, want N kB", strings.TrimSpace(rest))
		}
		kb, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil || kb > math.MaxUint64/1024 {
			return 0, fmt.Errorf("meminfo: MemAvailable %q is not a number of kB", f[0])
		}
		return kb * 1024, nil
	}
	return 0, errors.New("meminfo: no MemAvailable line")
}
