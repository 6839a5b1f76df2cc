package sandboxio

import (
	"context"
	"errors"
	"io"

	"github.com/pkg/sftp"
)

// ErrNoSFTP: the sandbox's SSH server refused the sftp subsystem.
var ErrNoSFTP = errors.New("the sandbox has no SFTP server")

// Files is one SFTP session in a sandbox, as its user: the client, and
// the user's home (where relative paths start).
type Files struct {
	*sftp.Client
	home string
	stop func()
}

// Home is the user's home in the sandbox.
func (f *Files) Home() string { return f.home }

// Close ends the session, then the client (a write blocked on the
// session ends with it).
func (f *Files) Close() {
	f.stop()
	f.Client.Close()
}

// OpenFiles opens an SFTP session in the sandbox; it ends with ctx or
// Close. Its errors are an *UnreachableError (ErrNoSFTP among its
// causes when the server refused the subsystem) or ctx's.
func (sh *Shell) OpenFiles(ctx context.Context, sandboxID string) (*Files, error) {
	sess, err := sh.s.Session(ctx, sandboxID)
	if err != nil {
		return nil, &UnreachableError{Err: err}
	}
	in, err := sess.StdinPipe()
	if err != nil {
		sess.Close()
		return nil, &UnreachableError{Err: err}
	}
	out, err := sess.StdoutPipe()
	if err != nil {
		sess.Close()
		return nil, &UnreachableError{Err: err}
	}
	if err := sess.RequestSubsystem("sftp"); err != nil {
		sess.Close()
		if errors.Is(err, io.EOF) { // the channel or the connection ended: no answer
			return nil, &UnreachableError{Err: err}
		}
		return nil, &UnreachableError{Err: errors.Join(ErrNoSFTP, err)}
	}
	wr := newCoalescer(in)
	c, err := sftp.NewClientPipe(out, wr, sftp.UseConcurrentWrites(true), sftp.UseConcurrentReads(true), sftp.MaxPacketUnchecked(64<<10))
	if err != nil {
		sess.Close()
		wr.Close()
		return nil, &UnreachableError{Err: err}
	}
	// The session first: a write blocked on it ends, then the client.
	stop := context.AfterFunc(ctx, func() { sess.Close(); c.Close() })
	home, err := c.Getwd()
	if err != nil {
		stop()
		sess.Close()
		c.Close()
		return nil, &UnreachableError{Err: err}
	}
	return &Files{Client: c, home: home, stop: func() { stop(); sess.Close() }}, nil
}
