package sandboxio

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
)

// Sessions opens SSH sessions in sandboxes (package tunnel).
type Sessions interface {
	Session(ctx context.Context, sandboxID string) (*ssh.Session, error)
}

// Shell runs commands, jobs and SFTP sessions in sandboxes.
type Shell struct{ s Sessions }

// New builds a Shell on sessions; it starts nothing.
func New(sessions Sessions) *Shell { return &Shell{s: sessions} }

// ErrLost: the connection to the sandbox broke under a command or a
// files call.
var ErrLost = errors.New("the connection to the sandbox was lost")

// UnreachableError: no session could be opened in the sandbox (the
// tunnel's error, e.g. tunnel.ErrNotRunning, is its Err).
type UnreachableError struct{ Err error }

func (e *UnreachableError) Error() string { return "cannot reach the sandbox: " + e.Err.Error() }
func (e *UnreachableError) Unwrap() error { return e.Err }

// Result is how a command ended.
type Result struct {
	Code     int
	TimedOut bool
}

// Quote quotes s for sh.
func Quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// Prelude is the shell that puts a command in its directory and
// environment: cwd relative to ~ or absolute, variables for it alone.
func Prelude(cwd string, env map[string]string) string {
	var b strings.Builder
	b.WriteString("cd && ")
	if cwd != "" {
		b.WriteString("cd -- " + Quote(cwd) + " && ")
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		b.WriteString("export " + k + "=" + Quote(env[k]) + " && ")
	}
	return b.String()
}

// Run runs a shell command in the sandbox, wired to stdin, stdout and
// stderr. Past timeout (when positive) it is killed (exit 124); when ctx
// ends (the client hung up) it is killed too, and ctx's error returned.
func (sh *Shell) Run(ctx context.Context, sandboxID, command string, stdin []byte, stdout, stderr io.Writer, timeout time.Duration) (Result, error) {
	sess, err := sh.s.Session(ctx, sandboxID)
	if err != nil {
		return Result{}, &UnreachableError{Err: err}
	}
	defer sess.Close()
	sess.Stdin = bytes.NewReader(stdin)
	sess.Stdout, sess.Stderr = stdout, stderr
	if err := sess.Start(command); err != nil {
		return Result{}, &UnreachableError{Err: err}
	}
	done := make(chan error, 1)
	go func() { done <- sess.Wait() }()
	var expired <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expired = t.C
	}
	select {
	case err := <-done:
		var ee *ssh.ExitError
		switch {
		case err == nil:
			return Result{}, nil
		case errors.As(err, &ee):
			return Result{Code: ee.ExitStatus()}, nil
		}
		return Result{}, fmt.Errorf("%w: %w", ErrLost, err)
	case <-expired:
		sess.Signal(ssh.SIGKILL)
		sess.Close()
		<-done
		return Result{Code: 124, TimedOut: true}, nil
	case <-ctx.Done():
		sess.Signal(ssh.SIGKILL)
		sess.Close()
		<-done
		return Result{}, ctx.Err()
	}
}

// Capped keeps the first Max bytes written to it and drops the rest.
// (It does not embed its buffer: io.Copy would use the buffer's
// ReadFrom and pass the cap by.)
type Capped struct {
	buf bytes.Buffer
	Max int
	// Dropped: more than Max bytes were written.
	Dropped bool
}

func (c *Capped) Write(p []byte) (int, error) {
	room := max(c.Max-c.buf.Len(), 0)
	c.buf.Write(p[:min(room, len(p))])
	c.Dropped = c.Dropped || len(p) > room
	return len(p), nil
}

// Bytes is what was kept.
func (c *Capped) Bytes() []byte { return c.buf.Bytes() }

// String is what was kept, as a string.
func (c *Capped) String() string { return c.buf.String() }
