// Package certs gives the edge its certificates through
// tls.Config.GetCertificate, from one of three sources, chosen by Open
// from a Config (source.go) that froogd fills from flags:
//
//   - ACME on demand (acme.go): certmagic orders a certificate on a URL
//     host's first visit; the decision comes from the edge's route table,
//     orders are budgeted per account in the store, and certificates,
//     ACME accounts, challenge answers and locks live in the store
//     (storage.go), shared by every edge.
//   - An operator's wildcard for *.DOMAIN (wildcard.go), reread when it
//     changes.
//   - The local CA (localca.go) that `froogd dev` and tests use: a root
//     created once in the data folder (ca.pem), a leaf per name, cached
//     (least recently used out past a bound); with a decision function
//     (the edge's route table, as for ACME), only for names that route.
//
// Readiness for the edge's /readyz, whether a source can give
// certificates now, is check.go's.
//
// The edge asks; certs never serves HTTP itself, but answers the ACME
// challenges the edge hands it.
package certs
