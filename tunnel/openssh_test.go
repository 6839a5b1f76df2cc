package tunnel_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"froog.tech/froog/internal/loopback"
	"froog.tech/froog/internal/testkit"
	"froog.tech/froog/internal/testkit/live"
	"froog.tech/froog/store"
	"froog.tech/froog/tunnel"
	"froog.tech/froog/tunnel/sshdtest"
)

// openSSHTunnel is a tunnel to a sandbox whose SSH server is OpenSSH.
func openSSHTunnel(t testing.TB) (*tunnel.Tunnel, string, ssh.Signer, *sshdtest.Server) {
	t.Helper()
	signer := testkit.NewKey(t)
	srv := sshdtest.Start(t, signer.PublicKey())
	tun, id := tunnelTo(t, srv, signer)
	return tun, id, signer, srv
}

// tunnelTo records srv as a running sandbox and returns a tunnel to it.
func tunnelTo(t testing.TB, srv *sshdtest.Server, signer ssh.Signer) (*tunnel.Tunnel, string) {
	st := live.EmbeddedStore(t)
	ctx := context.Background()
	a, _ := st.CreateAccount(ctx, store.Account{MaxSandboxes: 1})
	host, port, _ := net.SplitHostPort(srv.Addr)
	p, _ := strconv.Atoi(port)
	sb, err := st.CreateSandbox(ctx, store.Sandbox{AccountID: a.ID, Name: "real", State: store.StateRunning, SSHHost: host, SSHPort: p, SSHHostKey: srv.HostKey, CreatedAt: time.Now()}, nil)
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
	if _, err := tun.DialContext(context.Background(), id, loopback.FreePort(t)); !errors.Is(err, tunnel.ErrPortClosed) {
		t.Fatalf("a closed port through OpenSSH: got %v, want ErrPortClosed", err)
	}
}

// DialSSH against OpenSSH with an RSA host key: OpenSSH signs with SHA-2
// only (ssh-rsa, SHA-1, is off since 8.8), so the dial must ask for it. A
// key of the same type other than the pinned one fails with
// ErrHostKeyMismatch.
func TestDialSSHRSAHostKey(t *testing.T) {
	signer := testkit.NewKey(t)
	srv := sshdtest.StartWithHostKey(t, signer.PublicKey(), "rsa")
	hostKey, _, _, _, err := ssh.ParseAuthorizedKey([]byte(srv.HostKey))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := tunnel.DialSSH(ctx, srv.Addr, "root", signer, hostKey)
	if err != nil {
		t.Fatalf("an RSA host key: %v", err)
	}
	defer c.Close()
	sess, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if out, err := sess.Output("echo rsa"); err != nil || string(out) != "rsa\n" {
		t.Fatalf("exec: got %q, %v, want \"rsa\\n\"", out, err)
	}
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	otherKey, err := ssh.NewPublicKey(&other.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tunnel.DialSSH(ctx, srv.Addr, "root", signer, otherKey); !errors.Is(err, tunnel.ErrHostKeyMismatch) {
		t.Fatalf("another host key: got %v, want ErrHostKeyMismatch", err)
	}
}
