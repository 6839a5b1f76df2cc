// Package hostctl reconciles the sandboxes of one host towards the desired
// state in the store, through a Driver (hostctl/local for development,
// hostctl/qemu for VMs), and writes back what it observes: the state
// (creating → starting → running → stopping → stopped, or error with a
// reason), the SSH endpoint and pinned host key, the IPv6 address,
// warm_until, and the end
// of each stop. It also enforces the timers: auto-stop, the hard lifetime,
// auto-delete, and the end of the warm window. With a Snapshotter driver
// it takes the snapshots: automatic ones every hour while a sandbox runs
// and at each stop (the newest 3 kept), the saved ones the API asks for,
// restores (the VM stopped first), forks from a snapshot, and the removal
// of deleted ones' files.
//
// At every start of a sandbox that takes the account's environment
// (not environment: false), before it counts as running, hostctl logs in
// to it once with the control key (Options.ControlKey) and writes the
// account's secret files into ~, mode 600, then starts a background
// command (a job, as the API's: package sandboxio) that clones each repo
// whose folder has no checkout yet and runs the setup script from ~ in a
// login shell. Files and script are sealed by the API; hostctl opens them
// with the deployment's secret key (Options.SecretKey, package seal). The
// first boot also applies what the sandbox's create asked for, even
// without the environment: its own files (after the account's), its repo
// (cloned first) and a one-off script (after the account's); then the
// record forgets them (store.FirstBoot), so no later start repeats them. The
// sandbox's setup_status says how it went: none, running, done, failed
// with setup_error. hostctl notices the job's end by looking at it: while
// the setup runs, every SetupPoll (every 10 s after its first minute) it
// reads the job's state from the sandbox's disk over SSH (its exit code,
// and the reason the job's wrapper wrote when it failed); a stop before
// the end records failed, "stopped mid-setup".
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
//   - setup.go: the account's environment at a start (and the sandbox's
//     own first boot): secret files, the setup job, looking at it until
//     it ends.
//   - stop.go: the timers (auto-stop, lifetime, warm window) and stopping.
//   - snapshots.go: automatic and saved snapshots, restores, their files.
//   - driver.go: the Driver interface and its optional parts.
//   - ports.go: the open ports of a running sandbox (its own and its
//     public URLs' TCP ports), handed to a Firewall driver after each
//     start and at each change, which the feed tells of.
//   - progress.go: how far a start has got, as the driver reports it,
//     written on the sandbox (StartStage).
//   - memory.go: watching the host's free memory; warm sandboxes give up
//     their processes when it runs low.
package hostctl
