package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"froog.tech/froog/internal/seal"
	"froog.tech/froog/store"
)

// One sandbox's own first boot (the docs' --file, --repo and
// --setup-file on create): files written into ~ after the account's
// secret files, a repo cloned first by the setup job, and a script run
// once after the account's setup. Contents and the script are sealed
// (bound to the sandbox and the path) until hostctl applies them at the
// first boot and clears them; the repo stays to be shown. Forks get none
// of it: their disk already has it. The checks are the account
// environment's (ParseHomePath, ParseRepo, the script's 64 KiB) with the
// docs' own limits for files: 20, 1 MiB together.

// maxCreateBody is a create's body: 1 MiB of files, base64 encoded, fits.
const maxCreateBody = 4 << 20

// createRepo is a create's repo.
type createRepo struct {
	URL    *string `json:"url"`
	Branch *string `json:"branch"`
	Dir    *string `json:"dir"`
}

// createFile is one of a create's files, in the list form.
type createFile struct {
	Path     *string `json:"path"`
	Content  *string `json:"content"`
	Encoding *string `json:"encoding"`
}

// plainFile is a checked file, its content in the clear until sealed.
type plainFile struct{ path, content string }

// firstBoot is what a create asks of the first boot, checked (nil:
// nothing).
type firstBoot struct {
	files []plainFile
	setup string
	repo  *store.SandboxRepo
}

// firstBoot checks the create's files, repo and setup. An error changes
// nothing: it comes before anything is stored.
func (req *createRequest) firstBoot() (*firstBoot, error) {
	fb := &firstBoot{}
	files, err := parseCreateFiles(req.Files)
	if err != nil {
		return nil, err
	}
	fb.files = files
	if req.Repo != nil {
		if fb.repo, err = req.Repo.check(); err != nil {
			return nil, err
		}
	}
	if req.Setup != nil {
		if len(*req.Setup) > store.MaxEnvSetupBytes {
			return nil, invalid("setup: the setup script is at most 64 KiB")
		}
		if strings.ContainsRune(*req.Setup, 0) {
			return nil, invalid("setup: the setup script holds a NUL byte")
		}
		fb.setup = *req.Setup
	}
	if len(fb.files) == 0 && fb.repo == nil && fb.setup == "" {
		return nil, nil
	}
	return fb, nil
}

func (rp *createRepo) check() (*store.SandboxRepo, error) {
	if rp.URL == nil {
		return nil, invalid("repo.url is required")
	}
	out := &store.SandboxRepo{URL: *rp.URL}
	if rp.Branch != nil {
		out.Branch = *rp.Branch
	}
	dir, err := ParseRepo(out.URL, out.Branch)
	if err != nil {
		return nil, invalid("repo: %s", err.Error())
	}
	out.Dir = dir
	if rp.Dir != nil {
		if out.Dir, err = ParseHomePath(*rp.Dir); err != nil {
			return nil, invalid("repo.dir: %s", err.Error())
		}
	}
	return out, nil
}

// parseCreateFiles reads files: an object of path → content (UTF-8), or
// a list of {path, content, encoding}.
func parseCreateFiles(raw json.RawMessage) ([]plainFile, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var list []createFile
	switch raw[0] {
	case '{':
		var m map[string]string
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, badRequest("invalid_type", "files must map each path to its content, a string")
		}
		for _, p := range slices.Sorted(maps.Keys(m)) {
			list = append(list, createFile{Path: &p, Content: ptr(m[p])})
		}
	case '[':
		if err := decodeJSON(raw, &list, false); err != nil {
			var e *Error
			if errors.As(err, &e) {
				return nil, badRequest(e.Code, "files: %s", e.Message)
			}
			return nil, err
		}
	default:
		return nil, badRequest("invalid_type", "files must be an object (path → content) or a list of {path, content, encoding}")
	}
	if len(list) > store.MaxSandboxFiles {
		return nil, invalid("files: a sandbox gets at most %d files of its own", store.MaxSandboxFiles)
	}
	var out []plainFile
	total := 0
	seen := map[string]bool{}
	for i, f := range list {
		if f.Path == nil || f.Content == nil {
			return nil, invalid("files[%d]: path and content are required", i)
		}
		path, err := ParseHomePath(*f.Path)
		if err != nil {
			return nil, invalid("files[%d]: path %s", i, err.Error())
		}
		if seen[path] {
			return nil, invalid("files[%d]: ~/%s is given twice", i, path)
		}
		seen[path] = true
		content, err := decodeContent(*f.Content, f.Encoding)
		if err != nil {
			return nil, invalid("files[%d]: %s", i, err.Error())
		}
		total += len(content)
		if total > store.MaxSandboxFilesBytes {
			return nil, invalid("files: a sandbox's own files hold at most 1 MiB together")
		}
		out = append(out, plainFile{path: path, content: content})
	}
	return out, nil
}

func ptr[T any](v T) *T { return &v }

// sealFirstBoot puts fb on sb, which has its id: the contents and the
// script sealed to it.
func (s *Server) sealFirstBoot(sb *store.Sandbox, fb *firstBoot) {
	sb.Repo, sb.FirstBoot, sb.OwnFiles = nil, nil, nil
	if fb == nil {
		return
	}
	sb.Repo = fb.repo
	b := &store.FirstBoot{}
	for _, f := range fb.files {
		sb.OwnFiles = append(sb.OwnFiles, f.path)
		b.Files = append(b.Files, store.EnvFile{Path: f.path, Sealed: s.sealer.seal(f.content, seal.SandboxFileAD(sb.ID, f.path)),
			Size: len(f.content), UpdatedAt: sb.CreatedAt})
	}
	if fb.setup != "" {
		b.SetupSealed, b.SetupSize = s.sealer.seal(fb.setup, seal.SandboxSetupAD(sb.ID)), len(fb.setup)
	}
	sb.FirstBoot = b
}

// describe adds what the audit event says of fb: counts and the repo,
// never a content.
func (fb *firstBoot) describe(detail map[string]string) {
	if fb == nil {
		return
	}
	if len(fb.files) > 0 {
		detail["files"] = strconv.Itoa(len(fb.files))
	}
	if fb.repo != nil {
		detail["repo"] = fb.repo.URL
		if fb.repo.Branch != "" {
			detail["repo"] += "#" + fb.repo.Branch
		}
	}
	if fb.setup != "" {
		detail["setup"] = "set"
	}
}

// forkRefuses is a fork's answer to files, repo or setup: a fork starts
// from its source's disk, which has them already.
func forkRefuses(u *unsupported) error {
	for name, v := range map[string]json.RawMessage{"setup": u.Setup, "files": u.Files, "repo": u.Repo} {
		if v != nil {
			return errorf(http.StatusBadRequest, "unsupported_field", "a fork does not take %s: it starts from its source's disk, which has them", name)
		}
	}
	return nil
}
