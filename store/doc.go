// Package store owns froog's data model and the Store interface the API
// writes through, plus the narrow read interfaces and the change feed that
// the edge and hostctl use.
//
// The store is the bus: the API writes intent, hostctl writes observed
// state, the edge reads routes, and every committed change to sandboxes,
// urls, url tokens and desktop links is published, in commit order, on the
// change feed. Two implementations share one conformance suite
// (store/storetest): store/pg for production and several nodes, and
// store/embedded for one machine.
//
// store must not import net/http or any package that knows about HTTP.
package store
