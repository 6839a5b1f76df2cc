package sandboxio

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"syscall"

	"github.com/pkg/sftp"

	"froog.tech/froog/store"
)

// The files routes' single calls that change a path, on one session.
// Paths are absolute and clean (the caller resolves "~" and relative
// ones from Home). Besides the session's own errors (SFTP status errors,
// os.ErrNotExist, os.ErrPermission, syscall.ENOTDIR) they answer with
// ErrNotEmpty, ErrExists and *ModeError.
var (
	// ErrNotEmpty: a folder to delete holds entries (and the call is not
	// recursive).
	ErrNotEmpty = errors.New("the folder is not empty")
	// ErrExists: a folder is where a move would put a file, or a file is
	// where a folder would be made.
	ErrExists = errors.New("something is there already")
)

// ModeError: a recursive SetMode changed Changed modes and failed to set
// Failed, the first at First.
type ModeError struct {
	Changed, Failed int
	First           string
}

func (e *ModeError) Error() string {
	return fmt.Sprintf("%d changed; the mode of %d could not be set, the first: %s", e.Changed, e.Failed, e.First)
}

// Delete removes p: a file or symlink, an empty folder, or with
// recursive a folder and everything in it.
func (c *Files) Delete(p string, recursive bool) error {
	fi, err := c.Lstat(p)
	if err != nil {
		return err
	}
	switch {
	case fi.IsDir() && recursive:
		return c.RemoveAll(p)
	case fi.IsDir():
		if list, err := c.ReadDir(p); err == nil && len(list) > 0 {
			return ErrNotEmpty
		}
		return c.RemoveDirectory(p)
	}
	return c.Remove(p)
}

// Move renames from to to: to's parents are made, a file there is
// replaced, a folder there is not (ErrExists). The error of a missing
// from is os.ErrNotExist, of to's parents a *PathError about them.
func (c *Files) Move(from, to string) error {
	if _, err := c.Lstat(from); err != nil {
		return err
	}
	if fi, err := c.Lstat(to); err == nil && fi.IsDir() {
		return ErrExists
	}
	if err := c.MkdirAll(path.Dir(to)); err != nil {
		return &PathError{Path: path.Dir(to), Err: err}
	}
	return c.PosixRename(from, to)
}

// MakeFolder makes p and its parents; with mode, p gets it. A file at p
// is ErrExists.
func (c *Files) MakeFolder(p string, mode *os.FileMode) (os.FileInfo, error) {
	if err := c.MkdirAll(p); err != nil {
		if errors.Is(err, syscall.ENOTDIR) {
			return nil, ErrExists
		}
		return nil, err
	}
	if mode != nil {
		if err := c.Chmod(p, *mode); err != nil {
			return nil, err
		}
	}
	return c.Stat(p)
}

// SetMode gives p mode and, with recursive and p a folder, everything
// under it but symlinks (a chmod through one would change what it points
// to); it says how many modes it set. Past 100 failures it stops: a
// *ModeError.
func (c *Files) SetMode(ctx context.Context, p string, mode os.FileMode, recursive bool) (int, error) {
	fi, err := c.Stat(p)
	if err != nil {
		return 0, err
	}
	if err := c.Chmod(p, mode); err != nil {
		return 0, err
	}
	changed := 1
	if !recursive || !fi.IsDir() {
		return changed, nil
	}
	var failed []string
	c.Walk(ctx, p, func(q string, fi os.FileInfo) bool {
		if fi.Mode()&os.ModeSymlink != 0 {
			return true
		}
		if err := c.Chmod(q, mode); err != nil {
			failed = append(failed, q)
			return len(failed) < 100
		}
		changed++
		return true
	}, nil)
	if len(failed) > 0 {
		return changed, &ModeError{Changed: changed, Failed: len(failed), First: failed[0]}
	}
	return changed, nil
}

// Entry is a file, folder or symlink: its path, what Lstat says of it,
// and a symlink's target.
type Entry struct {
	Path       string
	Info       os.FileInfo
	LinkTarget string
}

// Listing is p's entry and, when p is a folder or a symlink to one
// (Folder), up to the asked number of its entries; Truncated says more
// were left off.
type Listing struct {
	Entry
	Folder    bool
	Entries   []Entry
	Truncated bool
}

func (c *Files) entry(p string, fi os.FileInfo) Entry {
	e := Entry{Path: p, Info: fi}
	if fi.Mode()&os.ModeSymlink != 0 {
		e.LinkTarget, _ = c.ReadLink(p)
	}
	return e
}

// List says what p is and, for a folder, lists up to max entries.
func (c *Files) List(ctx context.Context, p string, max int) (Listing, error) {
	fi, err := c.Lstat(p)
	if err != nil {
		return Listing{}, err
	}
	l := Listing{Entry: c.entry(p, fi)}
	if fi.Mode()&os.ModeSymlink != 0 {
		if t, err := c.Stat(p); err == nil && t.IsDir() {
			fi = t // a link to a folder lists the folder
		}
	}
	if !fi.IsDir() {
		return l, nil
	}
	list, err := c.ReadDirContext(ctx, p)
	if err != nil {
		return Listing{}, err
	}
	l.Folder, l.Truncated = true, len(list) > max
	l.Entries = make([]Entry, 0, min(len(list), max))
	for _, e := range list[:min(len(list), max)] {
		l.Entries = append(l.Entries, c.entry(path.Join(p, e.Name()), e))
	}
	return l, nil
}

// ErrIsFolder: the path of a file to write names a folder.
var ErrIsFolder = errors.New("is a folder")

// BodyError: reading what was to be written failed (the caller's
// reader, not the session).
type BodyError struct{ Err error }

func (e *BodyError) Error() string { return "reading the content failed: " + e.Err.Error() }
func (e *BodyError) Unwrap() error { return e.Err }

// Write makes src, up to max bytes, the content of p: written into a new
// file beside it, renamed over p once complete, so that p is never
// half-written; parent folders are made, and a symlink at p is written
// through (in place). mode, when given, is the file's; else a replaced
// file keeps its mode. Past max it is ErrTooLarge and p is as it was; a
// folder at p is ErrIsFolder, src's own error a *BodyError, an error
// about p's folder a *PathError.
func (c *Files) Write(ctx context.Context, p string, src io.Reader, max int64, mode *os.FileMode) (os.FileInfo, error) {
	if p == "/" {
		return nil, ErrIsFolder
	}
	dir := path.Dir(p)
	if _, err := c.Stat(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, &PathError{Path: dir, Err: err}
	}
	if err := c.MkdirAll(dir); err != nil {
		return nil, &PathError{Path: dir, Err: err}
	}
	cur, err := c.Lstat(p)
	switch {
	case err == nil && cur.IsDir():
		return nil, ErrIsFolder
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return nil, err
	}
	target, flags := p, os.O_WRONLY|os.O_CREATE|os.O_EXCL
	inPlace := err == nil && cur.Mode()&os.ModeSymlink != 0
	if inPlace {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	} else {
		target = path.Join(dir, "."+path.Base(p)+".froog-"+store.NewSecret("")[:12])
	}
	f, err := c.OpenFile(target, flags)
	if err != nil {
		return nil, err
	}
	body := &io.LimitedReader{R: src, N: max + 1}
	n, err := f.ReadFrom(body)
	fail := func(e error) (os.FileInfo, error) {
		f.Close()
		if !inPlace {
			c.Remove(target)
		}
		return nil, e
	}
	switch {
	case n > max:
		return fail(ErrTooLarge)
	case err != nil && ctx.Err() != nil:
		return fail(ctx.Err())
	case err != nil:
		var se *sftp.StatusError
		if errors.As(err, &se) {
			return fail(err)
		}
		return fail(&BodyError{Err: err})
	}
	switch {
	case mode != nil:
		err = f.Chmod(*mode)
	case !inPlace && cur != nil:
		err = f.Chmod(cur.Mode() & (os.ModePerm | os.ModeSetgid | os.ModeSetuid | os.ModeSticky))
	}
	if err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		return fail(err)
	}
	if !inPlace {
		if err := c.PosixRename(target, p); err != nil {
			c.Remove(target)
			return nil, err
		}
	}
	return c.Stat(p)
}

// Content is an open file's bytes; WriteTo reads with several requests
// at once.
type Content interface {
	io.Reader
	io.WriterTo
	io.Closer
}

// OpenRead opens the file at p to read it, and says what it is (Stat:
// through a symlink); the caller closes it.
func (c *Files) OpenRead(p string) (Content, os.FileInfo, error) {
	f, err := c.Open(p)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// ErrNotFile: the path is a folder, a device or something else than a
// regular file.
var ErrNotFile = errors.New("not a regular file")

// Replace replaces every old in the file at p with new, the file read
// whole (up to max bytes, past it ErrTooLarge) and written in place;
// it says how many it replaced. A file without old is not written.
func (c *Files) Replace(p string, old, new []byte, max int64) (int, error) {
	fi, err := c.Stat(p)
	switch {
	case err != nil:
		return 0, err
	case !fi.Mode().IsRegular():
		return 0, ErrNotFile
	case fi.Size() > max:
		return 0, ErrTooLarge
	}
	f, err := c.Open(p)
	if err != nil {
		return 0, err
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	f.Close()
	if err != nil {
		return 0, err
	}
	if int64(len(b)) > max {
		return 0, ErrTooLarge
	}
	n := bytes.Count(b, old)
	if n == 0 {
		return 0, nil
	}
	f, err = c.OpenFile(p, os.O_WRONLY|os.O_TRUNC)
	if err != nil {
		return 0, err
	}
	if _, err := f.Write(bytes.ReplaceAll(b, old, new)); err != nil {
		f.Close()
		return 0, err
	}
	return n, f.Close()
}
