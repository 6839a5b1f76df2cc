package api

import (
	"errors"
	"net/url"
	"regexp"
	"strings"
	"unicode"

	"froog.tech/froog/store"
)

const (
	maxRepoURL  = 2048
	maxHomePath = 1024
)

var (
	branchRE  = regexp.MustCompile(`^[A-Za-z0-9._/+-]{1,255}$`)
	scpLikeRE = regexp.MustCompile(`^([A-Za-z0-9_][A-Za-z0-9._-]*)@([A-Za-z0-9][A-Za-z0-9.-]*):([A-Za-z0-9._~/-]+)$`)
	repoPart  = regexp.MustCompile(`^[A-Za-z0-9._~-]+$`)
)

// ParseRepo checks a repo of the account's environment as the docs give
// them (https://, ssh:// or git@host:org/repo, optionally a branch) and
// returns the directory under ~ it is cloned into (its last path
// segment, without .git). A URL with a password or token in it is
// refused: it would show in the environment.
func ParseRepo(raw, branch string) (dir string, err error) {
	if raw == "" {
		return "", errors.New("url is required")
	}
	if len(raw) > maxRepoURL || strings.ContainsFunc(raw, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) {
		return "", errors.New("url is one URL of at most 2048 printable characters, without spaces")
	}
	if branch != "" && (!branchRE.MatchString(branch) || strings.Contains(branch, "..") || strings.HasPrefix(branch, "-") ||
		strings.HasPrefix(branch, "/") || strings.HasSuffix(branch, "/") || strings.HasSuffix(branch, ".lock") || strings.Contains(branch, "//")) {
		return "", errors.New("branch is not a git branch name")
	}
	var path string
	if m := scpLikeRE.FindStringSubmatch(raw); m != nil && !strings.Contains(raw, "://") {
		path = m[3]
	} else {
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" || u.Opaque != "" || u.RawQuery != "" || u.Fragment != "" || strings.Contains(raw, "#") {
			return "", errors.New("url must be https://host/org/repo, ssh://host/org/repo or git@host:org/repo (a branch goes in branch)")
		}
		switch u.Scheme {
		case "https":
			if u.User != nil {
				return "", errors.New("url must not hold credentials: set GH_TOKEN, or add a .git-credentials secret file")
			}
		case "ssh":
			if _, hasPass := u.User.Password(); hasPass {
				return "", errors.New("url must not hold a password: add an SSH key as a secret file")
			}
			if strings.HasPrefix(u.User.Username(), "-") {
				return "", errors.New("url's user must not start with '-'")
			}
		default:
			return "", errors.New("url must be https://, ssh:// or git@host:org/repo")
		}
		if u.Hostname() == "" || strings.HasPrefix(u.Hostname(), "-") {
			return "", errors.New("url has no host")
		}
		path = u.Path
	}
	segs := strings.Split(strings.Trim(path, "/"), "/")
	last := store.EnvRepo{URL: raw}.Dir() // as hostctl clones it
	for _, s := range segs {
		if s == "" || s == "." || s == ".." || !repoPart.MatchString(s) {
			return "", errors.New("url's path must be /org/repo: letters, digits, '.', '_', '~' and '-'")
		}
	}
	if last == "" || last == "." || last == ".." || strings.HasPrefix(last, "-") {
		return "", errors.New("url does not end in a repo name")
	}
	return last, nil
}

// ParseHomePath checks a secret file's path: relative to ~, inside it,
// clean (no empty, "." or ".." segments), printable, at most 1024 bytes.
// It returns the path as it is kept.
func ParseHomePath(p string) (string, error) {
	p = strings.TrimPrefix(p, "~/")
	switch {
	case p == "":
		return "", errors.New("is required (relative to ~, e.g. app/.env)")
	case len(p) > maxHomePath:
		return "", errors.New("is at most 1024 bytes")
	case strings.HasPrefix(p, "/"):
		return "", errors.New("is relative to ~ (app/.env, not /home/user/app/.env)")
	case strings.ContainsFunc(p, func(r rune) bool { return !unicode.IsPrint(r) || r == '\\' }):
		return "", errors.New("holds a control character or a backslash")
	}
	for _, s := range strings.Split(p, "/") {
		if s == "" || s == "." || s == ".." {
			return "", errors.New("must stay inside ~, without empty, '.' or '..' parts")
		}
		if len(s) > 255 {
			return "", errors.New("has a part longer than 255 bytes")
		}
	}
	return p, nil
}
