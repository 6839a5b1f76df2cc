// Package sshdtest starts OpenSSH's sshd on loopback for tests and
// benchmarks: the SSH server a real sandbox runs. It is for tests only.
package sshdtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"froog.tech/froog/internal/loopback"
	"froog.tech/froog/internal/wait"
)

// Server is a running sshd.
type Server struct {
	Addr    string // host:port on loopback
	HostKey string // its host key, authorized_keys format
	Dir     string // its folder: config, keys
}

// Start runs sshd accepting only key (as root, with TCP forwarding), or
// skips tb, saying why, where OpenSSH's server is not installed.
func Start(tb testing.TB, key ssh.PublicKey) *Server {
	tb.Helper()
	return StartWithHostKey(tb, key, "ed25519")
}

// StartWithHostKey is Start with a host key of another type, as
// ssh-keygen -t names it (rsa, ecdsa, ed25519).
func StartWithHostKey(tb testing.TB, key ssh.PublicKey, keyType string) *Server {
	tb.Helper()
	sshd, err := exec.LookPath("sshd")
	if err != nil {
		if _, err := os.Stat("/usr/sbin/sshd"); err != nil {
			tb.Skip("OpenSSH's sshd is not installed (deploy/testdeps.sh installs openssh-server)")
		}
		sshd = "/usr/sbin/sshd"
	}
	os.MkdirAll("/run/sshd", 0o755) // privilege separation wants it
	dir := tb.TempDir()
	hostKey := filepath.Join(dir, "host_key")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", keyType, "-N", "", "-f", hostKey).CombinedOutput(); err != nil {
		tb.Fatalf("ssh-keygen: %v %s", err, out)
	}
	pub, err := os.ReadFile(hostKey + ".pub")
	if err != nil {
		tb.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "authorized_keys"), ssh.MarshalAuthorizedKey(key), 0o600)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cfg := fmt.Sprintf(`Port %d
ListenAddress 127.0.0.1
HostKey %s
PidFile %s/sshd.pid
AuthorizedKeysFile %s/authorized_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
AllowTcpForwarding yes
PermitRootLogin prohibit-password
LogLevel ERROR
`, port, hostKey, dir, dir)
	os.WriteFile(filepath.Join(dir, "sshd_config"), []byte(cfg), 0o600)
	cmd := exec.Command(sshd, "-D", "-e", "-f", filepath.Join(dir, "sshd_config"))
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start sshd: %v", err)
	}
	tb.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := "127.0.0.1:" + strconv.Itoa(port)
	wait.For(tb, 10*time.Second, "sshd listens", func() bool { return listens(addr) })
	f := strings.Fields(string(pub))
	return &Server{Addr: addr, HostKey: f[0] + " " + f[1], Dir: dir}
}

// Forward runs `ssh -L` from a new loopback port to target through s, as
// root with the private key pemKey, and returns the local address.
func (s *Server) Forward(tb testing.TB, pemKey []byte, target string) string {
	tb.Helper()
	addr, _ := s.ForwardProcess(tb, pemKey, target)
	return addr
}

// ForwardProcess is Forward that also gives the ssh client's process id,
// for a benchmark that accounts its CPU time.
func (s *Server) ForwardProcess(tb testing.TB, pemKey []byte, target string) (string, int) {
	tb.Helper()
	if _, err := exec.LookPath("ssh"); err != nil {
		tb.Skip("OpenSSH's ssh is not installed (deploy/testdeps.sh installs openssh-client)")
	}
	keyFile := filepath.Join(s.Dir, "client_key")
	os.WriteFile(keyFile, pemKey, 0o600)
	known := filepath.Join(s.Dir, "known_hosts")
	host, port, _ := net.SplitHostPort(s.Addr)
	os.WriteFile(known, []byte(fmt.Sprintf("[%s]:%s %s\n", host, port, s.HostKey)), 0o600)
	local := "127.0.0.1:" + strconv.Itoa(loopback.FreePort(tb))
	cmd := exec.Command("ssh", "-N", "-p", port, "-i", keyFile, "-o", "UserKnownHostsFile="+known, "-o", "StrictHostKeyChecking=yes",
		"-o", "BatchMode=yes", "-o", "ExitOnForwardFailure=yes", "-L", local+":"+target, "root@"+host)
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	wait.For(tb, 10*time.Second, "ssh -L listens", func() bool { return listens(local) })
	return local, cmd.Process.Pid
}

func listens(addr string) bool {
	c, err := net.Dial("tcp", addr)
	if err == nil {
		c.Close()
	}
	return err == nil
}
