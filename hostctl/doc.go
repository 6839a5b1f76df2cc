// Package hostctl will reconcile sandboxes' VMs towards the desired state
// in the store through a Driver (hostctl/qemu, hostctl/local), and write
// back what it observes.
//
// Not built yet (its own issue). Until it is, sandboxes created through the
// API stay in state "creating".
package hostctl
