package api

import (
	"bytes"
	"errors"
	"net/http"
	"os"
	"path"
	"regexp"
	"sort"
	"strings"

	"froog.tech/froog/sandboxio"
)

// GET files/search?pattern=*.py&path=~: paths whose name matches a glob.
func (s *Server) searchFiles(w http.ResponseWriter, r *http.Request) error {
	q, p, err := pathQuery(r, true, "pattern")
	if err != nil {
		return err
	}
	pattern := q.Get("pattern")
	if err := checkPath("pattern", pattern); err != nil {
		return err
	}
	if _, err := path.Match(pattern, ""); err != nil || strings.Contains(pattern, "/") {
		return invalid("pattern is a glob of a name, such as *.py (no /)")
	}
	c, err := s.files(r)
	if err != nil {
		return err
	}
	defer c.Close()
	root := c.abs(p)
	fi, err := c.Stat(root)
	if err != nil {
		return fileError(p, err)
	}
	files, errs := []string{}, []string{}
	truncated := false
	if !fi.IsDir() {
		if ok, _ := path.Match(pattern, path.Base(root)); ok {
			files = append(files, root)
		}
	} else {
		truncated = c.Walk(r.Context(), root, func(p string, fi os.FileInfo) bool {
			if ok, _ := path.Match(pattern, fi.Name()); ok {
				if len(files) == maxSearchResults {
					return false
				}
				files = append(files, p)
			}
			return true
		}, func(p string, err error) {
			if len(errs) < 100 {
				errs = append(errs, p+": "+errorText(err))
			}
		})
	}
	if err := r.Context().Err(); err != nil {
		return err
	}
	sort.Strings(files)
	out := map[string]any{"files": files, "truncated": truncated}
	if len(errs) > 0 {
		out["errors"] = errs
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// errorText is a short reason for a failed file operation.
func errorText(err error) string {
	var e *Error
	if errors.As(fileError("", err), &e) {
		switch e.Code {
		case "not_found":
			return "no such file or folder"
		case "permission_denied":
			return "permission denied"
		}
	}
	return "cannot be read"
}

type findMatch struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Content string `json:"content"`
}

// GET files/find?pattern=TEXT&path=~&regex=false: the lines that hold a
// text (or match a POSIX extended regex). At most 1,000 matches, lines cut
// at 500 characters, binary files (a NUL in the first 8 KiB) and files
// over 50 MiB skipped, symlinks not followed; a line is matched on its
// first 1 MiB.
func (s *Server) findFiles(w http.ResponseWriter, r *http.Request) error {
	q, p, err := pathQuery(r, true, "pattern", "regex")
	if err != nil {
		return err
	}
	pattern := q.Get("pattern")
	if pattern == "" || len(pattern) > 4096 {
		return invalid("pattern is a text of 1 to 4096 bytes")
	}
	isRegex, err := queryBool(q, "regex")
	if err != nil {
		return err
	}
	match := func(line []byte) bool { return bytes.Contains(line, []byte(pattern)) }
	if isRegex {
		re, err := regexp.CompilePOSIX(pattern)
		if err != nil {
			return invalid("pattern is not an extended regular expression: %v", err)
		}
		match = re.Match
	}
	c, err := s.files(r)
	if err != nil {
		return err
	}
	defer c.Close()
	root := c.abs(p)
	fi, err := c.Lstat(root)
	if err != nil {
		return fileError(p, err)
	}
	var files []string
	truncated := false
	switch {
	case fi.Mode().IsRegular():
		files = []string{root}
	case fi.IsDir():
		truncated = c.Walk(r.Context(), root, func(p string, fi os.FileInfo) bool {
			if fi.Mode().IsRegular() && fi.Size() > 0 && fi.Size() <= maxFindFile {
				files = append(files, p)
			}
			return true
		}, nil)
		sort.Strings(files)
	}
	found, more := c.Find(r.Context(), files, match)
	if err := r.Context().Err(); err != nil {
		return err
	}
	matches := make([]findMatch, 0, len(found))
	for _, m := range found {
		matches = append(matches, findMatch(m))
	}
	writeJSON(w, http.StatusOK, map[string]any{"matches": matches, "truncated": truncated || more})
	return nil
}

type replaceRequest struct {
	Paths    []string `json:"paths"`
	Pattern  *string  `json:"pattern"`
	NewValue *string  `json:"new_value"`
}

type replaceResult struct {
	File         string `json:"file"`
	Success      bool   `json:"success"`
	Replacements *int   `json:"replacements,omitempty"`
	Error        string `json:"error,omitempty"`
}

// POST files/replace {paths, pattern, new_value}: every occurrence of a
// plain text, byte for byte, in up to 100 files of up to 5 MiB each. A
// file is rewritten in place (it keeps its owner, mode and links) only
// when something was replaced.
func (s *Server) replaceFiles(w http.ResponseWriter, r *http.Request) error {
	var req replaceRequest
	if err := readJSON(r, maxBody, &req, false); err != nil {
		return err
	}
	switch {
	case len(req.Paths) == 0 || len(req.Paths) > maxReplaceFiles:
		return invalid("paths holds 1 to %d paths", maxReplaceFiles)
	case req.Pattern == nil || *req.Pattern == "":
		return invalid("pattern is a text that is not empty")
	case req.NewValue == nil:
		return invalid("new_value is required (it may be empty)")
	}
	for _, p := range req.Paths {
		if err := checkPath("each path", p); err != nil {
			return err
		}
	}
	c, err := s.files(r)
	if err != nil {
		return err
	}
	defer c.Close()
	out := make([]replaceResult, 0, len(req.Paths))
	for _, p := range req.Paths {
		if err := r.Context().Err(); err != nil {
			return err
		}
		abs := c.abs(p)
		n, err := replaceIn(c, abs, []byte(*req.Pattern), []byte(*req.NewValue))
		res := replaceResult{File: abs, Success: err == nil}
		if err != nil {
			res.Error = err.Error()
			var e *Error
			if errors.As(err, &e) {
				res.Error = e.Message
			}
		} else {
			res.Replacements = &n
		}
		out = append(out, res)
	}
	writeJSON(w, http.StatusOK, map[string]any{"results": out})
	return nil
}

func replaceIn(c *fileConn, p string, old, new []byte) (int, error) {
	n, err := c.Replace(p, old, new, maxReplaceBytes)
	switch {
	case errors.Is(err, sandboxio.ErrNotFile):
		return 0, errors.New("not a regular file")
	case errors.Is(err, sandboxio.ErrTooLarge):
		return 0, errors.New("over 5 MiB")
	case err != nil:
		return 0, fileError(p, err)
	}
	return n, nil
}
