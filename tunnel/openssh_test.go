package tunnel_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
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

	"froog.tech/froog/store"
	"froog.tech/froog/store/embedded"
	"froog.tech/froog/tunnel"
)

// openSSH is an OpenSSH sshd the test starts on loopback: the server a
// real sandbox runs.
type openSSH struct {
	addr    string
	hostKey string // authorized_keys format
	dir     string
}

// startOpenSSH runs sshd accepting only key, or skips the test (saying
// why) where OpenSSH's server is not installed.
func startOpenSSH(t testing.TB, key ssh.PublicKey) *openSSH {
	t.Helper()
	sshd, err := exec.LookPath("sshd")
	if err != nil {
		if _, err := os.Stat("/usr/sbin/sshd"); err != nil {
			t.Skip("OpenSSH's sshd is not installed (deploy/testdeps.sh installs openssh-server)")
		}
		sshd = "/usr/sbin/sshd"
	}
	os.MkdirAll("/run/sshd", 0o755) // privilege separation wants it
	dir := t.TempDir()
	pemKey := filepath.Join(dir, "host_key")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", pemKey).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v %s", err, out)
	}
	pub, err := os.ReadFile(pemKey + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "authorized_keys"), ssh.MarshalAuthorizedKey(key), 0o600)
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
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
`, port, pemKey, dir, dir)
	os.WriteFile(filepath.Join(dir, "sshd_config"), []byte(cfg), 0o600)
	cmd := exec.Command(sshd, "-D", "-e", "-f", filepath.Join(dir, "sshd_config"))
	if err := cmd.Start(); err != nil {
		t.Fatalf("start sshd: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := "127.0.0.1:" + strconv.Itoa(port)
	for deadline := time.Now().Add(10 * time.Second); ; {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("sshd never listened")
		}
		time.Sleep(20 * time.Millisecond)
	}
	f := strings.Fields(string(pub))
	return &openSSH{addr: addr, hostKey: f[0] + " " + f[1], dir: dir}
}

// openSSHTunnel is a tunnel to a sandbox whose SSH server is OpenSSH.
func openSSHTunnel(t testing.TB) (*tunnel.Tunnel, string, ssh.Signer, *openSSH) {
	t.Helper()
	signer := newKey(t)
	srv := startOpenSSH(t, signer.PublicKey())
	tun, id := tunnelTo(t, srv, signer)
	return tun, id, signer, srv
}

// tunnelTo records srv as a running sandbox and returns a tunnel to it.
func tunnelTo(t testing.TB, srv *openSSH, signer ssh.Signer) (*tunnel.Tunnel, string) {
	st, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	a, _ := st.CreateAccount(ctx, store.Account{MaxSandboxes: 1})
	host, port, _ := net.SplitHostPort(srv.addr)
	p, _ := strconv.Atoi(port)
	sb, err := st.CreateSandbox(ctx, store.Sandbox{AccountID: a.ID, Name: "real", State: store.StateRunning, SSHHost: host, SSHPort: p, SSHHostKey: srv.hostKey, CreatedAt: time.Now()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tun, err := tunnel.New(tunnel.Options{Sandboxes: st, Signer: signer, User: "root"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tun.Close() })
	return tun, sb.ID
}

// newPEMKey makes a key and its OpenSSH PEM form, for the ssh client.
func newPEMKey(t testing.TB) (ssh.Signer, []byte) {
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s, pem.EncodeToMemory(block)
}

// The tunnel against OpenSSH's server: forwards, exec sessions, and a
// refused host key.
func TestAgainstOpenSSH(t *testing.T) {
	tun, id, _, _ := openSSHTunnel(t)
	_, base := upstream(t)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(base, "http://"))
	n, _ := strconv.Atoi(port)
	conn, err := tun.DialContext(context.Background(), id, n)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "GET /openssh HTTP/1.0\r\n\r\n")
	buf := make([]byte, 4096)
	var got []byte
	for {
		k, err := conn.Read(buf)
		got = append(got, buf[:k]...)
		if err != nil {
			break
		}
	}
	conn.Close()
	if !strings.HasSuffix(string(got), "hello /openssh") {
		t.Fatalf("through OpenSSH: %q", got)
	}
	sess, err := tun.Session(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	out, err := sess.Output("echo from-openssh")
	if err != nil || string(out) != "from-openssh\n" {
		t.Fatalf("exec through OpenSSH: %q, %v", out, err)
	}
}
