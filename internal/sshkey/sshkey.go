// Package sshkey keeps SSH private keys in files: the control plane's key
// and the sandboxes' host keys, in one way.
package sshkey

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"os"

	"golang.org/x/crypto/ssh"

	"froog.tech/froog/internal/keyfile"
)

// Load reads the OpenSSH PEM private key at path.
func Load(path string) (ssh.Signer, []byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("read ssh key: %w", err)
	}
	s, err := ssh.ParsePrivateKey(b)
	if err != nil {
		return nil, nil, fmt.Errorf("ssh key %s: %w", path, err)
	}
	return s, b, nil
}

// LoadOrCreate reads the key at path, or makes an ed25519 key there
// (mode 0600, written whole or not at all) when there is none. It returns
// the key and its PEM.
func LoadOrCreate(path, comment string) (ssh.Signer, []byte, error) {
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		return Load(path)
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	block, err := ssh.MarshalPrivateKey(priv, comment)
	if err != nil {
		return nil, nil, err
	}
	b := pem.EncodeToMemory(block)
	if err := keyfile.Write(path, b); err != nil {
		return nil, nil, fmt.Errorf("write ssh key: %w", err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	return s, b, err
}
