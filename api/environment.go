package api

import (
	"encoding/base64"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"froog.tech/froog/internal/seal"
	"froog.tech/froog/store"
)

// The account's environment (the docs' Environment variables and Repos,
// secret files & setup): variables every sandbox gets at its start, shown
// by name and masked preview only; repos, secret files and a setup
// script. Values, contents and the script are sealed at rest, bound to
// the account (and the name or path), and file contents are never shown
// again.

// The additional data that binds them (package seal, shared with
// hostctl, which opens files and the script at each start).
var (
	accountEnvAD   = seal.AccountEnvAD
	accountFileAD  = seal.AccountFileAD
	accountSetupAD = seal.AccountSetupAD
)

type envVarView struct {
	Name      string    `json:"name"`
	Preview   string    `json:"preview"`
	UpdatedAt time.Time `json:"updated_at"`
}

// maskValue is a value's preview: its first 4 characters when it has at
// least 16 (enough to tell keys apart, little of the secret), else none.
func maskValue(v string) string {
	if utf8.RuneCountInString(v) < 16 {
		return "…"
	}
	n := 0
	for i := range v {
		if n == 4 {
			return v[:i] + "…"
		}
		n++
	}
	return "…"
}

func (s *Server) listEnv(w http.ResponseWriter, r *http.Request) error {
	if err := checkQuery(r.URL.Query()); err != nil {
		return err
	}
	e, err := s.store.Environment(r.Context(), keyFrom(r.Context()).AccountID)
	if err != nil {
		return err
	}
	out := struct {
		Variables []envVarView `json:"variables"`
	}{Variables: []envVarView{}}
	for _, v := range e.Vars {
		out.Variables = append(out.Variables, envVarView{Name: v.Name, Preview: v.Preview, UpdatedAt: v.UpdatedAt})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// envName checks the variable name in the path.
func envName(r *http.Request) (string, error) {
	name := r.PathValue("name")
	if !envKey.MatchString(name) {
		return "", invalid("%q is not a variable name (letters, digits and _, not starting with a digit, up to 128)", name)
	}
	return name, nil
}

func (s *Server) putEnv(w http.ResponseWriter, r *http.Request) error {
	k, err := envWriter(r)
	if err != nil {
		return err
	}
	name, err := envName(r)
	if err != nil {
		return err
	}
	var req struct {
		Value *string `json:"value"`
	}
	if err := readJSON(r, maxBody, &req, false); err != nil {
		return err
	}
	if req.Value == nil {
		return invalid("value is required")
	}
	if strings.ContainsRune(*req.Value, 0) {
		return invalid("the value of %s holds a NUL byte", name)
	}
	now := s.now()
	v := store.EnvVar{Name: name, Sealed: s.sealer.seal(*req.Value, accountEnvAD(k.AccountID, name)),
		Size: len(name) + len(*req.Value), Preview: maskValue(*req.Value), UpdatedAt: now}
	_, err = s.updateEnvironment(r, "env.set", name, nil, func(e *store.Environment) error {
		e.Vars = upsert(e.Vars, v, func(v store.EnvVar) string { return v.Name })
		return nil
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, envVarView{Name: v.Name, Preview: v.Preview, UpdatedAt: now})
	return nil
}

// upsert puts v in list, sorted by key, in place of the one with its key.
func upsert[T any](list []T, v T, key func(T) string) []T {
	i, found := slices.BinarySearchFunc(list, key(v), func(x T, k string) int { return strings.Compare(key(x), k) })
	if found {
		list[i] = v
		return list
	}
	return slices.Insert(list, i, v)
}

// updateEnvironment applies fn to the account's environment, with the
// audit event, the docs' limits and the time of the change.
func (s *Server) updateEnvironment(r *http.Request, action, target string, detail map[string]string, fn func(*store.Environment) error) (store.Environment, error) {
	return s.store.UpdateEnvironment(r.Context(), keyFrom(r.Context()).AccountID, func(e *store.Environment, _ *store.AuditEvent) error {
		if err := fn(e); err != nil {
			return err
		}
		e.UpdatedAt = s.now()
		return checkEnvLimits(e)
	}, s.audit(r, action, target, detail))
}

// answerEnvironment answers a change with the environment it made.
func (s *Server) answerEnvironment(w http.ResponseWriter) func(store.Environment, error) error {
	return func(e store.Environment, err error) error {
		if err != nil {
			return err
		}
		return s.writeEnvironment(w, &e)
	}
}

func (s *Server) deleteEnv(w http.ResponseWriter, r *http.Request) error {
	_, err := envWriter(r)
	if err != nil {
		return err
	}
	name, err := envName(r)
	if err != nil {
		return err
	}
	_, err = s.updateEnvironment(r, "env.delete", name, nil, func(e *store.Environment) error {
		i := slices.IndexFunc(e.Vars, func(v store.EnvVar) bool { return v.Name == name })
		if i < 0 {
			return errorf(http.StatusNotFound, "not_found", "no variable named %s", name)
		}
		e.Vars = slices.Delete(e.Vars, i, i+1)
		return nil
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"name": name, "deleted": true})
	return nil
}

// envWriter is the request's key, refused when it is limited to some
// sandboxes or labels: the account's environment reaches every sandbox.
func envWriter(r *http.Request) (*store.APIKey, error) {
	k := keyFrom(r.Context())
	if limited(k) {
		return nil, errorf(http.StatusForbidden, "api_key_sandbox_forbidden", "this API key is limited to some sandboxes, and the account's environment reaches them all")
	}
	return k, nil
}

// checkEnvLimits is store.Environment.Check as a 400 that says what to
// do: the store checks again in its transaction.
func checkEnvLimits(e *store.Environment) error {
	var le *store.LimitError
	if err := e.Check(); errors.As(err, &le) {
		switch le.Limit {
		case "environment_variables":
			return invalid("the environment holds at most %d variables: remove one first", le.Max)
		case "environment_variable_bytes":
			return invalid("the environment's variables hold at most 16 KiB of names and values")
		case "environment_repos":
			return invalid("the environment holds at most %d repos", le.Max)
		case "environment_files":
			return invalid("the environment holds at most %d secret files", le.Max)
		case "environment_file_bytes":
			return invalid("a secret file holds at most 64 KiB")
		case "environment_files_bytes":
			return invalid("the environment's secret files hold at most 1 MiB together")
		case "environment_setup_bytes":
			return invalid("the setup script is at most 64 KiB")
		}
		return err
	}
	return nil
}

type envFileView struct {
	Path      string    `json:"path"`
	Size      int       `json:"size"`
	UpdatedAt time.Time `json:"updated_at"`
}

type environmentView struct {
	Repos     []store.EnvRepo `json:"repos"`
	Setup     *string         `json:"setup"`
	Files     []envFileView   `json:"files"`
	UpdatedAt *time.Time      `json:"updated_at"`
}

func (s *Server) viewEnvironment(e *store.Environment) (environmentView, error) {
	v := environmentView{Repos: []store.EnvRepo{}, Files: []envFileView{}}
	v.Repos = append(v.Repos, e.Repos...)
	for _, f := range e.Files {
		v.Files = append(v.Files, envFileView{Path: f.Path, Size: f.Size, UpdatedAt: f.UpdatedAt})
	}
	if len(e.SetupSealed) > 0 {
		script, err := s.sealer.open(e.SetupSealed, accountSetupAD(e.AccountID))
		if err != nil {
			return v, err
		}
		v.Setup = &script
	}
	if !e.UpdatedAt.IsZero() {
		v.UpdatedAt = &e.UpdatedAt
	}
	return v, nil
}

func (s *Server) writeEnvironment(w http.ResponseWriter, e *store.Environment) error {
	v, err := s.viewEnvironment(e)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

func (s *Server) getEnvironment(w http.ResponseWriter, r *http.Request) error {
	if err := checkQuery(r.URL.Query()); err != nil {
		return err
	}
	return s.answerEnvironment(w)(s.store.Environment(r.Context(), keyFrom(r.Context()).AccountID))
}

func (s *Server) patchEnvironment(w http.ResponseWriter, r *http.Request) error {
	k, err := envWriter(r)
	if err != nil {
		return err
	}
	var req struct {
		Repos *[]store.EnvRepo `json:"repos"`
		Setup *string          `json:"setup"`
	}
	if err := readJSON(r, maxBody, &req, false); err != nil {
		return err
	}
	if req.Repos == nil && req.Setup == nil {
		return invalid("send repos, setup or both")
	}
	detail := map[string]string{}
	var repos []store.EnvRepo
	if req.Repos != nil {
		if len(*req.Repos) > store.MaxEnvRepos {
			return invalid("the environment holds at most %d repos", store.MaxEnvRepos)
		}
		dirs := map[string]bool{}
		for i, rp := range *req.Repos {
			dir, err := ParseRepo(rp.URL, rp.Branch)
			if err != nil {
				return invalid("repos[%d]: %s", i, err.Error())
			}
			if dirs[dir] {
				return invalid("repos[%d]: another repo is cloned into ~/%s already", i, dir)
			}
			dirs[dir] = true
			repos = append(repos, store.EnvRepo{URL: rp.URL, Branch: rp.Branch})
		}
		detail["repos"] = strconv.Itoa(len(repos))
	}
	if req.Setup != nil {
		if len(*req.Setup) > store.MaxEnvSetupBytes {
			return invalid("the setup script is at most 64 KiB")
		}
		if strings.ContainsRune(*req.Setup, 0) {
			return invalid("the setup script holds a NUL byte")
		}
		detail["setup"] = "set"
		if *req.Setup == "" {
			detail["setup"] = "removed"
		}
	}
	return s.answerEnvironment(w)(s.updateEnvironment(r, "environment.update", "", detail, func(e *store.Environment) error {
		if req.Repos != nil {
			e.Repos = repos
		}
		if req.Setup != nil {
			e.SetupSealed, e.SetupSize = nil, 0
			if *req.Setup != "" {
				e.SetupSealed, e.SetupSize = s.sealer.seal(*req.Setup, accountSetupAD(k.AccountID)), len(*req.Setup)
			}
		}
		return nil
	}))
}

func (s *Server) putEnvironmentFile(w http.ResponseWriter, r *http.Request) error {
	k, err := envWriter(r)
	if err != nil {
		return err
	}
	var req struct {
		Path     *string `json:"path"`
		Content  *string `json:"content"`
		Encoding *string `json:"encoding"`
	}
	if err := readJSON(r, maxBody, &req, false); err != nil {
		return err
	}
	if req.Path == nil || req.Content == nil {
		return invalid("path and content are required")
	}
	path, err := ParseHomePath(*req.Path)
	if err != nil {
		return invalid("path: %s", err.Error())
	}
	content, err := decodeContent(*req.Content, req.Encoding)
	if err != nil {
		return invalid("%s", err.Error())
	}
	if len(content) > store.MaxEnvFileBytes {
		return invalid("a secret file holds at most 64 KiB")
	}
	f := store.EnvFile{Path: path, Sealed: s.sealer.seal(content, accountFileAD(k.AccountID, path)), Size: len(content), UpdatedAt: s.now()}
	return s.answerEnvironment(w)(s.updateEnvironment(r, "environment.file.put", path, map[string]string{"size": strconv.Itoa(len(content))}, func(e *store.Environment) error {
		e.Files = upsert(e.Files, f, func(f store.EnvFile) string { return f.Path })
		return nil
	}))
}

// decodeContent is a file's content sent with its encoding: utf-8 (the
// default) or base64.
func decodeContent(content string, encoding *string) (string, error) {
	switch {
	case encoding == nil || *encoding == "" || *encoding == "utf-8":
		return content, nil
	case *encoding == "base64":
		b, err := base64.StdEncoding.DecodeString(content)
		if err != nil {
			return "", errors.New("content is not base64")
		}
		return string(b), nil
	}
	return "", errors.New("encoding must be utf-8 or base64")
}

func (s *Server) deleteEnvironmentFile(w http.ResponseWriter, r *http.Request) error {
	_, err := envWriter(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	if err := checkQuery(q, "path"); err != nil {
		return err
	}
	path, err := ParseHomePath(q.Get("path"))
	if err != nil {
		return invalid("path: %s", err.Error())
	}
	return s.answerEnvironment(w)(s.updateEnvironment(r, "environment.file.delete", path, nil, func(e *store.Environment) error {
		i := slices.IndexFunc(e.Files, func(f store.EnvFile) bool { return f.Path == path })
		if i < 0 {
			return errorf(http.StatusNotFound, "not_found", "the environment has no secret file %s", path)
		}
		e.Files = slices.Delete(e.Files, i, i+1)
		return nil
	}))
}

// accountEnv opens the account's variables a sandbox took at its start
// (never nil).
func (s *Server) accountEnv(sb *store.Sandbox) (map[string]string, error) {
	env := map[string]string{}
	if sb.NoEnvironment {
		return env, nil
	}
	for _, v := range sb.AccountEnv {
		plain, err := s.sealer.open(v.Sealed, accountEnvAD(sb.AccountID, v.Name))
		if err != nil {
			return nil, errors.New("the account's variable " + v.Name + " does not open: " + err.Error())
		}
		env[v.Name] = plain
	}
	return env, nil
}
