package local

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// A port another sandbox's process listens on is never this sandbox's:
// heldByOther names the holder; this sandbox's own ports, and the
// host's, are left as they are.
func TestPortsOfOtherSandboxes(t *testing.T) {
	t.Parallel()
	// A listener held by a process of sandbox "sb-other".
	other, stopOther := listenAs(t, "sb-other", 0)
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

	// The holders are cached by socket: a new socket on the same port,
	// another sandbox's, is looked up afresh.
	stopOther()
	listenAs(t, "sb-third", other)
	if got := heldByOther("sb-mine", other); got != "sb-third" {
		t.Errorf("port %d after sb-other closed it and sb-third listened: heldByOther %q, want sb-third", other, got)
	}
}

// A burst of dials looks the holders up in the processes' files once a
// port, not once per dial (each look-up reads a link per open file on
// the host); a socket that appears on a dialed port is looked up, one on
// another port is not, one that goes is dropped. The host's tables are
// the test's own: the host's change under a suite.
func TestPortsBurstLooksUpOnce(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	table := []listenLine{{port: 3000, inode: "11"}, {port: 5173, inode: "12"}}
	holders := map[string]string{"11": "sb-other", "12": "sb-mine"}
	var lookUps []int // the inodes each look-up asked for, by count
	o := owners{
		listening: func() []listenLine { mu.Lock(); defer mu.Unlock(); return slices.Clone(table) },
		lookUp: func(inodes map[string]bool) map[string]string {
			mu.Lock()
			defer mu.Unlock()
			lookUps = append(lookUps, len(inodes))
			found := map[string]string{}
			for in := range inodes {
				if tag, ok := holders[in]; ok {
					found[in] = tag
				}
			}
			return found
		},
	}
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			port, want := 3000, "sb-other"
			if i%2 == 1 {
				port, want = 5173, ""
			}
			if got := o.heldByOther("sb-mine", port); got != want {
				t.Errorf("port %d: heldByOther %q, want %q", port, got, want)
			}
		})
	}
	wg.Wait()
	if !slices.Equal(lookUps, []int{1, 1}) {
		t.Errorf("64 dials to two ports: look-ups of %v inodes, want one of 1 for each port", lookUps)
	}

	// A socket appears on a port nobody dials: a dial to 3000 looks
	// nothing up.
	mu.Lock()
	table = append(table, listenLine{port: 8080, inode: "20"})
	holders["20"] = "sb-fourth"
	mu.Unlock()
	if got := o.heldByOther("sb-mine", 3000); got != "sb-other" || len(lookUps) != 2 {
		t.Errorf("after a socket appeared on 8080: heldByOther %q, look-ups %v, want sb-other and none more", got, lookUps)
	}

	// sb-other's socket on 3000 goes; sb-third listens on it (inode 13).
	mu.Lock()
	table[0] = listenLine{port: 3000, inode: "13"}
	holders["13"] = "sb-third"
	mu.Unlock()
	if got := o.heldByOther("sb-mine", 3000); got != "sb-third" {
		t.Errorf("after the socket changed: heldByOther %q, want sb-third", got)
	}
	if got := o.heldByOther("sb-mine", 3000); got != "sb-third" || !slices.Equal(lookUps, []int{1, 1, 1}) {
		t.Errorf("again: heldByOther %q, look-ups %v, want sb-third and [1 1 1]", got, lookUps)
	}
	if _, ok := o.tags["11"]; ok {
		t.Error("the closed socket's holder is still cached")
	}
}

// listenAs starts a process tagged as sandbox tag that listens on
// 127.0.0.1:port (0: any), and gives the port and a stop.
func listenAs(t *testing.T, tag string, port int) (int, func()) {
	t.Helper()
	cmd := exec.Command("python3", "-c", `import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen()
print(s.getsockname()[1], flush=True); sys.stdin.read()`, strconv.Itoa(port))
	cmd.Env = append(os.Environ(), tagVar+"="+tag)
	stdin, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop := func() { once.Do(func() { stdin.Close(); cmd.Wait() }) }
	t.Cleanup(stop)
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(strings.TrimSpace(line))
	return p, stop
}
