package testkit

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"testing"

	"golang.org/x/crypto/ssh"
)

// NewKey is a fresh ed25519 SSH key: a control plane's key, a sandbox's
// host key, a user's key.
func NewKey(tb testing.TB) ssh.Signer {
	s, _ := NewKeyPEM(tb)
	return s
}

// NewKeyPEM is a fresh ed25519 SSH key and its OpenSSH PEM, for a client
// (ssh -i) or a server (sshd's HostKey) that reads it from a file.
func NewKeyPEM(tb testing.TB) (ssh.Signer, []byte) {
	tb.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		tb.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		tb.Fatal(err)
	}
	return s, pem.EncodeToMemory(block)
}

// AuthorizedKey is k's public key as a line of authorized_keys, without
// the newline.
func AuthorizedKey(k ssh.Signer) string {
	b := ssh.MarshalAuthorizedKey(k.PublicKey())
	return string(b[:len(b)-1])
}
