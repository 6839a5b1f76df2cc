package seal_test

import (
	"bytes"
	"strings"
	"testing"

	"froog.tech/froog/internal/seal"
)

func TestSealOpen(t *testing.T) {
	t.Parallel()
	s, err := seal.New(bytes.Repeat([]byte{7}, seal.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	sealed := s.Seal([]byte("hunter2"), seal.AccountFileAD("acct_1", "app/.env"))
	if bytes.Contains(sealed, []byte("hunter2")) {
		t.Fatal("the sealed value holds the plain text")
	}
	got, err := s.Open(sealed, seal.AccountFileAD("acct_1", "app/.env"))
	if err != nil || string(got) != "hunter2" {
		t.Fatalf("open: got %q, %v, want hunter2", got, err)
	}
	for name, ad := range map[string]string{
		"another path":    seal.AccountFileAD("acct_1", "app/.env2"),
		"another account": seal.AccountFileAD("acct_2", "app/.env"),
		"another kind":    seal.AccountSetupAD("acct_1"),
	} {
		if _, err := s.Open(sealed, ad); err == nil {
			t.Errorf("%s: the sealed value opened", name)
		} else if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: the error holds the value: %v", name, err)
		}
	}
	if _, err := s.Open(sealed[:5], seal.AccountSetupAD("acct_1")); err == nil {
		t.Error("a short value opened")
	}
	other, _ := seal.New(bytes.Repeat([]byte{8}, seal.KeySize))
	if _, err := other.Open(sealed, seal.AccountFileAD("acct_1", "app/.env")); err == nil {
		t.Error("another key opened it")
	}
	if _, err := seal.New(make([]byte, 16)); err == nil {
		t.Error("a 16-byte key was taken")
	}
}
