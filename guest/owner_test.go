package guest

import (
	"net"
	"os"
	"os/exec"
	"testing"
)

// TestListensOnOwnerOnly: the port's listening socket is this process's,
// not another's that merely could connect to it (the race that let a
// supervisor report another sandbox's Xvnc as its own desktop).
func TestListensOnOwnerOnly(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	other := exec.Command("sleep", "30")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { other.Process.Kill(); other.Wait() }()

	if ok, err := listensOn(os.Getpid(), port); !ok || err != nil {
		t.Errorf("listensOn(self, %d) = %v, %v; want true", port, ok, err)
	}
	if ok, err := listensOn(other.Process.Pid, port); ok || err != nil {
		t.Errorf("listensOn(other, %d) = %v, %v; want false", port, ok, err)
	}
	ln.Close()
	if ok, _ := listensOn(os.Getpid(), port); ok {
		t.Errorf("listensOn(self, %d) after close = true", port)
	}
}
