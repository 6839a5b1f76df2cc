// Package requestid makes the ids of requests that the API and the edge
// send back in X-Request-Id and write in their logs: one format for both,
// so that an id a user quotes can be found in either.
package requestid

import (
	"crypto/rand"
	"encoding/hex"
)

// New returns a new request id: req_ and 16 hex digits.
func New() string {
	var b [8]byte
	rand.Read(b[:])
	return "req_" + hex.EncodeToString(b[:])
}
