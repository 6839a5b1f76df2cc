// Package hostctl reconciles the sandboxes of one host towards the desired
// state in the store, through a Driver (hostctl/local for development,
// hostctl/qemu for VMs), and writes back what it observes: the state
// (creating → starting → running → stopping → stopped, or error with a
// reason), the SSH endpoint and pinned host key, warm_until, and the end
// of each stop. It also enforces the timers: auto-stop, the hard lifetime,
// auto-delete, and the end of the warm window.
//
// It reads intent from the store's change feed and rescans regularly, so
// a missed event heals. It must not import api or edge.
package hostctl
