package store

import (
	"context"
	"slices"
	"strings"
	"time"
)

// The docs' limits on an account's environment (Environment variables;
// Repos, secret files & setup). Every implementation checks them
// (Environment.Check) inside the write's transaction, so concurrent
// writers cannot pass them.
const (
	MaxEnvVars       = 50
	MaxEnvVarBytes   = 16 << 10 // names and values together
	MaxEnvRepos      = 20
	MaxEnvFiles      = 50
	MaxEnvFileBytes  = 64 << 10 // one file's contents
	MaxEnvFilesBytes = 1 << 20  // every file's contents together
	MaxEnvSetupBytes = 64 << 10
)

// Environment is an account's environment: what every sandbox of the
// account starts with, unless it was made with environment: false (or
// forked from one that was). Values, file contents and the setup script
// are encrypted by the API (as URL tokens are); the store holds names,
// sizes and masked previews in the clear, never a value.
type Environment struct {
	AccountID string    `json:"account_id"`
	Vars      []EnvVar  `json:"vars,omitempty"`  // sorted by name
	Repos     []EnvRepo `json:"repos,omitempty"` // in the order added
	Files     []EnvFile `json:"files,omitempty"` // sorted by path
	// SetupSealed is the setup script, encrypted; SetupSize its length in
	// bytes (0: none).
	SetupSealed []byte    `json:"setup_sealed,omitempty"`
	SetupSize   int       `json:"setup_size,omitempty"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// EnvVar is one of an account's variables.
type EnvVar struct {
	Name   string `json:"name"`
	Sealed []byte `json:"sealed"`
	// Size is len(name) + len(value), what the 16 KiB limit counts.
	Size      int       `json:"size"`
	Preview   string    `json:"preview"` // masked: never the whole value
	UpdatedAt time.Time `json:"updated_at"`
}

// EnvRepo is a repository cloned into ~ of every sandbox at its start.
type EnvRepo struct {
	URL    string `json:"url"`
	Branch string `json:"branch,omitempty"`
}

// EnvFile is a secret file written into ~ (mode 600) at every start; Path
// is relative to ~.
type EnvFile struct {
	Path      string    `json:"path"`
	Sealed    []byte    `json:"sealed"`
	Size      int       `json:"size"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Environments is the part of a Store that keeps accounts' environments.
type Environments interface {
	// Environment reads an account's environment: an empty one (its
	// AccountID set) when nothing was set; ErrNotFound without the
	// account.
	Environment(ctx context.Context, accountID string) (Environment, error)
	// UpdateEnvironment reads the account's environment, applies fn and
	// writes the result in one transaction, with ev. An error from fn, or
	// a LimitError from Environment.Check on the result, writes nothing.
	// ErrNotFound without the account. fn may fill in ev.
	UpdateEnvironment(ctx context.Context, accountID string, fn func(*Environment, *AuditEvent) error, ev *AuditEvent) (Environment, error)
}

// Check applies the docs' limits, as a LimitError naming the one passed.
func (e *Environment) Check() error {
	vars, files := 0, 0
	for _, v := range e.Vars {
		vars += v.Size
	}
	for _, f := range e.Files {
		if f.Size > MaxEnvFileBytes {
			return &LimitError{Limit: "environment_file_bytes", Max: MaxEnvFileBytes}
		}
		files += f.Size
	}
	switch {
	case len(e.Vars) > MaxEnvVars:
		return &LimitError{Limit: "environment_variables", Max: MaxEnvVars}
	case vars > MaxEnvVarBytes:
		return &LimitError{Limit: "environment_variable_bytes", Max: MaxEnvVarBytes}
	case len(e.Repos) > MaxEnvRepos:
		return &LimitError{Limit: "environment_repos", Max: MaxEnvRepos}
	case len(e.Files) > MaxEnvFiles:
		return &LimitError{Limit: "environment_files", Max: MaxEnvFiles}
	case files > MaxEnvFilesBytes:
		return &LimitError{Limit: "environment_files_bytes", Max: MaxEnvFilesBytes}
	case e.SetupSize > MaxEnvSetupBytes:
		return &LimitError{Limit: "environment_setup_bytes", Max: MaxEnvSetupBytes}
	}
	return nil
}

// Clone returns a copy of e that shares nothing with it.
func (e Environment) Clone() Environment {
	e.Vars, e.Repos, e.Files = slices.Clone(e.Vars), slices.Clone(e.Repos), slices.Clone(e.Files)
	e.SetupSealed = slices.Clone(e.SetupSealed)
	return e
}

// TakesEnvironment reports whether a write that turns old into sb boots
// it afresh: a start (StartsRunning), or a restore asked for (hostctl
// boots the restored disk).
func TakesEnvironment(old, sb *Sandbox) bool {
	return StartsRunning(old, sb) || sb.RestoreFrom != "" && (old == nil || old.RestoreFrom == "")
}

// StartEnvironment gives sb, which a write boots afresh
// (TakesEnvironment), the account's variables as they are then: a start
// is when a sandbox gets them, so a change reaches a running sandbox at
// its next start. A sandbox made with environment: false gets none.
// Every implementation calls it at every such write.
func StartEnvironment(sb *Sandbox, env Environment) {
	sb.AccountEnv = nil
	if sb.NoEnvironment || len(env.Vars) == 0 {
		return
	}
	sb.AccountEnv = make([]EnvVar, len(env.Vars))
	for i, v := range env.Vars {
		sb.AccountEnv[i] = EnvVar{Name: v.Name, Sealed: slices.Clone(v.Sealed)}
	}
}

// The setup statuses of a sandbox's start (Sandbox.SetupStatus; "" is
// none: nothing to do).
const (
	SetupRunning = "running"
	SetupDone    = "done"
	SetupFailed  = "failed"
)

// Dir is the folder under ~ the repo is cloned into: the last segment of
// its URL's path, without .git (https://host/you/app.git and
// git@host:you/app both give app).
func (r EnvRepo) Dir() string {
	p := r.URL
	if _, rest, ok := strings.Cut(p, "://"); ok {
		p = ""
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			p = rest[i:]
		}
	} else if _, rest, ok := strings.Cut(p, ":"); ok {
		p = rest // git@host:org/repo
	}
	p = strings.Trim(p, "/")
	return strings.TrimSuffix(p[strings.LastIndexByte(p, '/')+1:], ".git")
}

// The docs' limits on one sandbox's own files (a create's files).
const (
	MaxSandboxFiles      = 20
	MaxSandboxFilesBytes = 1 << 20 // every file's contents together
)

// SandboxRepo is a repo of one sandbox's own (a create's repo), cloned
// into ~/Dir by the setup job of its first boot, before the account's.
type SandboxRepo struct {
	URL    string `json:"url"`
	Branch string `json:"branch,omitempty"`
	Dir    string `json:"dir"`
}

// FirstBoot is what a sandbox's create asked for at its first boot only
// (the docs' --file, --repo and --setup-file): hostctl writes the files
// into ~ after the account's secret files, clones the sandbox's Repo
// first in the setup job, and runs the script after the account's, then
// clears it, so the files and script are forgotten once applied. File
// contents and the script are sealed by the API (seal.SandboxFileAD,
// seal.SandboxSetupAD).
type FirstBoot struct {
	Files []EnvFile `json:"files,omitempty"` // in the order given
	// SetupSealed is the one-off setup script, sealed; SetupSize its
	// length (0: none).
	SetupSealed []byte `json:"setup_sealed,omitempty"`
	SetupSize   int    `json:"setup_size,omitempty"`
}
