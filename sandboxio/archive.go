package sandboxio

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/pkg/sftp"

	"froog.tech/froog/store"
)

// Unpacking an archive (Files.Unpack, PUT files/archive?path=DIR) changes nothing
// outside DIR, and nothing at all when the archive is refused:
//
//   - Entries are unpacked into a new folder inside DIR (staging) that
//     only this request writes, and moved into place only once the whole
//     archive was read and checked. A refused archive (a bad entry, a
//     limit, a broken gzip stream, a conflict with what DIR holds) leaves
//     DIR as it was.
//   - Names are relative and stay inside: no absolute path, no "..". An
//     entry is only ever written under folders this unpacking made, so a
//     symlink (from the archive or already in DIR) is never followed: a
//     file "through" a symlink is refused.
//   - Symlinks must point inside DIR (relative, not climbing out);
//     hardlinks only to a file of the same archive; device files, pipes
//     and other types are refused.
//   - Limits: 100 MiB compressed, 1 GiB and 100,000 entries unpacked;
//     an entry's announced size counts before any of it is written.
//   - Moving into place: a new name moves whole; a folder that exists is
//     merged into; a file or symlink there is replaced (not followed); a
//     folder where the archive has a file, or the reverse, refuses the
//     archive before anything moves.
//
// Owners come from the SFTP session (the sandbox user), modes from the
// archive (permission bits only), modification times too.

// Unpacking limits; maxNameBytes bounds an entry's name and a
// symlink's target.
const (
	maxUnpackBytes   = 1 << 30
	maxUnpackEntries = 100000
	maxNameBytes     = 4096
)

// unpackFS is what unpacking needs of a file system; paths are absolute.
// sftpFS gives it over SFTP.
type unpackFS interface {
	Lstat(p string) (os.FileInfo, error)
	Mkdir(p string) error
	Create(p string) (io.WriteCloser, error) // a new file; fails if p exists
	Symlink(target, link string) error
	Link(oldname, newname string) error
	Chmod(p string, m os.FileMode) error
	Chtimes(p string, atime, mtime time.Time) error
	Rename(from, to string) error // replaces a file at to
	Remove(p string) error
	RemoveAll(p string) error
}

type sftpFS struct{ *sftp.Client }

func (f sftpFS) Create(p string) (io.WriteCloser, error) {
	return f.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
}
func (f sftpFS) Rename(from, to string) error { return f.PosixRename(from, to) }

// Why an archive is refused: the Kind of an *ArchiveError.
var (
	ErrBadArchive = errors.New("not a valid .tar.gz, or an entry that is not unpacked")
	ErrTooLarge   = errors.New("over a limit")
	ErrConflict   = errors.New("in conflict with what the folder holds")
)

// ArchiveError refuses an archive: Kind is ErrBadArchive, ErrTooLarge
// or ErrConflict, Msg says which entry and why.
type ArchiveError struct {
	Kind error
	Msg  string
}

func (e *ArchiveError) Error() string { return e.Msg }
func (e *ArchiveError) Unwrap() error { return e.Kind }

// archiveError refuses an archive.
func archiveError(format string, args ...any) *ArchiveError {
	return &ArchiveError{Kind: ErrBadArchive, Msg: fmt.Sprintf(format, args...)}
}

func tooLarge(format string, args ...any) *ArchiveError {
	return &ArchiveError{Kind: ErrTooLarge, Msg: fmt.Sprintf(format, args...)}
}

func conflict(format string, args ...any) *ArchiveError {
	return &ArchiveError{Kind: ErrConflict, Msg: fmt.Sprintf(format, args...)}
}

// archiveName checks an entry's name and returns it clean and relative;
// "" is DIR itself.
func archiveName(name string) (string, error) {
	if strings.ContainsRune(name, 0) || len(name) > maxNameBytes {
		return "", archiveError("an entry's name is not a path of up to %d bytes", maxNameBytes)
	}
	if strings.HasPrefix(name, "/") {
		return "", archiveError("entry %q is an absolute path", name)
	}
	for _, part := range strings.Split(name, "/") {
		if part == ".." {
			return "", archiveError("entry %q climbs out of the folder (..)", name)
		}
		if len(part) > 255 {
			return "", archiveError("entry %q has a name over 255 bytes", name)
		}
	}
	clean := path.Clean(name)
	if clean == "." {
		return "", nil
	}
	return clean, nil
}

// checkSymlink checks that a link at name (clean, relative) to target
// stays inside the folder.
func checkSymlink(name, target string) error {
	switch {
	case target == "" || strings.ContainsRune(target, 0) || len(target) > maxNameBytes:
		return archiveError("symlink %q has no valid target", name)
	case strings.HasPrefix(target, "/"):
		return archiveError("symlink %q points to an absolute path", name)
	}
	to := path.Join(path.Dir(name), target)
	if to == ".." || strings.HasPrefix(to, "../") {
		return archiveError("symlink %q points out of the folder", name)
	}
	return nil
}

// kind of a staged entry.
type kind byte

const (
	kindDir kind = iota + 1
	kindFile
	kindLink // symlink
)

// Unpacked is what an archive brought: Path is the folder.
type Unpacked struct {
	Path     string `json:"path"`
	Files    int    `json:"files"`
	Folders  int    `json:"folders"`
	Symlinks int    `json:"symlinks"`
	Bytes    int64  `json:"bytes"`
}

// unpacker unpacks one archive.
type unpacker struct {
	fs      unpackFS
	dir     string // the target, an existing folder
	stage   string // inside dir
	kinds   map[string]kind
	order   []string // names in first-seen order
	dirMode map[string]os.FileMode
	dirTime map[string]time.Time
	res     Unpacked
	budget  int64 // bytes left
	max     int64

	// Small files are written by workers.
	wg   sync.WaitGroup
	sem  chan struct{}
	mu   sync.Mutex
	werr error
}

// Unpack reads a .tar.gz from r into dir (absolute), made if missing,
// as the rules above say; a folder it made is removed again when the
// archive is refused. Its errors are an *ArchiveError (r's own errors
// pass when they are one: a caller's body limit), ErrNotFolder when dir
// is something else, a *PathError for an entry the session could not
// write, or ctx's.
func (c *Files) Unpack(ctx context.Context, dir string, r io.Reader) (Unpacked, error) {
	// The highest folder this call makes, removed again on failure.
	made := ""
	fi, err := c.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		made = dir
		for d := path.Dir(dir); d != "/"; d = path.Dir(d) {
			if _, err := c.Lstat(d); err == nil {
				break
			}
			made = d
		}
		if err := c.MkdirAll(dir); err != nil {
			return Unpacked{}, err
		}
	case err != nil:
		return Unpacked{}, err
	case !fi.IsDir():
		return Unpacked{}, ErrNotFolder
	}
	res, err := unpack(ctx, sftpFS{c.Client}, dir, r, maxUnpackBytes)
	if err != nil && made != "" {
		c.RemoveAll(made)
	}
	return res, err
}

// ErrNotFolder: the path is a file or something else, not a folder.
var ErrNotFolder = errors.New("not a folder")

// PathError is a file system error about Path (an archive entry's name
// as the archive gives it).
type PathError struct {
	Path string
	Err  error
}

func (e *PathError) Error() string { return e.Path + ": " + e.Err.Error() }
func (e *PathError) Unwrap() error { return e.Err }

// pathError is err about p, unless it is already an *ArchiveError.
func pathError(p string, err error) error {
	var ae *ArchiveError
	if errors.As(err, &ae) {
		return ae
	}
	return &PathError{Path: p, Err: err}
}

// unpack reads a .tar.gz from r into dir (an existing folder).
// It writes at most maxBytes of files.
func unpack(ctx context.Context, fs unpackFS, dir string, r io.Reader, maxBytes int64) (Unpacked, error) {
	u := &unpacker{fs: fs, dir: dir, kinds: map[string]kind{}, dirMode: map[string]os.FileMode{},
		dirTime: map[string]time.Time{}, budget: maxBytes, max: maxBytes, sem: make(chan struct{}, 8)}
	u.res.Path = dir
	u.stage = path.Join(dir, ".froog-unpack-"+store.NewSecret("")[:12])
	if err := fs.Mkdir(u.stage); err != nil {
		return u.res, pathError(dir, err)
	}
	err := u.read(ctx, r)
	if err == nil {
		err = u.place(true) // check every move first
	}
	if err == nil {
		err = u.place(false)
	}
	if err == nil {
		u.finishDirs()
	}
	fs.RemoveAll(u.stage)
	return u.res, err
}

func (u *unpacker) staged(name string) string { return path.Join(u.stage, name) }

func (u *unpacker) fail(err error) {
	u.mu.Lock()
	if u.werr == nil {
		u.werr = err
	}
	u.mu.Unlock()
}

func (u *unpacker) failed() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.werr
}

// settle waits for the workers and returns the first error of theirs.
func (u *unpacker) settle() error {
	u.wg.Wait()
	return u.failed()
}

func (u *unpacker) read(ctx context.Context, r io.Reader) error {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return archiveError("the body is not gzip-compressed (a .tar.gz)")
	}
	tr := tar.NewReader(gz)
	entries := 0
	for {
		if err := ctx.Err(); err != nil {
			u.settle()
			return err
		}
		if err := u.failed(); err != nil {
			u.settle()
			return err
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			u.settle()
			return u.readError(err)
		}
		if entries++; entries > maxUnpackEntries {
			u.settle()
			return tooLarge("the archive holds over %d entries", maxUnpackEntries)
		}
		if err := u.entry(hdr, tr); err != nil {
			u.settle()
			return err
		}
	}
	// The rest of the stream, to its gzip checksum.
	if _, err := io.Copy(io.Discard, io.LimitReader(gz, 1<<20)); err != nil {
		u.settle()
		return u.readError(err)
	}
	return u.settle()
}

// readError says why reading the body failed.
func (u *unpacker) readError(err error) error {
	var e *ArchiveError
	if errors.As(err, &e) { // the body's own limit (see Unpack)
		return e
	}
	return archiveError("the archive is not a valid .tar.gz: %v", err)
}

func (u *unpacker) entry(hdr *tar.Header, tr io.Reader) error {
	name, err := archiveName(hdr.Name)
	if err != nil {
		return err
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		if name == "" {
			return nil // DIR itself: it stays as it is
		}
		if err := u.parents(name); err != nil {
			return err
		}
		if err := u.mkdir(name, hdr.Name); err != nil {
			return err
		}
		u.dirMode[name] = os.FileMode(hdr.Mode).Perm()
		u.dirTime[name] = hdr.ModTime
		return nil
	case tar.TypeReg: // the reader reports the old TypeRegA as TypeReg
		if name == "" {
			return archiveError("entry %q is a file in place of the folder", hdr.Name)
		}
		if hdr.Size < 0 || hdr.Size > u.budget {
			return tooLarge("the archive unpacks to over %d MiB (at %q)", u.max>>20, hdr.Name)
		}
		u.budget -= hdr.Size
		if err := u.replaceable(name, hdr.Name); err != nil {
			return err
		}
		if err := u.file(name, hdr, tr); err != nil {
			return err
		}
		u.res.Files++
		u.res.Bytes += hdr.Size
		return nil
	case tar.TypeSymlink:
		if name == "" {
			return archiveError("entry %q is a symlink in place of the folder", hdr.Name)
		}
		if err := checkSymlink(name, hdr.Linkname); err != nil {
			return err
		}
		if err := u.replaceable(name, hdr.Name); err != nil {
			return err
		}
		if err := u.fs.Symlink(hdr.Linkname, u.staged(name)); err != nil {
			return pathError(hdr.Name, err)
		}
		u.note(name, kindLink)
		u.res.Symlinks++
		return nil
	case tar.TypeLink:
		target, err := archiveName(hdr.Linkname)
		if err != nil || target == "" || u.kinds[target] != kindFile {
			return archiveError("hardlink %q points to %q, which is not a file earlier in the archive", hdr.Name, hdr.Linkname)
		}
		if name == "" {
			return archiveError("entry %q is a hardlink in place of the folder", hdr.Name)
		}
		if err := u.replaceable(name, hdr.Name); err != nil {
			return err
		}
		if err := u.settle(); err != nil { // the target is written
			return err
		}
		if err := u.fs.Link(u.staged(target), u.staged(name)); err != nil {
			return pathError(hdr.Name, err)
		}
		u.note(name, kindFile)
		u.res.Files++
		return nil
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		return archiveError("entry %q is a device file or a pipe, which is not unpacked", hdr.Name)
	case tar.TypeXGlobalHeader:
		return nil
	}
	return archiveError("entry %q has a type (%q) that is not unpacked", hdr.Name, string(hdr.Typeflag))
}

func (u *unpacker) note(name string, k kind) {
	if _, ok := u.kinds[name]; !ok {
		u.order = append(u.order, name)
	}
	u.kinds[name] = k
}

// parents makes the folders above name that the archive did not list,
// and refuses a name under something that is not a folder.
func (u *unpacker) parents(name string) error {
	dir := path.Dir(name)
	if dir == "." {
		return nil
	}
	if err := u.parents(dir); err != nil {
		return err
	}
	switch u.kinds[dir] {
	case kindDir:
		return nil
	case 0:
		return u.mkdir(dir, dir)
	}
	return archiveError("entry %q goes through %q, which is not a folder", name, dir)
}

func (u *unpacker) mkdir(name, shown string) error {
	switch u.kinds[name] {
	case kindDir:
		return nil
	case 0:
	default:
		return archiveError("entry %q is a folder and also a file or symlink", shown)
	}
	if err := u.fs.Mkdir(u.staged(name)); err != nil {
		return pathError(shown, err)
	}
	u.note(name, kindDir)
	u.res.Folders++
	return nil
}

// replaceable makes way for a file or symlink at name: its parents, and
// no earlier entry of that name (a later entry wins, as with tar; a
// folder is never replaced).
func (u *unpacker) replaceable(name, shown string) error {
	if err := u.parents(name); err != nil {
		return err
	}
	switch u.kinds[name] {
	case 0:
		return nil
	case kindDir:
		return archiveError("entry %q is a folder and also a file or symlink", shown)
	}
	if err := u.settle(); err != nil {
		return err
	}
	if err := u.fs.Remove(u.staged(name)); err != nil {
		return pathError(shown, err)
	}
	return nil
}

// smallFile: files up to this size are read into memory and written by
// workers, several at once.
const smallFile = 64 << 10

func (u *unpacker) file(name string, hdr *tar.Header, tr io.Reader) error {
	u.note(name, kindFile)
	p := u.staged(name)
	mode, mtime := os.FileMode(hdr.Mode).Perm(), hdr.ModTime
	if hdr.Size <= smallFile {
		b := make([]byte, hdr.Size)
		if _, err := io.ReadFull(tr, b); err != nil {
			return u.readError(err)
		}
		u.sem <- struct{}{}
		u.wg.Add(1)
		go func() {
			defer func() { <-u.sem; u.wg.Done() }()
			if err := u.write(p, hdr.Name, bytes.NewReader(b), hdr.Size, mode, mtime); err != nil {
				u.fail(err)
			}
		}()
		return nil
	}
	return u.write(p, hdr.Name, tr, hdr.Size, mode, mtime)
}

func (u *unpacker) write(p, shown string, r io.Reader, size int64, mode os.FileMode, mtime time.Time) error {
	f, err := u.fs.Create(p)
	if err != nil {
		return pathError(shown, err)
	}
	src := &readCounter{r: r}
	// A LimitedReader lets SFTP write a large file with several requests
	// at once (it sizes them by N).
	_, err = io.Copy(f, &io.LimitedReader{R: src, N: size})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		if src.err != nil {
			return u.readError(src.err)
		}
		return pathError(shown, err)
	}
	if err := u.fs.Chmod(p, mode); err != nil {
		return pathError(shown, err)
	}
	if !mtime.IsZero() {
		if err := u.fs.Chtimes(p, mtime, mtime); err != nil {
			return pathError(shown, err)
		}
	}
	return nil
}

// readCounter tells the body's errors from the file system's.
type readCounter struct {
	r   io.Reader
	err error
}

func (c *readCounter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if err != nil && err != io.EOF {
		c.err = err
	}
	return n, err
}

// place moves the staged entries into dir; with check it only looks,
// and refuses conflicts, so that a refused archive moves nothing.
func (u *unpacker) place(check bool) error {
	var walk func(name string) error
	children := map[string][]string{}
	for _, n := range u.order {
		d := path.Dir(n)
		if d == "." {
			d = ""
		}
		children[d] = append(children[d], n)
	}
	walk = func(name string) error {
		dst := path.Join(u.dir, name)
		fi, err := u.fs.Lstat(dst)
		switch {
		case errors.Is(err, os.ErrNotExist):
			if check {
				return nil
			}
			if err := u.fs.Rename(u.staged(name), dst); err != nil {
				return pathError(name, err)
			}
			return nil
		case err != nil:
			return pathError(name, err)
		}
		isDir := fi.IsDir() // Lstat: a symlink to a folder is not one
		switch {
		case u.kinds[name] == kindDir && isDir:
			for _, c := range children[name] {
				if err := walk(c); err != nil {
					return err
				}
			}
			return nil
		case u.kinds[name] == kindDir:
			return conflict("%s is a file or symlink in the folder and a folder in the archive", name)
		case isDir:
			return conflict("%s is a folder in the folder and a file in the archive", name)
		}
		if check {
			return nil
		}
		if err := u.fs.Rename(u.staged(name), dst); err != nil {
			return pathError(name, err)
		}
		return nil
	}
	for _, n := range children[""] {
		if err := walk(n); err != nil {
			return err
		}
	}
	return nil
}

// finishDirs gives the archive's folders their modes and times, deepest
// first (a folder's time changes as entries go into it). It is best
// effort: the files are in place.
func (u *unpacker) finishDirs() {
	for i := len(u.order) - 1; i >= 0; i-- {
		n := u.order[i]
		if u.kinds[n] != kindDir {
			continue
		}
		dst := path.Join(u.dir, n)
		if m, ok := u.dirMode[n]; ok {
			u.fs.Chmod(dst, m|0o700) // the user keeps their way in
		}
		if t, ok := u.dirTime[n]; ok && !t.IsZero() {
			u.fs.Chtimes(dst, t, t)
		}
	}
}
