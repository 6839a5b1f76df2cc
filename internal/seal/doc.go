// Package seal encrypts the secrets the control plane keeps in the store
// (URL tokens, variables, secret files, the setup script, the edges' TLS
// ticket keys): AES-256-GCM
// under the deployment's 32-byte secret key, a random nonce in front of
// each sealed value, and additional data that binds a value to what it is
// (a URL's id, an account and a variable's name …), so that a sealed
// value moved to another place does not open. The API seals and opens;
// hostctl opens what it writes into sandboxes at their start; the edges
// seal and open their ticket keys. The additional data is made here, in one place (the
// *AD functions).
//
// It imports nothing of froog's. Files: seal.go.
package seal
