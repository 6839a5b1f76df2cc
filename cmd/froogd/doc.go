// Command froogd is froog's one binary. It only wires packages together:
//
//	froogd dev                          every role in one process: embedded store, no setup
//	froogd api                          the /v1 API against Postgres
//	froogd edge                         the public-URL edge against Postgres
//	froogd hostctl                      the sandboxes of one host
//	froogd migrate                      bring the Postgres schema up to date
//	froogd admin create-account         make an account (self-hosting)
//	froogd admin api-key create         make an API key for an account
//
// Every flag has a FROOG_* environment equivalent (--api-addr is
// FROOG_API_ADDR); flags win.
//
// Each role has one typed config (edgeConfig, apiConfig, hostctlConfig,
// devConfig, …) whose bind maps flags to fields and whose validate reports
// every problem at once. startEdge, startAPI and startHostctl build a role
// from its config and the parts a process shares (store, control key,
// tunnel, metrics registry, logger, listeners) and add its goroutines to
// the process (wiring.go); froogd dev calls all three, the other commands
// one. The choice of certificate source is certs.Open's.
//
// Files by role: main.go (the commands), edge.go, api.go, hostctl.go,
// dev.go, admin.go (admin and migrate), hosts.go (admin hosts: list,
// drain, undrain), desktop.go (froog-desktop, when froogd runs under that
// name: package guest), flags.go (flags and FROOG_*), envexample.go (the
// Debian package's example environment files, from the flags),
// wiring.go (the process, shared parts, listeners), views.go (the
// desktop server's adapters to the route table and the store), notify.go (systemd's
// sd_notify), pprof.go (profiles, in a build with -tags pprof),
// testclock.go (a clock run ahead for tests, in a build with -tags
// froogtest; testclock_release.go is the real clock of every other
// build) and testwebhooks.go (a test build's webhook sender, which may
// trust the test's receiver on loopback; testwebhooks_release.go is the
// strict one of every other build).
package main
