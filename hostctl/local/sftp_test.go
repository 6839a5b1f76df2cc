package local_test

import (
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
)

// TestSFTP: the sftp subsystem serves the sandbox's home and nothing
// else, and ends with an exit status (scp waits for one).
func TestSFTP(t *testing.T) {
	r := newRig(t)
	ep := r.start()
	c, err := r.dial(ep, r.control)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// A raw session channel, to see the exit status that ends it.
	ch, reqs, err := c.OpenChannel("session", nil)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := ch.SendRequest("subsystem", true, ssh.Marshal(struct{ Name string }{"sftp"})); !ok || err != nil {
		t.Fatalf("subsystem sftp: %v %v", ok, err)
	}
	fc, err := sftp.NewClientPipe(ch, ch)
	if err != nil {
		t.Fatal(err)
	}
	home := r.drv.Home(r.sb)
	if wd, err := fc.Getwd(); err != nil || wd != home {
		t.Fatalf("working directory %q, %v; want the home %q", wd, err, home)
	}
	f, err := fc.Create("a/../new.txt")
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("hello"))
	f.Close()
	if b, _ := os.ReadFile(filepath.Join(home, "new.txt")); string(b) != "hello" {
		t.Fatalf("written: %q", b)
	}
	os.Symlink("/etc", filepath.Join(home, "out"))
	for _, p := range []string{"/etc/hostname", "../../etc/hostname", "out/hostname", filepath.Dir(home) + "/ssh_host_ed25519_key"} {
		if _, err := fc.Open(p); !errors.Is(err, os.ErrPermission) {
			t.Errorf("open %s: %v, want permission denied", p, err)
		}
		if _, err := fc.Create(p); !errors.Is(err, os.ErrPermission) {
			t.Errorf("create %s: %v, want permission denied", p, err)
		}
	}
	if err := fc.Chown("new.txt", 0, 0); err == nil && os.Getuid() != 0 {
		t.Error("chown to root worked")
	}
	ch.CloseWrite()
	io.Copy(io.Discard, ch)
	status := -1
	for req := range reqs {
		if req.Type == "exit-status" && len(req.Payload) == 4 {
			status = int(binary.BigEndian.Uint32(req.Payload))
		}
	}
	if status != 0 {
		t.Fatalf("the sftp session ended with exit status %d, want 0", status)
	}
}
