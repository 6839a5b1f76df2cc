package edge

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"syscall"
	"testing"
)

// fakeListener gives the errors and connections of its script, in order,
// then net.ErrClosed.
type fakeListener struct {
	net.Listener
	script []any // error or net.Conn
}

func (l *fakeListener) Accept() (net.Conn, error) {
	if len(l.script) == 0 {
		return nil, net.ErrClosed
	}
	x := l.script[0]
	l.script = l.script[1:]
	if err, ok := x.(error); ok {
		return nil, err
	}
	return x.(net.Conn), nil
}

func (l *fakeListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 443} }

// The accept loop waits out what passes (EMFILE under a flood) and
// accepts again; it returns what does not (issue #33).
func TestAcceptRetriesTemporaryErrors(t *testing.T) {
	t.Parallel()
	emfile := &net.OpError{Op: "accept", Net: "tcp", Err: &netErrno{syscall.EMFILE}}
	conn := func() net.Conn { c, _ := net.Pipe(); return c }
	tests := []struct {
		name    string
		script  []any
		served  int
		wantErr error
	}{
		{"EMFILE, then connections", []any{emfile, emfile, syscall.ENFILE, conn(), syscall.ECONNABORTED, conn()}, 2, nil},
		{"a failure that does not pass", []any{conn(), syscall.EINVAL, conn()}, 1, syscall.EINVAL},
	}
	for _, tt := range tests {
		s := &Server{o: Options{Logger: slog.New(slog.DiscardHandler), MaxConnsPerIP: 10}, m: newMetrics(nil)}
		served := 0
		err := s.accept(context.Background(), &fakeListener{script: tt.script}, func(c net.Conn) { served++; c.Close() })
		if served != tt.served || !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
			t.Errorf("%s: served %d, error %v; want %d, %v", tt.name, served, err, tt.served, tt.wantErr)
		}
	}
}

// netErrno is an accept error as the os package wraps one.
type netErrno struct{ errno syscall.Errno }

func (e *netErrno) Error() string { return "accept4: " + e.errno.Error() }
func (e *netErrno) Unwrap() error { return e.errno }
