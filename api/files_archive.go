package api

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	"froog.tech/froog/sandboxio"
)

// errBodyTooLarge: the request body went past its limit (sandboxio's
// unpacker passes it on as it is).
var errBodyTooLarge = &sandboxio.ArchiveError{Kind: sandboxio.ErrTooLarge, Msg: fmt.Sprintf("the archive is over %d MiB", maxFileBytes>>20)}

// limitBody counts a request body and fails past max.
type limitBody struct {
	r    io.Reader
	left int64
}

func (l *limitBody) Read(p []byte) (int, error) {
	if l.left <= 0 {
		var one [1]byte
		if n, _ := l.r.Read(one[:]); n > 0 {
			return 0, errBodyTooLarge
		}
		return 0, io.EOF
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}

// PUT files/archive?path=DIR: unpack a .tar.gz into DIR, made if missing
// (sandboxio's Files.Unpack, which says what an archive may do).
func (s *Server) putArchive(w http.ResponseWriter, r *http.Request) error {
	_, p, err := pathQuery(r, true)
	if err != nil {
		return err
	}
	if err := s.checkLength(r); err != nil {
		return err
	}
	c, err := s.files(r)
	if err != nil {
		return err
	}
	defer c.Close()
	res, err := c.Unpack(r.Context(), c.abs(p), &limitBody{r: r.Body, left: s.maxFile})
	if ctxErr := r.Context().Err(); ctxErr != nil && errors.Is(err, ctxErr) {
		return err
	}
	if err != nil {
		return fileError(p, err)
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}
