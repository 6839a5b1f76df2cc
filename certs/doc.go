// Package certs gives the edge its certificates through
// tls.Config.GetCertificate.
//
// Today it has the local CA that `froogd dev` uses: a root created once in
// the data folder (ca.pem, for curl --cacert and browsers), and a leaf
// issued on first use for each name under the allowed domains, cached in
// memory. On-demand ACME issuance with certmagic, storage in the store and
// wildcard certificates are the certificates issue's.
package certs
