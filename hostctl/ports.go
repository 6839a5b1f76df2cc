package hostctl

import (
	"context"
	"fmt"
	"slices"

	"froog.tech/froog/store"
)

// Open ports: a running sandbox's firewall lets through its own ports
// and its public URLs' TCP ports (store.EffectivePorts). Both are in
// the store, so the feed says when either changes: a sandbox change
// kicks its worker as any change does, and a URL change kicks the worker
// of the URL's sandbox (watch). The worker remembers what it last had
// the driver open, and asks again only when that differs, or after a
// start (a boot, or a driver that lost its rules when it restarted).

// openPorts has a Firewall driver open sb's effective ports, unless they
// are what it opened last. Other drivers have no firewall: the ports
// stay in the store, and nothing is asked.
func (c *Controller) openPorts(ctx context.Context, sb *store.Sandbox, w *worker) error {
	fw, ok := c.o.Driver.(Firewall)
	if !ok {
		return nil
	}
	urls, err := c.o.Store.URLs(ctx, sb.ID)
	if err != nil {
		return fmt.Errorf("open ports: %w", err)
	}
	c.mu.Lock()
	for _, u := range urls {
		c.urlOwners[u.ID] = sb.ID
	}
	c.mu.Unlock()
	ports := store.EffectivePorts(sb.Ports, urls)
	if w.portsOpen && slices.Equal(ports, w.ports) {
		return nil
	}
	if err := fw.OpenPorts(ctx, sb, ports); err != nil {
		return fmt.Errorf("open ports: %w", err)
	}
	w.ports, w.portsOpen = ports, true
	return nil
}

// urlChanged kicks the worker of the sandbox whose URL changed, when it
// has one on this host: a URL made public, private, or removed changes
// what its sandbox's firewall lets through.
func (c *Controller) urlChanged(ctx context.Context, ch store.Change) {
	if _, ok := c.o.Driver.(Firewall); !ok {
		return
	}
	c.mu.Lock()
	id := c.urlOwners[ch.ID]
	if ch.URL != nil {
		id = ch.URL.SandboxID
	}
	if ch.URL == nil {
		delete(c.urlOwners, ch.ID)
	}
	_, here := c.workers[id]
	c.mu.Unlock()
	if here {
		c.kick(ctx, id)
	}
}
