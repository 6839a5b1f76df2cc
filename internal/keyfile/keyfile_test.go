package keyfile

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSecret(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys", "secret.key")
	if _, err := LoadSecret(path, 32); err == nil {
		t.Fatal("LoadSecret of a missing key succeeded")
	}
	made, err := LoadOrCreateSecret(path, 32)
	if err != nil || len(made) != 32 {
		t.Fatalf("got %d bytes, %v; want 32", len(made), err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, %v", fi, err)
	}
	for name, load := range map[string]func(string, int) ([]byte, error){"LoadSecret": LoadSecret, "LoadOrCreateSecret": LoadOrCreateSecret} {
		if again, err := load(path, 32); err != nil || !bytes.Equal(again, made) {
			t.Errorf("%s: got %x, %v; want the key made first", name, again, err)
		}
		if _, err := load(path, 16); err == nil || !strings.Contains(err.Error(), "want 16 bytes") {
			t.Errorf("%s of a key of the wrong size: got %v", name, err)
		}
	}
}
