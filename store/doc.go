// Package store owns froog's data model and the Store interface the API
// writes through, plus the narrow read interfaces and the change feed that
// the edge and hostctl use.
//
// The store is the bus: the API writes intent, hostctl writes observed
// state, the edge reads routes, and every committed change to sandboxes,
// urls, url tokens, desktop links and snapshots is published, in commit order, on the
// change feed. Two implementations share one conformance suite
// (store/storetest): store/pg for production and several nodes, and
// store/embedded for one machine. What the two must decide alike is
// decided here, once: PutURLIn makes every decision of a URL write (name,
// limits, viewer tokens) and leaves the implementation its persistence;
// CheckURLToken, SandboxFilter.Match, StartsRunning, NewStop and
// LiveTokens do the same for parts of the token and sandbox writes, and
// CheckPortsIn for a sandbox's open ports (sorted, once each, at most
// MaxPortsPerSandbox with its public URLs' TCP ports, which PutURLIn
// counts too, under the same sandbox lock).
//
// store must not import net/http or any package that knows about HTTP.
package store
