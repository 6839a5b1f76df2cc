package local

import (
	"errors"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
)

// serveSFTP serves the sftp subsystem on a session channel until the
// client closes it. The sandbox's files are its home folder and nothing
// else: every path is resolved in an os.Root of the home, so neither
// ".." nor a symlink reaches the host's other files (absolute paths are
// the home's real path, as $HOME says to the sandbox's commands).
func (s *sshd) serveSFTP(ch ssh.Channel) {
	root, err := os.OpenRoot(s.home)
	if err != nil {
		ch.Stderr().Write([]byte("froog: sftp: " + err.Error() + "\n"))
		return
	}
	defer root.Close()
	fs := confined{&homeFS{home: s.home, root: root}}
	h := sftp.Handlers{FileGet: fs, FilePut: fs, FileCmd: fs, FileList: fs}
	// Serve ends when the client closes its side; the channel stays open
	// for the exit status (the caller's), so no srv.Close here. Serve
	// returning does not mean its last replies are written: pkg/sftp's
	// packet manager may still be writing them when the caller sends
	// EOF, so writes are sealed first, and late ones dropped.
	w := &sealed{Channel: ch}
	sftp.NewRequestServer(w, h, sftp.WithStartDirectory(s.home), sftp.WithRSMaxTxPacket(256<<10)).Serve()
	w.seal()
}

// sealed is a channel whose writes stop at seal.
type sealed struct {
	ssh.Channel
	mu     sync.Mutex
	closed bool
}

func (w *sealed) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return 0, io.ErrClosedPipe
	}
	return w.Channel.Write(p)
}

func (w *sealed) seal() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
}

// confined answers a path that leads out of the home (through a
// symlink) as permission denied, as one outside it is.
type confined struct{ *homeFS }

func escaped(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) && pe.Err != nil && pe.Err.Error() == "path escapes from parent" {
		return &os.PathError{Op: pe.Op, Path: pe.Path, Err: syscall.EACCES}
	}
	return err
}

func (c confined) Fileread(r *sftp.Request) (io.ReaderAt, error) {
	f, err := c.homeFS.Fileread(r)
	return f, escaped(err)
}

func (c confined) Filewrite(r *sftp.Request) (io.WriterAt, error) {
	f, err := c.homeFS.Filewrite(r)
	return f, escaped(err)
}

func (c confined) OpenFile(r *sftp.Request) (sftp.WriterAtReaderAt, error) {
	f, err := c.homeFS.OpenFile(r)
	return f, escaped(err)
}

func (c confined) Filecmd(r *sftp.Request) error     { return escaped(c.homeFS.Filecmd(r)) }
func (c confined) PosixRename(r *sftp.Request) error { return escaped(c.homeFS.PosixRename(r)) }

func (c confined) Filelist(r *sftp.Request) (sftp.ListerAt, error) {
	l, err := c.homeFS.Filelist(r)
	return l, escaped(err)
}

func (c confined) Lstat(r *sftp.Request) (sftp.ListerAt, error) {
	l, err := c.homeFS.Lstat(r)
	return l, escaped(err)
}

// homeFS is the sftp request handler over one sandbox's home.
type homeFS struct {
	home string // absolute
	root *os.Root
}

var (
	_ sftp.OpenFileWriter       = confined{}
	_ sftp.PosixRenameFileCmder = confined{}
	_ sftp.LstatFileLister      = confined{}
	_ sftp.RealPathFileLister   = confined{}
	_ sftp.ReadlinkFileLister   = confined{}
)

// rel turns an absolute, clean path into one inside the root.
func (fs *homeFS) rel(op, p string) (string, error) {
	p = path.Clean(p)
	if p == fs.home {
		return ".", nil
	}
	if rest, ok := strings.CutPrefix(p, fs.home+"/"); ok {
		return rest, nil
	}
	return "", &os.PathError{Op: op, Path: p, Err: syscall.EACCES}
}

func (fs *homeFS) Fileread(r *sftp.Request) (io.ReaderAt, error) {
	name, err := fs.rel("open", r.Filepath)
	if err != nil {
		return nil, err
	}
	return fs.root.Open(name)
}

func (fs *homeFS) Filewrite(r *sftp.Request) (io.WriterAt, error) {
	return fs.open(r, os.O_WRONLY)
}

func (fs *homeFS) OpenFile(r *sftp.Request) (sftp.WriterAtReaderAt, error) {
	return fs.open(r, os.O_RDWR)
}

func (fs *homeFS) open(r *sftp.Request, flag int) (*os.File, error) {
	name, err := fs.rel("open", r.Filepath)
	if err != nil {
		return nil, err
	}
	f := r.Pflags()
	if f.Creat {
		flag |= os.O_CREATE
	}
	if f.Trunc {
		flag |= os.O_TRUNC
	}
	if f.Excl {
		flag |= os.O_EXCL
	}
	perm := os.FileMode(0o666)
	if r.AttrFlags().Permissions {
		perm = r.Attributes().FileMode().Perm()
	}
	return fs.root.OpenFile(name, flag, perm)
}

func (fs *homeFS) Filecmd(r *sftp.Request) error {
	name, err := fs.rel(strings.ToLower(r.Method), r.Filepath)
	if r.Method == "Symlink" {
		// Filepath is the link's target, any text; Target the new link.
		name, err = fs.rel("symlink", r.Target)
	}
	if err != nil {
		return err
	}
	switch r.Method {
	case "Setstat":
		return fs.setstat(name, r)
	case "Rename":
		to, err := fs.rel("rename", r.Target)
		if err != nil {
			return err
		}
		if _, err := fs.root.Lstat(to); err == nil {
			return &os.LinkError{Op: "rename", Old: r.Filepath, New: r.Target, Err: os.ErrExist}
		}
		return fs.root.Rename(name, to)
	case "Rmdir":
		if fi, err := fs.root.Lstat(name); err == nil && !fi.IsDir() {
			return &os.PathError{Op: "rmdir", Path: r.Filepath, Err: syscall.ENOTDIR}
		}
		return fs.root.Remove(name)
	case "Remove":
		if fi, err := fs.root.Lstat(name); err == nil && fi.IsDir() {
			return &os.PathError{Op: "remove", Path: r.Filepath, Err: syscall.EISDIR}
		}
		return fs.root.Remove(name)
	case "Mkdir":
		perm := os.FileMode(0o755)
		if r.AttrFlags().Permissions {
			perm = r.Attributes().FileMode().Perm()
		}
		return fs.root.Mkdir(name, perm)
	case "Link":
		to, err := fs.rel("link", r.Target)
		if err != nil {
			return err
		}
		return fs.root.Link(name, to)
	case "Symlink":
		return fs.root.Symlink(r.Filepath, name)
	}
	return sftp.ErrSSHFxOpUnsupported
}

func (fs *homeFS) PosixRename(r *sftp.Request) error {
	from, err := fs.rel("rename", r.Filepath)
	if err != nil {
		return err
	}
	to, err := fs.rel("rename", r.Target)
	if err != nil {
		return err
	}
	return fs.root.Rename(from, to)
}

// setstat changes size, permissions and times; the owner stays.
func (fs *homeFS) setstat(name string, r *sftp.Request) error {
	flags, attrs := r.AttrFlags(), r.Attributes()
	if flags.UidGid && (int(attrs.UID) != os.Getuid() || int(attrs.GID) != os.Getgid()) {
		return &os.PathError{Op: "chown", Path: r.Filepath, Err: syscall.EPERM}
	}
	if flags.Size {
		f, err := fs.root.OpenFile(name, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		err = f.Truncate(int64(attrs.Size))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	if flags.Permissions {
		if err := fs.root.Chmod(name, attrs.FileMode()&(os.ModePerm|os.ModeSetuid|os.ModeSetgid|os.ModeSticky)); err != nil {
			return err
		}
	}
	if flags.Acmodtime {
		if err := fs.root.Chtimes(name, attrs.AccessTime(), attrs.ModTime()); err != nil {
			return err
		}
	}
	return nil
}

func (fs *homeFS) Filelist(r *sftp.Request) (sftp.ListerAt, error) {
	name, err := fs.rel(strings.ToLower(r.Method), r.Filepath)
	if err != nil {
		return nil, err
	}
	switch r.Method {
	case "List":
		d, err := fs.root.Open(name)
		if err != nil {
			return nil, err
		}
		defer d.Close()
		list, err := d.Readdir(-1) // lstat, as sftp-server lists
		if err != nil {
			return nil, err
		}
		sort.Slice(list, func(i, j int) bool { return list[i].Name() < list[j].Name() })
		return listerAt(list), nil
	case "Stat":
		fi, err := fs.root.Stat(name)
		if err != nil {
			return nil, err
		}
		return listerAt{fi}, nil
	}
	return nil, sftp.ErrSSHFxOpUnsupported
}

func (fs *homeFS) Lstat(r *sftp.Request) (sftp.ListerAt, error) {
	name, err := fs.rel("lstat", r.Filepath)
	if err != nil {
		return nil, err
	}
	fi, err := fs.root.Lstat(name)
	if err != nil {
		return nil, err
	}
	return listerAt{fi}, nil
}

func (fs *homeFS) Readlink(p string) (string, error) {
	name, err := fs.rel("readlink", p)
	if err != nil {
		return "", err
	}
	return fs.root.Readlink(name)
}

// RealPath cleans p against the home; it does not resolve symlinks.
func (fs *homeFS) RealPath(p string) (string, error) {
	if !path.IsAbs(p) {
		p = path.Join(fs.home, p)
	}
	p = path.Clean(p)
	if _, err := fs.rel("realpath", p); err != nil {
		return "", err
	}
	return p, nil
}

type listerAt []os.FileInfo

func (l listerAt) ListAt(out []os.FileInfo, off int64) (int, error) {
	if off >= int64(len(l)) {
		return 0, io.EOF
	}
	n := copy(out, l[off:])
	if n < len(out) {
		return n, io.EOF
	}
	return n, nil
}
