package api

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"froog.tech/froog/sandboxio"
	"froog.tech/froog/store"
)

// The files routes (the docs' files rows of the HTTP API table) work over
// SFTP on the sandbox's SSH connection (the tunnel's Session, subsystem
// sftp): the SFTP server runs inside the sandbox as the sandbox user, so
// what a call can reach is what that user can, and everything it makes
// is the user's. Paths are the sandbox's: relative ones (and "~", "~/…")
// from the user's home, absolute ones as they are. Contents stream both
// ways; no file is ever held whole in memory (replace, documented at
// 5 MiB a file, is the exception).

// Limits of the files routes (the docs' HTTP API table).
const (
	maxFileBytes     = 100 << 20 // files/content, archives, links
	maxPathBytes     = 4096
	maxSearchResults = 10000
	maxReplaceFiles  = 100
	maxReplaceBytes  = 5 << 20
	maxListEntries   = 10000
	// maxFindFile: find skips larger files.
	maxFindFile = 50 << 20
)

// FileSessions opens SFTP sessions in sandboxes: sandboxio's, through
// shellFiles; a test may give its own.
type FileSessions interface {
	OpenFiles(ctx context.Context, sandboxID string) (FileSession, error)
}

// FileSession is one SFTP session in a sandbox, as the files routes use
// it (*sandboxio.Files is the real one; its doc says what each does).
type FileSession interface {
	Home() string
	Stat(p string) (os.FileInfo, error)
	Lstat(p string) (os.FileInfo, error)
	List(ctx context.Context, p string, max int) (sandboxio.Listing, error)
	OpenRead(p string) (sandboxio.Content, os.FileInfo, error)
	Write(ctx context.Context, p string, src io.Reader, max int64, mode *os.FileMode) (os.FileInfo, error)
	Replace(p string, old, new []byte, max int64) (int, error)
	Delete(p string, recursive bool) error
	Move(from, to string) error
	MakeFolder(p string, mode *os.FileMode) (os.FileInfo, error)
	SetMode(ctx context.Context, p string, mode os.FileMode, recursive bool) (int, error)
	Walk(ctx context.Context, root string, fn func(p string, fi os.FileInfo) bool, onErr func(p string, err error)) bool
	Find(ctx context.Context, files []string, match func([]byte) bool) ([]sandboxio.Match, bool)
	Unpack(ctx context.Context, dir string, r io.Reader) (sandboxio.Unpacked, error)
	Close()
}

var _ FileSession = (*sandboxio.Files)(nil)

// shellFiles is sandboxio's Shell as FileSessions.
type shellFiles struct{ sh *sandboxio.Shell }

func (s shellFiles) OpenFiles(ctx context.Context, sandboxID string) (FileSession, error) {
	f, err := s.sh.OpenFiles(ctx, sandboxID)
	if err != nil {
		return nil, err // not a nil *Files in a non-nil FileSession
	}
	return f, nil
}

// fileConn is one SFTP session in a sandbox, and the slot it holds.
type fileConn struct {
	FileSession
	home    string
	sb      *store.Sandbox
	release func()
}

// Close ends the session and gives its slot back.
func (c *fileConn) Close() {
	c.FileSession.Close()
	c.release()
}

// fileSessionsAtOnce bounds the SFTP sessions open at once in a sandbox;
// more calls wait for one to end. With the 8 command slots it stays
// under what the sandbox's SSH server allows on one connection (the OS
// images and the test guest raise OpenSSH's 10 to 64).
const fileSessionsAtOnce = 8

// waitSlots bounds something per sandbox; take waits for a slot.
type waitSlots struct {
	mu  sync.Mutex
	sem map[string]*slot
}

type slot struct {
	ch    chan struct{}
	users int
}

func (w *waitSlots) take(ctx context.Context, id string, n int) (func(), error) {
	w.mu.Lock()
	if w.sem == nil {
		w.sem = map[string]*slot{}
	}
	sl := w.sem[id]
	if sl == nil {
		sl = &slot{ch: make(chan struct{}, n)}
		w.sem[id] = sl
	}
	sl.users++
	w.mu.Unlock()
	done := func() {
		w.mu.Lock()
		if sl.users--; sl.users == 0 {
			delete(w.sem, id)
		}
		w.mu.Unlock()
	}
	select {
	case sl.ch <- struct{}{}:
		return func() { <-sl.ch; done() }, nil
	case <-ctx.Done():
		done()
		return nil, ctx.Err()
	}
}

// openFiles opens an SFTP session in sb; it ends with ctx or Close.
func (s *Server) openFiles(ctx context.Context, sb *store.Sandbox) (_ *fileConn, err error) {
	release, err := s.fileSlots.take(ctx, sb.ID, fileSessionsAtOnce)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			release()
		}
	}()
	f, err := s.fileSessions.OpenFiles(ctx, sb.ID)
	if errors.Is(err, sandboxio.ErrNoSFTP) {
		return nil, withCause(errorf(http.StatusBadGateway, "sandbox_unreachable", "sandbox %q has no SFTP server", sb.Name), err)
	}
	if err != nil {
		return nil, ioError(sb, err)
	}
	return &fileConn{FileSession: f, home: f.Home(), sb: sb, release: release}, nil
}

// files finds the path's sandbox, running (auto-start as for exec), and
// opens an SFTP session in it.
func (s *Server) files(r *http.Request) (*fileConn, error) {
	sb, err := s.runningSandbox(r)
	if err != nil {
		return nil, err
	}
	return s.openFiles(r.Context(), sb)
}

// checkPath checks a path from a request: given, up to 4096 bytes, no NUL.
func checkPath(field, p string) error {
	switch {
	case p == "":
		return invalid("%s is required", field)
	case len(p) > maxPathBytes:
		return invalid("%s is up to %d bytes", field, maxPathBytes)
	case strings.ContainsRune(p, 0):
		return invalid("%s holds a NUL byte", field)
	}
	return nil
}

// pathQuery checks the request's query, which may hold path and the
// names in more, and returns it with its path, checked; an absent path is
// the home folder where it is optional.
func pathQuery(r *http.Request, optional bool, more ...string) (url.Values, string, error) {
	q := r.URL.Query()
	if err := checkQuery(q, append(more, "path")...); err != nil {
		return nil, "", err
	}
	p := q.Get("path")
	if p == "" && optional {
		p = "~"
	}
	return q, p, checkPath("path", p)
}

// resolvePath makes p absolute and clean: "~" and relative paths are
// from home.
func resolvePath(home, p string) string {
	switch {
	case p == "~":
		p = home
	case strings.HasPrefix(p, "~/"):
		p = path.Join(home, p[2:])
	case !path.IsAbs(p):
		p = path.Join(home, p)
	}
	return path.Clean(p)
}

func (c *fileConn) abs(p string) string { return resolvePath(c.home, p) }

// parseMode reads an octal mode such as "755" or "0700".
func parseMode(field, v string) (os.FileMode, error) {
	if len(v) == 0 || len(v) > 4 {
		return 0, invalid("%s is an octal mode such as \"755\"", field)
	}
	n, err := strconv.ParseUint(v, 8, 32)
	if err != nil || n > 0o7777 {
		return 0, invalid("%s is an octal mode such as \"755\"", field)
	}
	return fileMode(uint32(n)), nil
}

// fileMode turns Unix permission bits into an os.FileMode.
func fileMode(n uint32) os.FileMode {
	m := os.FileMode(n & 0o777)
	if n&0o4000 != 0 {
		m |= os.ModeSetuid
	}
	if n&0o2000 != 0 {
		m |= os.ModeSetgid
	}
	if n&0o1000 != 0 {
		m |= os.ModeSticky
	}
	return m
}

// unixMode is m's permission bits as a Unix mode.
func unixMode(m os.FileMode) uint32 {
	n := uint32(m.Perm())
	if m&os.ModeSetuid != 0 {
		n |= 0o4000
	}
	if m&os.ModeSetgid != 0 {
		n |= 0o2000
	}
	if m&os.ModeSticky != 0 {
		n |= 0o1000
	}
	return n
}

// fileError is the API's answer to an error of a files call about p:
// sandboxio's (an archive refused, a path that is not a folder, an
// error about a path of its own) or the session's, in sandboxio's words
// (FileCause). It is the one place that maps them.
func fileError(p string, err error) error {
	var ae *Error
	var arch *sandboxio.ArchiveError
	var pe *sandboxio.PathError
	var re *sandboxio.RefusedError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &arch):
		switch {
		case errors.Is(arch, sandboxio.ErrTooLarge):
			return errorf(http.StatusRequestEntityTooLarge, "archive_too_large", "%s", arch.Msg)
		case errors.Is(arch, sandboxio.ErrConflict):
			return errorf(http.StatusConflict, "archive_conflict", "%s", arch.Msg)
		}
		return badRequest("invalid_archive", "%s", arch.Msg)
	case errors.Is(err, sandboxio.ErrNotFolder):
		return errorf(http.StatusConflict, "not_a_folder", "%s is not a folder", p)
	case errors.As(err, &pe):
		return fileError(pe.Path, pe.Err)
	}
	err = sandboxio.FileCause(err)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return errorf(http.StatusNotFound, "not_found", "no such file or folder: %s", p)
	case errors.Is(err, os.ErrPermission):
		return errorf(http.StatusForbidden, "permission_denied", "permission denied: %s", p)
	case errors.Is(err, syscall.ENOTDIR):
		return errorf(http.StatusConflict, "not_a_folder", "a part of the path is not a folder: %s", p)
	case errors.Is(err, context.Canceled):
		return err
	case errors.As(err, &re):
		return errorf(http.StatusConflict, "file_error", "%s: %s", p, re.Msg)
	}
	return withCause(errorf(http.StatusBadGateway, "sandbox_connection_lost", "the connection to the sandbox was lost"), err)
}

// fileView is what the API says of a file or folder.
type fileView struct {
	Path       string     `json:"path"`
	Name       string     `json:"name"`
	Type       string     `json:"type"` // file, dir, symlink, other
	Size       int64      `json:"size"`
	Mode       string     `json:"mode"` // octal, "644"
	ModifiedAt time.Time  `json:"modified_at"`
	LinkTarget string     `json:"link_target,omitempty"`
	Entries    []fileView `json:"entries,omitempty"`
	Truncated  *bool      `json:"truncated,omitempty"`
}

func fileType(m os.FileMode) string {
	switch {
	case m.IsRegular():
		return "file"
	case m.IsDir():
		return "dir"
	case m&os.ModeSymlink != 0:
		return "symlink"
	}
	return "other"
}

func viewFile(p string, fi os.FileInfo) fileView {
	return fileView{Path: p, Name: path.Base(p), Type: fileType(fi.Mode()), Size: fi.Size(),
		Mode: strconv.FormatUint(uint64(unixMode(fi.Mode())), 8), ModifiedAt: fi.ModTime().UTC()}
}

func viewEntry(e sandboxio.Entry) fileView {
	v := viewFile(e.Path, e.Info)
	v.LinkTarget = e.LinkTarget
	return v
}

// GET files?path=P: a file's details, or a folder and its entries.
func (s *Server) getFiles(w http.ResponseWriter, r *http.Request) error {
	_, p, err := pathQuery(r, true)
	if err != nil {
		return err
	}
	c, err := s.files(r)
	if err != nil {
		return err
	}
	defer c.Close()
	l, err := c.List(r.Context(), c.abs(p), maxListEntries)
	if err != nil {
		return fileError(p, err)
	}
	v := viewEntry(l.Entry)
	if l.Folder {
		v.Truncated = &l.Truncated
		v.Entries = make([]fileView, 0, len(l.Entries))
		for _, e := range l.Entries {
			v.Entries = append(v.Entries, viewEntry(e))
		}
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

// contentHeaders make a download safe to serve from the API's own host:
// never rendered, never sniffed, never cached.
func contentHeaders(h http.Header, name string, size int64, mod time.Time) {
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Length", strconv.FormatInt(size, 10))
	h.Set("Content-Disposition", "attachment; filename*=UTF-8''"+url.PathEscape(name))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	h.Set("Cache-Control", "private, no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Last-Modified", mod.UTC().Format(http.TimeFormat))
}

// GET files/content?path=P: the file's bytes.
func (s *Server) getFileContent(w http.ResponseWriter, r *http.Request) error {
	_, p, err := pathQuery(r, false)
	if err != nil {
		return err
	}
	c, err := s.files(r)
	if err != nil {
		return err
	}
	defer c.Close()
	return s.sendFile(w, r, c, p)
}

// sendFile streams the file at p.
func (s *Server) sendFile(w http.ResponseWriter, r *http.Request, c *fileConn, p string) error {
	abs := c.abs(p)
	f, fi, err := c.OpenRead(abs)
	if err != nil {
		return fileError(p, err)
	}
	defer f.Close()
	switch {
	case fi.IsDir():
		return badRequest("is_a_folder", "%s is a folder; download files one by one, or pack it with exec", p)
	case !fi.Mode().IsRegular():
		return badRequest("not_a_file", "%s is not a regular file", p)
	case fi.Size() > s.maxFile:
		return errorf(http.StatusRequestEntityTooLarge, "file_too_large", "%s is over %d MiB; copy it with scp or split it", p, s.maxFile>>20)
	}
	contentHeaders(w.Header(), path.Base(abs), fi.Size(), fi.ModTime())
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return nil
	}
	ew := &exactWriter{w: w, left: fi.Size()}
	if _, err := f.WriteTo(ew); err != nil || ew.left != 0 {
		// The status is sent: a short body is all the client can be told,
		// and the connection is cut so that it cannot take it for whole.
		// (A file that shrank, or an SFTP server that read less than asked
		// in the middle of a file, ends here too.)
		panic(http.ErrAbortHandler)
	}
	return nil
}

// exactWriter takes exactly left bytes: a file that grows while it is
// sent is cut at the size announced.
type exactWriter struct {
	w    io.Writer
	left int64
}

var errGrew = errors.New("the file grew while it was sent")

func (e *exactWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > e.left {
		n, _ := e.w.Write(p[:e.left])
		e.left -= int64(n)
		return n, errGrew
	}
	n, err := e.w.Write(p)
	e.left -= int64(n)
	return n, err
}

// PUT files/content?path=P&mode=755: the body becomes the file.
func (s *Server) putFileContent(w http.ResponseWriter, r *http.Request) error {
	q, p, err := pathQuery(r, false, "mode")
	if err != nil {
		return err
	}
	var mode *os.FileMode
	if v := q.Get("mode"); v != "" || q.Has("mode") {
		m, err := parseMode("mode", v)
		if err != nil {
			return err
		}
		mode = &m
	}
	if err := s.checkLength(r); err != nil {
		return err
	}
	c, err := s.files(r)
	if err != nil {
		return err
	}
	defer c.Close()
	v, err := s.receiveFile(r, c, p, mode)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

// checkLength refuses a body announced over the file limit before any of
// it is read.
func (s *Server) checkLength(r *http.Request) error {
	if r.ContentLength > s.maxFile {
		return errorf(http.StatusRequestEntityTooLarge, "file_too_large", "the body is over %d MiB", s.maxFile>>20)
	}
	return nil
}

// receiveFile writes the request body to p (sandboxio's Files.Write:
// never half-written, parents made, a symlink written through).
func (s *Server) receiveFile(r *http.Request, c *fileConn, p string, mode *os.FileMode) (fileView, error) {
	abs := c.abs(p)
	fi, err := c.Write(r.Context(), abs, r.Body, s.maxFile, mode)
	var be *sandboxio.BodyError
	switch {
	case err == nil:
		return viewFile(abs, fi), nil
	case errors.Is(err, sandboxio.ErrIsFolder):
		return fileView{}, badRequest("is_a_folder", "%s is a folder", p)
	case errors.Is(err, sandboxio.ErrTooLarge):
		return fileView{}, errorf(http.StatusRequestEntityTooLarge, "file_too_large", "the body is over %d MiB", s.maxFile>>20)
	case r.Context().Err() != nil && errors.Is(err, r.Context().Err()):
		return fileView{}, err
	case errors.As(err, &be):
		return fileView{}, badRequest("invalid_body", "reading the request body failed")
	}
	return fileView{}, fileError(p, err)
}

// DELETE files?path=P&recursive=true
func (s *Server) deleteFiles(w http.ResponseWriter, r *http.Request) error {
	q, p, err := pathQuery(r, false, "recursive")
	if err != nil {
		return err
	}
	recursive, err := queryBool(q, "recursive")
	if err != nil {
		return err
	}
	c, err := s.files(r)
	if err != nil {
		return err
	}
	defer c.Close()
	abs := c.abs(p)
	if abs == "/" || abs == c.home {
		return badRequest("invalid_value", "%s is the home or root folder, which stays", p)
	}
	if err := c.Delete(abs, recursive); errors.Is(err, sandboxio.ErrNotEmpty) {
		return errorf(http.StatusConflict, "folder_not_empty", "%s is a folder that is not empty; pass recursive=true to delete it and its contents", p)
	} else if err != nil {
		return fileError(p, err)
	}
	writeJSON(w, http.StatusOK, map[string]any{"path": abs, "deleted": true})
	return nil
}

func queryBool(q url.Values, name string) (bool, error) {
	switch q.Get(name) {
	case "", "false", "0":
		return false, nil
	case "true", "1":
		return true, nil
	}
	return false, badRequest("invalid_query", "%s is true or false", name)
}

type moveRequest struct {
	From *string `json:"from"`
	To   *string `json:"to"`
}

// POST files/move {from, to}: a rename; the destination's parents are
// made, a file there is replaced, a folder there is not.
func (s *Server) moveFiles(w http.ResponseWriter, r *http.Request) error {
	var req moveRequest
	if err := readJSON(r, maxBody, &req, false); err != nil {
		return err
	}
	if req.From == nil || req.To == nil {
		return invalid("from and to are required")
	}
	if err := errors.Join(checkPath("from", *req.From), checkPath("to", *req.To)); err != nil {
		return err
	}
	c, err := s.files(r)
	if err != nil {
		return err
	}
	defer c.Close()
	from, to := c.abs(*req.From), c.abs(*req.To)
	if from == "/" || from == c.home {
		return invalid("%s is the home or root folder, which stays", *req.From)
	}
	if to == from || strings.HasPrefix(to, from+"/") {
		return invalid("cannot move %s into itself", *req.From)
	}
	if err := c.Move(from, to); errors.Is(err, sandboxio.ErrExists) {
		return errorf(http.StatusConflict, "already_exists", "%s is a folder already", *req.To)
	} else if err != nil {
		return fileError(*req.From, err)
	}
	writeJSON(w, http.StatusOK, map[string]string{"from": from, "to": to})
	return nil
}

type mkdirRequest struct {
	Path *string `json:"path"`
	Mode *string `json:"mode"`
}

// POST files/mkdir {path, mode?}: parents are made; mode is the folder's.
func (s *Server) mkdirFiles(w http.ResponseWriter, r *http.Request) error {
	var req mkdirRequest
	if err := readJSON(r, maxBody, &req, false); err != nil {
		return err
	}
	if req.Path == nil {
		return invalid("path is required")
	}
	if err := checkPath("path", *req.Path); err != nil {
		return err
	}
	var mode *os.FileMode
	if req.Mode != nil {
		m, err := parseMode("mode", *req.Mode)
		if err != nil {
			return err
		}
		mode = &m
	}
	c, err := s.files(r)
	if err != nil {
		return err
	}
	defer c.Close()
	abs := c.abs(*req.Path)
	fi, err := c.MakeFolder(abs, mode)
	if errors.Is(err, sandboxio.ErrExists) {
		return errorf(http.StatusConflict, "already_exists", "%s is a file already", *req.Path)
	} else if err != nil {
		return fileError(*req.Path, err)
	}
	writeJSON(w, http.StatusOK, viewFile(abs, fi))
	return nil
}

type permissionsRequest struct {
	Path      *string `json:"path"`
	Mode      *string `json:"mode"`
	Recursive *bool   `json:"recursive"`
}

// POST files/permissions {path, mode, recursive?}: chmod. The owner
// stays. Recursively, symlinks are left alone (a chmod through one would
// change what it points to).
func (s *Server) chmodFiles(w http.ResponseWriter, r *http.Request) error {
	var req permissionsRequest
	if err := readJSON(r, maxBody, &req, false); err != nil {
		return err
	}
	if req.Path == nil || req.Mode == nil {
		return invalid("path and mode are required")
	}
	if err := checkPath("path", *req.Path); err != nil {
		return err
	}
	mode, err := parseMode("mode", *req.Mode)
	if err != nil {
		return err
	}
	c, err := s.files(r)
	if err != nil {
		return err
	}
	defer c.Close()
	abs := c.abs(*req.Path)
	changed, err := c.SetMode(r.Context(), abs, mode, req.Recursive != nil && *req.Recursive)
	var me *sandboxio.ModeError
	if errors.As(err, &me) {
		return errorf(http.StatusConflict, "file_error", "%s", me.Error())
	} else if err != nil {
		return fileError(*req.Path, err)
	}
	writeJSON(w, http.StatusOK, map[string]any{"path": abs, "mode": strconv.FormatUint(uint64(unixMode(mode)), 8), "changed": changed})
	return nil
}
