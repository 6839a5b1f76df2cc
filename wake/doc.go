// Package wake is the one "start it and wait until it answers": a
// stopped sandbox with auto_start is asked to start through the store
// (store.AutoStart: the limits of a start, one sandbox.auto_start audit
// event), then waited for until the change feed says it runs — no poll:
// the wait sleeps on the feed's signal — and then, when the asker needs
// a port, until a dial through the tunnel reaches it. Concurrent asks
// for one sandbox share one start. The edge's hold (a request to a URL),
// the API's exec, jobs, files and wait use it, each with its timeout
// from the docs (URLTimeout, CallTimeout, wait's own).
//
// Files:
//   - wake.go: the Waker, its asks and errors, the timeouts;
//   - follow.go: Follower, a Feed over a store's change feed for a
//     process without a route table (the API).
//
// Wake imports the store's types and nothing of HTTP, the API or the
// edge (arch_test.go): its callers adapt what they know (the edge's
// route table, the API's store) to its Feed.
package wake
