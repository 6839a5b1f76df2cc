package hostctl

import (
	"context"

	"froog.tech/froog/store"
)

// Endpoint is where a running sandbox's SSH server answers, and the host
// key it must present.
type Endpoint struct {
	Host    string
	Port    int
	HostKey string // authorized_keys format
	// IPv6 is the sandbox's own IPv6 address, where its open ports
	// answer (Firewall); "" when the driver gives it none.
	IPv6 string
}

// Driver runs sandboxes on one host. Every method is idempotent: hostctl
// calls it again after a restart or a missed event, and the driver answers
// for the state the sandbox is really in.
type Driver interface {
	// Start boots the sandbox (creating it the first time), resumes it
	// when paused, or finds it running; it returns its SSH endpoint. keys
	// are the account's SSH keys (authorized_keys lines): from this start
	// on, they and the control plane's key may log in as user.
	Start(ctx context.Context, sb *store.Sandbox, keys []string) (Endpoint, error)
	// Stop ends the sandbox's processes; its disk stays.
	Stop(ctx context.Context, sb *store.Sandbox) error
	// Delete ends it and removes everything it has on the host.
	Delete(ctx context.Context, sb *store.Sandbox) error
}

// Pauser is a Driver that can keep a stopped sandbox warm: Pause freezes
// it so that Start resumes it with every process still running. hostctl
// calls Stop when the warm window has passed.
type Pauser interface {
	Pause(ctx context.Context, sb *store.Sandbox) error
}

// Saver is a Pauser that can keep a paused sandbox warm without its
// process: Save writes the paused sandbox's memory next to its disk and
// ends the process, and the next Start restores it with every process
// still running. Save leaves a sandbox that is not paused as it is.
// hostctl calls it when the host needs memory; a Pauser that cannot save
// is stopped instead, and its next start boots from the disk.
type Saver interface {
	Save(ctx context.Context, sb *store.Sandbox) error
}

// Checker is a Driver that can tell whether a sandbox it runs is still
// alive. hostctl asks at every look at a running sandbox (at least every
// Rescan), and puts one that died on its own in error with the reason; a
// new start boots it again from its disk.
type Checker interface {
	Check(ctx context.Context, sb *store.Sandbox) error
}

// Firewall is a Driver that keeps a firewall in front of its sandboxes'
// IPv6 addresses: inbound, only SSH, ping (and the neighbour discovery
// it needs), replies to the sandbox's own connections and its open ports
// pass. OpenPorts makes ports (sorted, each once) the running sandbox's
// open ports, closing any other, and touches no other sandbox's rules.
// hostctl calls it after each start and whenever the sandbox's ports or
// its public URLs change while it runs.
type Firewall interface {
	OpenPorts(ctx context.Context, sb *store.Sandbox, ports []store.Port) error
}

// KeyMaker is a Driver whose sandboxes' SSH host keys hostctl learns
// before they boot: HostKey makes the key (once) and returns its public
// half, which hostctl pins in the store before Start, so that nothing can
// reach the sandbox unpinned even for a moment.
type KeyMaker interface {
	HostKey(ctx context.Context, sb *store.Sandbox) (string, error)
}

// Forker is a Driver that can start a sandbox from another's disk: Fork
// copies src's disk (running or stopped) to dst, which gets a host key of
// its own. hostctl calls it before each start of a sandbox made as a fork;
// once dst has a disk it does nothing.
type Forker interface {
	Fork(ctx context.Context, src, dst *store.Sandbox) error
}

// Snapshotter is a Driver that keeps copies of its sandboxes' disks on
// this host, each named by its snapshot's id and kept apart from every
// sandbox's own files (a saved snapshot outlives its sandbox). Snapshots
// are whole copies: none depends on another, or on the sandbox's disk.
type Snapshotter interface {
	// Snapshot copies sb's disk to snapshot id and returns the bytes the
	// copy takes. A running sandbox's copy is consistent: the disk as it
	// was at one instant, as after a power cut.
	Snapshot(ctx context.Context, sb *store.Sandbox, id string) (int64, error)
	// Restore replaces sb's disk with snapshot id's. sb must not run:
	// hostctl stops it first, and the driver refuses a running one.
	Restore(ctx context.Context, sb *store.Sandbox, id string) error
	// ForkSnapshot gives dst, which has no disk yet, snapshot id's disk
	// (as Forker.Fork does a sandbox's); once dst has one it does nothing.
	ForkSnapshot(ctx context.Context, id string, dst *store.Sandbox) error
	// DeleteSnapshot removes snapshot id's files; one already gone is no
	// error.
	DeleteSnapshot(ctx context.Context, id string) error
}
