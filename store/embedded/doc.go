// Package embedded is the store for one machine: everything is held in
// memory and every commit is appended, as JSON lines, to a log file in the
// data folder and synced before it is visible, so a restart loses nothing.
// The log is compacted when the store is opened.
//
// It implements store.Store and store.CertStorage and passes the same
// conformance suite as store/pg. It is not for several processes: a lock
// file keeps a second one out.
package embedded
