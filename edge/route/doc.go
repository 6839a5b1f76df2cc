// Package route owns the names and the routes of public URLs: the host
// grammar (NAME-PORT-RAND or a chosen subdomain under the public domain,
// and the names froog keeps for itself), which the API uses to make names
// and the edge to read them; the route table, loaded whole from the store
// and kept current from its change feed, read without locks; each route's
// token check; each sandbox's state and auto_start, which the edge's
// hold on a stopped sandbox needs; and Owner, which tells certs whether a
// name may have a certificate.
//
// It reads the store; it must not import edge, api or certs, and knows
// nothing of HTTP.
package route
