package sandboxio

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/pkg/sftp"
)

// RefusedError: the sandbox's SFTP server refused a files call for a
// reason of its own; Msg is what it said (or its code's name).
type RefusedError struct {
	Msg string
	Err error // the *sftp.StatusError
}

func (e *RefusedError) Error() string { return e.Msg }
func (e *RefusedError) Unwrap() error { return e.Err }

// FileCause puts an error of a files call in sandboxio's words: an SFTP
// status becomes os.ErrNotExist, os.ErrPermission, ErrLost (the
// connection) or a *RefusedError, each wrapping it; any other error is
// returned as it is.
func FileCause(err error) error {
	var se *sftp.StatusError
	if !errors.As(err, &se) {
		return err
	}
	switch se.FxCode() {
	case sftp.ErrSSHFxNoSuchFile:
		return fmt.Errorf("%w (%w)", os.ErrNotExist, err)
	case sftp.ErrSSHFxPermissionDenied:
		return fmt.Errorf("%w (%w)", os.ErrPermission, err)
	case sftp.ErrSSHFxConnectionLost, sftp.ErrSSHFxNoConnection:
		return fmt.Errorf("%w: %w", ErrLost, err)
	}
	return &RefusedError{Msg: sftpMessage(se), Err: err}
}

// sftpMessage is what the sandbox's SFTP server said, or the code's name.
func sftpMessage(se *sftp.StatusError) string {
	msg := se.Error() // sftp: "MESSAGE" (CODE)
	i, j := strings.Index(msg, `"`), strings.LastIndex(msg, `" (`)
	if i >= 0 && j > i {
		if m, err := strconv.Unquote(msg[i : j+1]); err == nil && m != "" {
			return m
		}
	}
	return msg
}
