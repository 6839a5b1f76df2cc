// Package certs will give the edge its certificates through
// tls.Config.GetCertificate: on-demand issuance guarded by a decision
// function, storage in the store (store.CertStorage) shared by every edge,
// and a local CA for development.
//
// Not built yet (its own issue).
package certs
