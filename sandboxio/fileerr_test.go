package sandboxio

import (
	"errors"
	"fmt"
	"io"
	"os"
	"testing"

	"github.com/pkg/sftp"
)

// TestFileCause: SFTP statuses in sandboxio's words, the status kept
// underneath; other errors as they are.
func TestFileCause(t *testing.T) {
	status := func(code uint32) error { return fmt.Errorf("open x: %w", &sftp.StatusError{Code: code}) }
	for _, c := range []struct {
		err  error
		want error
	}{
		{status(uint32(sftp.ErrSSHFxNoSuchFile)), os.ErrNotExist},
		{status(uint32(sftp.ErrSSHFxPermissionDenied)), os.ErrPermission},
		{status(uint32(sftp.ErrSSHFxConnectionLost)), ErrLost},
		{status(uint32(sftp.ErrSSHFxNoConnection)), ErrLost},
	} {
		got := FileCause(c.err)
		var se *sftp.StatusError
		if !errors.Is(got, c.want) || !errors.As(got, &se) {
			t.Errorf("FileCause(%v) = %v, want %v wrapping the status", c.err, got, c.want)
		}
	}
	var re *RefusedError
	if got := FileCause(status(uint32(sftp.ErrSSHFxFailure))); !errors.As(got, &re) || re.Msg == "" {
		t.Errorf("a failure: %v, want a *RefusedError with a message", got)
	}
	if got := FileCause(io.EOF); got != io.EOF {
		t.Errorf("FileCause(io.EOF) = %v", got)
	}
}
