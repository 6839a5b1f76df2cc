package embedded_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"froog.tech/froog/store"
	"froog.tech/froog/store/embedded"
	"froog.tech/froog/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) func() storetest.Backend {
		dir := t.TempDir()
		return func() storetest.Backend {
			s, err := embedded.Open(dir)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			return s
		}
	})
}

func TestSecondProcessKeptOut(t *testing.T) {
	dir := t.TempDir()
	s, err := embedded.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := embedded.Open(dir); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second Open: got %v, want an in-use error", err)
	}
}

// A commit torn by a crash (no final newline) is dropped whole; earlier
// commits survive.
func TestTornCommit(t *testing.T) {
	dir := t.TempDir()
	s, err := embedded.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.CreateAccount(t.Context(), store.Account{Name: "kept", MaxSandboxes: 1})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	f, err := os.OpenFile(filepath.Join(dir, "store.log"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`[{"t":"account","id":"acct_torn","v":{"id":"acct_torn"`)
	f.Close()
	s, err = embedded.Open(dir)
	if err != nil {
		t.Fatalf("Open after a torn commit: %v", err)
	}
	defer s.Close()
	if _, err := s.Account(t.Context(), a.ID); err != nil {
		t.Fatalf("earlier commit lost: %v", err)
	}
	if _, err := s.Account(t.Context(), "acct_torn"); err == nil {
		t.Fatal("torn commit was applied")
	}
}

func TestCorruptLogRefused(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "store.log"), []byte("not json\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := embedded.Open(dir); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("Open of a corrupt log: got %v, want an error naming the line", err)
	}
}
