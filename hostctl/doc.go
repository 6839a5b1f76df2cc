// Package hostctl reconciles the sandboxes of one host towards the desired
// state in the store, through a Driver (hostctl/local for development,
// hostctl/qemu for VMs), and writes back what it observes: the state
// (creating → starting → running → stopping → stopped, or error with a
// reason), the SSH endpoint and pinned host key, warm_until, and the end
// of each stop. It also enforces the timers: auto-stop, the hard lifetime,
// auto-delete, and the end of the warm window. With a Snapshotter driver
// it takes the snapshots: automatic ones every hour while a sandbox runs
// and at each stop (the newest 3 kept), the saved ones the API asks for,
// restores (the VM stopped first), forks from a snapshot, and the removal
// of deleted ones' files.
//
// It reads intent from the store's change feed and rescans regularly, so
// a missed event heals. It must not import api or edge.
//
// Several hosts share one store. Each controller registers its host (name,
// capacity, the address its sandboxes are reached at) and beats every
// Heartbeat; an unplaced sandbox is placed by the store (store.PickHost:
// the live, undrained host with the most free room), whichever controller
// asks first. Every controller also marks down the hosts silent for
// DownAfter, whose sandboxes then go to error saying so; the host's next
// heartbeat brings it back, and its controller starts again what should
// run.
//
// The files, by concern:
//
//   - hostctl.go: the Controller, its options and Run.
//   - heartbeat.go: the host's registration and heartbeat, and marking
//     silent hosts down.
//   - feed.go: following the change feed and rescans; one worker per
//     sandbox, woken by its changes and its timers.
//   - reconcile.go: the state machine for one sandbox: placement, start,
//     fork, failure, erase.
//   - stop.go: the timers (auto-stop, lifetime, warm window) and stopping.
//   - snapshots.go: automatic and saved snapshots, restores, their files.
//   - driver.go: the Driver interface and its optional parts.
//   - progress.go: how far a start has got, as the driver reports it,
//     written on the sandbox (StartStage).
//   - memory.go: watching the host's free memory; warm sandboxes give up
//     their processes when it runs low.
package hostctl
