package local

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// A port another sandbox's process listens on is never this sandbox's:
// heldByOther names the holder; this sandbox's own ports, and the
// host's, are left as they are.
func TestPortsOfOtherSandboxes(t *testing.T) {
	t.Parallel()
	// A listener held by a process of sandbox "sb-other".
	cmd := exec.Command("python3", "-c", `import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
print(s.getsockname()[1], flush=True); sys.stdin.read()`)
	cmd.Env = append(os.Environ(), tagVar+"=sb-other")
	stdin, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	other, _ := strconv.Atoi(strings.TrimSpace(line))
	// A listener of the host's (this test's own process, untagged).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	host := ln.Addr().(*net.TCPAddr).Port

	for _, c := range []struct {
		sandbox    string
		port       int
		wantHolder string
	}{
		{"sb-mine", other, "sb-other"},
		{"sb-other", other, ""},
		{"sb-mine", host, ""},
	} {
		if got := heldByOther(c.sandbox, c.port); got != c.wantHolder {
			t.Errorf("%s, port %d: heldByOther %q, want %q", c.sandbox, c.port, got, c.wantHolder)
		}
	}
}
