package local

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Sandboxes of this driver share the host's ports: a second sandbox's
// server cannot listen on a port the first holds, and without care its
// port would reach the first sandbox's app — its wait ready, its URL
// serving another sandbox's files. So a port held by another sandbox's
// process is never this sandbox's: direct-tcpip to it is refused, saying
// why (the API's wait and the edge dial a port through the tunnel, so
// they see that refusal too).

var procNet = []string{"/proc/net/tcp", "/proc/net/tcp6"}

// heldByOther gives the sandbox, other than id, whose process holds the
// socket listening on port; "" when it is id's, the host's, or nobody's.
func heldByOther(id string, port int) string {
	return listenOwners.heldByOther(id, port)
}

// listenOwners is the one cache of the listening sockets' holders, for
// every sandbox of the host's drivers: they share the host's ports.
var listenOwners owners

// owners caches which sandbox holds each listening socket, by the
// socket's inode: an inode names one socket for as long as it exists,
// and the process tree that holds it keeps its sandbox tag, so a socket
// is looked up in every process's open files once, not on every dial,
// and only once a dial asks for its port. (That look-up reads a link per
// open file on the host: tens of milliseconds, and a burst of dials,
// each doing it, took the process's CPU for seconds. Sockets of other
// ports come and go all the time on a busy host, and would each cost
// the next dial a look-up.) The listening sockets are still read on
// every call, so a socket that appeared since is seen; sockets no longer
// listening are dropped from the cache.
type owners struct {
	mu   sync.Mutex // held across a look-up, so that a burst makes one
	tags map[string]string
	// listening and lookUp read the host: nil means /proc (procListening,
	// socketTags); the cache's tests give their own.
	listening func() []listenLine
	lookUp    func(inodes map[string]bool) map[string]string
}

// procListening gives the host's listening TCP sockets, IPv4 and IPv6:
// from sock_diag (diagListening), or where the kernel refuses that (a
// seccomp filter, say), from /proc/net.
func procListening() []listenLine {
	var lines []listenLine
	v4, err4 := diagListening(unix.AF_INET)
	v6, err6 := diagListening(unix.AF_INET6)
	if err4 == nil && err6 == nil {
		return append(v4, v6...)
	}
	for _, f := range procNet {
		b, _ := os.ReadFile(f)
		lines = append(lines, listenLines(b)...)
	}
	return lines
}

func (o *owners) heldByOther(id string, port int) string {
	read, lookUp := o.listening, o.lookUp
	if read == nil {
		read, lookUp = procListening, socketTags
	}
	lines := read()
	o.mu.Lock()
	defer o.mu.Unlock()
	listening := make(map[string]bool, len(lines))
	unknown := map[string]bool{}
	for _, l := range lines {
		listening[l.inode] = true
		if _, ok := o.tags[l.inode]; !ok && l.port == port {
			unknown[l.inode] = true
		}
	}
	for in := range o.tags {
		if !listening[in] {
			delete(o.tags, in)
		}
	}
	if len(unknown) > 0 {
		found := lookUp(unknown)
		if o.tags == nil {
			o.tags = map[string]string{}
		}
		for in := range unknown {
			o.tags[in] = found[in]
		}
	}
	for _, l := range lines {
		if tag := o.tags[l.inode]; l.port == port && tag != "" && tag != id {
			return tag
		}
	}
	return ""
}

type listenLine struct {
	port  int
	inode string
}

// listenLines gives the LISTEN sockets of a /proc/net/tcp-style file.
func listenLines(b []byte) []listenLine {
	var ls []listenLine
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if l, ok := parseListen(sc.Text()); ok {
			ls = append(ls, l)
		}
	}
	return ls
}

// parseListen reads one line of /proc/net/tcp: sl local_address
// rem_address st … inode; st 0A is LISTEN.
func parseListen(line string) (listenLine, bool) {
	f := strings.Fields(line)
	if len(f) < 10 || f[3] != "0A" {
		return listenLine{}, false
	}
	i := strings.LastIndexByte(f[1], ':')
	p, err := strconv.ParseUint(f[1][i+1:], 16, 16)
	if i < 0 || err != nil {
		return listenLine{}, false
	}
	return listenLine{port: int(p), inode: f[9]}, true
}

// socketTags maps each socket inode to the sandbox tag of a process that
// holds it ("" for a process without one), from every process's open
// files.
func socketTags(inodes map[string]bool) map[string]string {
	tags := map[string]string{}
	if len(inodes) == 0 {
		return tags
	}
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		dir := filepath.Join("/proc", p.Name(), "fd")
		fds, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		tag, read := "", false
		for _, fd := range fds {
			l, err := os.Readlink(filepath.Join(dir, fd.Name()))
			if err != nil {
				continue
			}
			in, ok := strings.CutPrefix(l, "socket:[")
			if in = strings.TrimSuffix(in, "]"); !ok || !inodes[in] {
				continue
			}
			if !read {
				tag, read = tagOf(pid), true
			}
			if tags[in] == "" {
				tags[in] = tag
			}
		}
	}
	return tags
}

// tagOf gives the sandbox tag in process pid's environment, or "".
func tagOf(pid int) string {
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return ""
	}
	for kv := range bytes.SplitSeq(env, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte(tagVar+"=")); ok {
			return string(v)
		}
	}
	return ""
}
