// Package route owns the routes of public URLs: the route table, loaded
// whole from the store and kept current from its change feed, read
// without locks; each route's token check; each sandbox's state and
// auto_start, which the edge's hold on a stopped sandbox needs; and
// Owner, which tells certs whether a name may have a certificate. Host
// names are read with package names, which holds their grammar.
//
// It reads the store; it must not import edge, api or certs, and knows
// nothing of HTTP.
package route
