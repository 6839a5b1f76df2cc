package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
)

// KeySize is the length of the secret key.
const KeySize = 32

// Sealer seals and opens values with one key.
type Sealer struct{ aead cipher.AEAD }

// New makes a Sealer for key, which must be KeySize bytes.
func New(key []byte) (*Sealer, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("secret key: want %d bytes, got %d", KeySize, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Sealer{aead: aead}, nil
}

// Seal encrypts plain, bound to ad.
func (s *Sealer) Seal(plain []byte, ad string) []byte {
	nonce := make([]byte, s.aead.NonceSize())
	rand.Read(nonce)
	return s.aead.Seal(nonce, nonce, plain, []byte(ad))
}

// Open decrypts what Seal made with the same ad. The error never holds
// any of the value.
func (s *Sealer) Open(sealed []byte, ad string) ([]byte, error) {
	n := s.aead.NonceSize()
	if len(sealed) < n {
		return nil, errors.New("sealed value too short")
	}
	plain, err := s.aead.Open(nil, sealed[:n], sealed[n:], []byte(ad))
	if err != nil {
		return nil, fmt.Errorf("open sealed value: %w", err)
	}
	return plain, nil
}

// AccountEnvAD binds an account's variable to the account and its name.
func AccountEnvAD(accountID, name string) string { return "account-env:" + accountID + ":" + name }

// AccountFileAD binds an account's secret file to the account and its
// path.
func AccountFileAD(accountID, path string) string { return "account-file:" + accountID + ":" + path }

// AccountSetupAD binds an account's setup script to the account.
func AccountSetupAD(accountID string) string { return "account-setup:" + accountID }

// SandboxEnvAD binds a sandbox's own variables to the sandbox.
func SandboxEnvAD(sandboxID string) string { return "env:" + sandboxID }

// SandboxFileAD binds one of a sandbox's own first-boot files (a
// create's files) to the sandbox and its path.
func SandboxFileAD(sandboxID, path string) string { return "file:" + sandboxID + ":" + path }

// SandboxSetupAD binds a sandbox's own one-off setup script (a create's
// setup) to the sandbox.
func SandboxSetupAD(sandboxID string) string { return "setup:" + sandboxID }

// TicketKeyAD binds a TLS session ticket key (the edges') to its name in
// the store.
func TicketKeyAD(name string) string { return "tls-ticket-key:" + name }
