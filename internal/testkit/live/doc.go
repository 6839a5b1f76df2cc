// Package live is the live-sandbox rig tests share: sandboxes that really
// run (hostctl with the local driver, on this machine) and the tunnel to
// them, on a store the test opens (EmbeddedStore, or Postgres from
// store/pg/pgtest). Only tests import it.
package live
