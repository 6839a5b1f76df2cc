package guest

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// listensOn says whether process pid holds the socket listening on
// 127.0.0.1:port (or on any address), from /proc/net/tcp{,6} and the
// process's open files. Answering RFB on the port is not enough: two
// supervisors racing for a display (on the local driver every sandbox
// shares the host's loopback) could each see the winner's Xvnc answer,
// and the loser would report another sandbox's desktop as its own.
func listensOn(pid, port int) (bool, error) {
	inodes := map[string]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		if err := listeningInodes(f, port, inodes); err != nil && !os.IsNotExist(err) {
			return false, err
		}
	}
	if len(inodes) == 0 {
		return false, nil
	}
	dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	fds, err := os.ReadDir(dir)
	if err != nil {
		return false, err
	}
	for _, fd := range fds {
		l, err := os.Readlink(filepath.Join(dir, fd.Name()))
		if err != nil {
			continue
		}
		if in, ok := strings.CutPrefix(l, "socket:["); ok && inodes[strings.TrimSuffix(in, "]")] {
			return true, nil
		}
	}
	return false, nil
}

// listeningInodes adds the inodes of the sockets listening on port in a
// /proc/net/tcp-style file to inodes.
func listeningInodes(file string, port int, inodes map[string]bool) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	want := fmt.Sprintf(":%04X", port)
	s := bufio.NewScanner(f)
	for s.Scan() {
		// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
		fs := strings.Fields(s.Text())
		if len(fs) < 10 || fs[3] != "0A" || !strings.HasSuffix(fs[1], want) {
			continue
		}
		inodes[fs[9]] = true
	}
	return s.Err()
}
