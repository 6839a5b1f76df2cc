package api

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
)

// sealer encrypts URL tokens for the store, so the API can show a private
// URL's link again without the store holding it in the clear. The URL's
// id is bound in as additional data: a sealed token moved to another URL
// does not open.
type sealer struct{ aead cipher.AEAD }

func newSealer(key []byte) (*sealer, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("secret key: want 32 bytes, got %d", len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &sealer{aead: aead}, nil
}

func (s *sealer) seal(plain, urlID string) []byte {
	nonce := make([]byte, s.aead.NonceSize())
	rand.Read(nonce)
	return s.aead.Seal(nonce, nonce, []byte(plain), []byte(urlID))
}

func (s *sealer) open(sealed []byte, urlID string) (string, error) {
	n := s.aead.NonceSize()
	if len(sealed) < n {
		return "", errors.New("sealed token too short")
	}
	plain, err := s.aead.Open(nil, sealed[:n], sealed[n:], []byte(urlID))
	if err != nil {
		return "", fmt.Errorf("open sealed token: %w", err)
	}
	return string(plain), nil
}
