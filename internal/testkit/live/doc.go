// Package live is the live-sandbox rig tests share: sandboxes that really
// run (hostctl with the local driver, on this machine) and the tunnel to
// them, on a store the test opens. Only tests import it.
package live
