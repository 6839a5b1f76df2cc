package tunnel

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"golang.org/x/crypto/ssh"
)

// ErrHostKeyMismatch: the SSH server offered another host key than the
// one pinned for it.
var ErrHostKeyMismatch = errors.New("host key mismatch")

// DialSSH connects to the SSH server at addr (host:port) and logs in as
// user with signer, accepting only hostKey (an RSA key is also accepted
// signed with SHA-2, which OpenSSH servers require). ctx bounds the TCP
// connect and the whole handshake, not only the connect: give it a
// deadline. The client outlives ctx. A server that offers another host key
// fails with ErrHostKeyMismatch, a refused login with *ssh.ServerAuthError,
// a failed connect with a *net.OpError whose Op is "dial".
func DialSSH(ctx context.Context, addr, user string, signer ssh.Signer, hostKey ssh.PublicKey) (*ssh.Client, error) {
	c, _, err := dialSSH(ctx, addr, user, signer, hostKey)
	return c, err
}

// dialSSH is DialSSH, also giving the connection under the client (the
// tunnel watches it to tell a lost connection from a channel's end).
func dialSSH(ctx context.Context, addr, user string, signer ssh.Signer, hostKey ssh.PublicKey) (*ssh.Client, *batchConn, error) {
	cfg := &ssh.ClientConfig{
		User:              user,
		Auth:              []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback:   pinned(hostKey),
		HostKeyAlgorithms: hostKeyAlgorithms(hostKey),
	}
	cfg.Ciphers = []string{"aes128-gcm@openssh.com", "aes256-gcm@openssh.com", "chacha20-poly1305@openssh.com", "aes128-ctr"}
	nc, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	// The deadline covers the whole handshake, not only the TCP connect.
	dl, _ := ctx.Deadline()
	nc.SetDeadline(dl)
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Unix(1, 0)) }) // a cancelled ctx ends it too
	bc := newBatchConn(nc)
	conn, chans, reqs, err := ssh.NewClientConn(bc, addr, cfg)
	stop()
	if err != nil {
		bc.Close()
		return nil, nil, err
	}
	nc.SetDeadline(time.Time{})
	return ssh.NewClient(conn, chans, reqs), bc, nil
}

// pinned accepts the one host key, as ssh.FixedHostKey does, and refuses
// any other with ErrHostKeyMismatch.
func pinned(want ssh.PublicKey) ssh.HostKeyCallback {
	return func(_ string, _ net.Addr, got ssh.PublicKey) error {
		if !bytes.Equal(got.Marshal(), want.Marshal()) {
			return fmt.Errorf("ssh: %w: the server offered %s, %s is pinned", ErrHostKeyMismatch, ssh.FingerprintSHA256(got), ssh.FingerprintSHA256(want))
		}
		return nil
	}
}

func hostKeyAlgorithms(key ssh.PublicKey) []string {
	if key.Type() == ssh.KeyAlgoRSA {
		return []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA}
	}
	return []string{key.Type()}
}
