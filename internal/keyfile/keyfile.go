// Package keyfile keeps secrets in files: written whole or not at all,
// readable by their owner only. The control plane's SSH key (sshkey), the
// key that seals URL tokens, and froogd dev's API key use it.
package keyfile

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Write writes b to path with mode 0600, through a temporary file renamed
// into place, making path's folder (mode 0700) when it is missing.
func Write(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// LoadSecret reads the random key of size bytes at path.
func LoadSecret(path string, size int) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read secret key: %w", err)
	}
	if len(b) != size {
		return nil, fmt.Errorf("secret key %s: want %d bytes, got %d", path, size, len(b))
	}
	return b, nil
}

// LoadOrCreateSecret reads the key at path, or makes a random one of size
// bytes there when there is none.
func LoadOrCreateSecret(path string, size int) ([]byte, error) {
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		return LoadSecret(path, size)
	}
	b := make([]byte, size)
	rand.Read(b)
	if err := Write(path, b); err != nil {
		return nil, fmt.Errorf("write secret key: %w", err)
	}
	return b, nil
}
