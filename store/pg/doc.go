// Package pg is the Postgres store (pgx/v5): the store for production and
// for several edges and host controllers sharing one database.
//
// The schema is versioned SQL embedded in the binary (Migrate). Records are
// kept as JSON documents beside the columns that constraints and queries
// need. The change feed is a table written in the same transaction as the
// change, in commit order, with NOTIFY to wake subscribers; a dropped
// LISTEN connection is redialled and subscribers re-read from their last
// sequence number, so nothing is missed.
//
// Tests get a migrated schema of their own from store/pg/pgtest, which is
// a package apart so that the binary does not link package testing.
package pg
