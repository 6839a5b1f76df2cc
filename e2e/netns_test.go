package e2e_test

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"froog.tech/froog/internal/browser"
)

// netCluster is a network the test makes: a bridge in the root namespace
// (address gw, which the test's clients and its Postgres forwarder use)
// and one network namespace per node, each with an IPv4 and an IPv6
// address of its own on the bridge, as machines on a LAN.
type netCluster struct {
	t     *testing.T
	id    string            // names' prefix, unique to this process and call
	gw    string            // the bridge's address
	addr  map[string]string // node → its address
	addr6 map[string]string // node → its IPv6 address
}

// clusters counts this process's newCluster calls: a test's names are
// never an earlier test's, whose namespaces may still be going.
var clusters atomic.Int32

func ipRun(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// newCluster makes the bridge and a namespace per node; everything is
// deleted when the test ends, failed or not (namespaces' processes
// killed first: a killed froogd's sandboxes' processes outlive it).
func newCluster(t *testing.T, nodes ...string) *netCluster {
	// Taken first: the scan for a free subnet and the bridge are one step
	// for every process that takes it, and it is let go last, after the
	// bridge is gone.
	browser.ChangingNetwork(t) // no Chromium test of another package loads a page meanwhile
	pid := os.Getpid()
	c := &netCluster{t: t, id: fmt.Sprintf("fc%04x%d", pid&0xffff, clusters.Add(1)), addr: map[string]string{}, addr6: map[string]string{}}
	// A /24 of 10.251/16 that no interface here has (another run's).
	k := -1
	for i := 0; i < 250 && k < 0; i++ {
		cand := (pid + i) % 250
		if out, err := exec.Command("ip", "-4", "addr", "show", "to", fmt.Sprintf("10.251.%d.0/24", cand)).Output(); err == nil && len(strings.TrimSpace(string(out))) == 0 {
			k = cand
		}
	}
	if k < 0 {
		t.Fatal("no free /24 in 10.251.0.0/16 for the cluster's bridge")
	}
	// IPv6: a /64 named after the /24, each node's address ending in the
	// digits of its IPv4 one (fd00:251:K::10 beside 10.251.K.10).
	subnet, subnet6 := fmt.Sprintf("10.251.%d", k), fmt.Sprintf("fd00:251:%d:", k)
	c.gw = subnet + ".1"
	br := c.id + "br"
	t.Cleanup(func() {
		for i, n := range nodes {
			ns := c.ns(n)
			if out, err := exec.Command("ip", "netns", "pids", ns).Output(); err == nil {
				for _, p := range strings.Fields(string(out)) {
					var id int
					fmt.Sscan(p, &id)
					if id > 0 {
						syscall.Kill(id, syscall.SIGKILL)
					}
				}
			}
			// The pair goes at once (a namespace's own teardown may lag).
			exec.Command("ip", "link", "del", fmt.Sprintf("%sh%d", c.id, i)).Run()
			exec.Command("ip", "netns", "del", ns).Run()
		}
		exec.Command("ip", "link", "del", br).Run()
	})
	ipRun(t, "ip", "link", "add", br, "type", "bridge")
	ipRun(t, "ip", "addr", "add", c.gw+"/24", "dev", br)
	ipRun(t, "ip", "link", "set", br, "up")
	for i, n := range nodes {
		ns, host, peer := c.ns(n), fmt.Sprintf("%sh%d", c.id, i), fmt.Sprintf("%sn%d", c.id, i)
		c.addr[n], c.addr6[n] = fmt.Sprintf("%s.%d", subnet, 10+i), fmt.Sprintf("%s:%d", subnet6, 10+i)
		ipRun(t, "ip", "netns", "add", ns)
		ipRun(t, "ip", "link", "add", host, "type", "veth", "peer", "name", peer)
		ipRun(t, "ip", "link", "set", peer, "netns", ns)
		ipRun(t, "ip", "link", "set", host, "master", br, "up")
		ipRun(t, "ip", "-n", ns, "addr", "add", c.addr[n]+"/24", "dev", peer)
		// nodad: usable at once, not after a second of duplicate detection.
		ipRun(t, "ip", "-n", ns, "addr", "add", c.addr6[n]+"/64", "dev", peer, "nodad")
		ipRun(t, "ip", "-n", ns, "link", "set", peer, "up")
		ipRun(t, "ip", "-n", ns, "link", "set", "lo", "up")
	}
	return c
}

func (c *netCluster) ns(node string) string { return c.id + "-" + node }

// start runs froogd in node's namespace (ip netns exec execs it: the
// process is froogd's own).
func (c *netCluster) start(node string, re *regexp.Regexp, args ...string) *proc {
	c.t.Helper()
	cmd := exec.Command("ip", append([]string{"netns", "exec", c.ns(node), froogd}, args...)...)
	p, _ := startCmd(c.t, re, cmd, args)
	return p
}
