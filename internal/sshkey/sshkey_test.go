package sshkey

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestLoadOrCreate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys", "host_key")
	if _, _, err := Load(path); err == nil {
		t.Fatal("Load of a missing key succeeded")
	}
	made, pem1, err := LoadOrCreate(path, "test")
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, %v", fi, err)
	}
	again, pem2, err := LoadOrCreate(path, "test")
	if err != nil || !bytes.Equal(pem1, pem2) || !bytes.Equal(made.PublicKey().Marshal(), again.PublicKey().Marshal()) {
		t.Fatalf("second LoadOrCreate made another key: %v", err)
	}
	// A file that is not a key is an error, and stays as it was.
	bad := filepath.Join(t.TempDir(), "bad")
	os.WriteFile(bad, []byte("not a key"), 0o600)
	if _, _, err := LoadOrCreate(bad, ""); err == nil {
		t.Fatal("a broken key file was accepted")
	}
	if b, _ := os.ReadFile(bad); string(b) != "not a key" {
		t.Fatalf("the broken key file was replaced: %q", b)
	}
}
