package api

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"froog.tech/froog/internal/seal"
	"froog.tech/froog/store"
)

// A sandbox's own variables (the docs' Environment section): up to 50,
// 16 KiB in all (names and values), sealed at rest as URL tokens are, and
// shown only by name. They reach every command and job, under the
// request's own env.
const (
	maxEnvVars  = 50
	maxEnvBytes = 16 << 10
)

var envKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)

// checkEnv applies the docs' limits to a set of variables: names a shell
// can export, values without NUL bytes, at most 50 and 16 KiB in all.
func checkEnv(env map[string]string) error {
	if len(env) > maxEnvVars {
		return invalid("env holds at most %d variables", maxEnvVars)
	}
	size := 0
	for _, k := range slices.Sorted(maps.Keys(env)) {
		if !envKey.MatchString(k) {
			return invalid("env: %q is not a variable name (letters, digits and _, not starting with a digit, up to 128)", k)
		}
		if strings.ContainsRune(env[k], 0) {
			return invalid("env: the value of %s holds a NUL byte", k)
		}
		size += len(k) + len(env[k])
	}
	if size > maxEnvBytes {
		return invalid("env holds at most 16 KiB of names and values (this is %d bytes)", size)
	}
	return nil
}

// envAD binds a sealed env to its sandbox: moved to another, it does not
// open.
var envAD = seal.SandboxEnvAD

// snapshotEnvAD binds a saved snapshot's sealed variables to it.
func snapshotEnvAD(snapshotID string) string { return "snapshot-env:" + snapshotID }

// sealSnapshotEnv keeps sb's own variables on sn, a saved snapshot of it.
func (s *Server) sealSnapshotEnv(sn *store.Snapshot, sb *store.Sandbox) error {
	env, err := s.openEnv(sb)
	if err != nil || len(env) == 0 {
		return err
	}
	plain, _ := json.Marshal(env)
	sn.EnvSealed = s.sealer.seal(string(plain), snapshotEnvAD(sn.ID))
	return nil
}

// openSnapshotEnv returns the variables kept on a saved snapshot (never
// nil).
func (s *Server) openSnapshotEnv(sn *store.Snapshot) (map[string]string, error) {
	env := map[string]string{}
	if len(sn.EnvSealed) == 0 {
		return env, nil
	}
	plain, err := s.sealer.open(sn.EnvSealed, snapshotEnvAD(sn.ID))
	if err != nil {
		return nil, fmt.Errorf("snapshot %s env: %w", sn.ID, err)
	}
	if err := json.Unmarshal([]byte(plain), &env); err != nil {
		return nil, fmt.Errorf("snapshot %s env: %w", sn.ID, err)
	}
	return env, nil
}

// sealEnv stores env on sb, encrypted, with its names in the clear.
func (s *Server) sealEnv(sb *store.Sandbox, env map[string]string) {
	if len(env) == 0 {
		sb.EnvSealed, sb.EnvNames = nil, nil
		return
	}
	plain, _ := json.Marshal(env)
	sb.EnvSealed = s.sealer.seal(string(plain), envAD(sb.ID))
	sb.EnvNames = slices.Sorted(maps.Keys(env))
}

// openEnv returns sb's own variables (never nil).
func (s *Server) openEnv(sb *store.Sandbox) (map[string]string, error) {
	env := map[string]string{}
	if len(sb.EnvSealed) == 0 {
		return env, nil
	}
	plain, err := s.sealer.open(sb.EnvSealed, envAD(sb.ID))
	if err != nil {
		return nil, fmt.Errorf("sandbox %s env: %w", sb.ID, err)
	}
	if err := json.Unmarshal([]byte(plain), &env); err != nil {
		return nil, fmt.Errorf("sandbox %s env: %w", sb.ID, err)
	}
	return env, nil
}

// addEnv puts add on top of sb's own variables, checks the result and
// seals it; it returns the names it set, for the audit log.
func (s *Server) addEnv(sb *store.Sandbox, add map[string]*string) (string, error) {
	if len(add) == 0 {
		return "", nil
	}
	env, err := s.openEnv(sb)
	if err != nil {
		return "", err
	}
	for k, v := range add {
		if v == nil {
			delete(env, k)
		} else {
			env[k] = *v
		}
	}
	if err := checkEnv(env); err != nil {
		return "", err
	}
	s.sealEnv(sb, env)
	return strings.Join(slices.Sorted(maps.Keys(add)), ","), nil
}

// setEnv is addEnv for values that are all set (create, start, fork).
func setEnv(env map[string]string) map[string]*string {
	out := make(map[string]*string, len(env))
	for k, v := range env {
		out[k] = &v
	}
	return out
}

// commandEnv is the environment of a command in sb: the account's
// variables as they were at its start (none with environment: false),
// its own on top, and the request's on top of those.
func (s *Server) commandEnv(sb *store.Sandbox, req map[string]string) (map[string]string, error) {
	env, err := s.accountEnv(sb)
	if err != nil {
		return nil, err
	}
	own, err := s.openEnv(sb)
	if err != nil {
		return nil, err
	}
	maps.Copy(env, own)
	maps.Copy(env, req)
	return env, nil
}

// environment reads the environment field of a create or a start: false
// is a sandbox without the account's environment, true with it; null and
// absent leave it as it is.
func environment(raw json.RawMessage) (noEnv, set bool, err error) {
	switch strings.TrimSpace(string(raw)) {
	case "", "null":
		return false, false, nil
	case "false":
		return true, true, nil
	case "true":
		return false, true, nil
	}
	return false, false, invalid("environment must be true or false")
}

// snapshots reads the snapshots field of a create or a fork: false turns
// automatic snapshots off, true on; null and absent leave it unset.
func snapshots(raw json.RawMessage) (off, set bool, err error) { return offSetting("snapshots", raw) }

// offSetting reads a create or fork field that is true by default (the
// docs' data controls: snapshots, monitoring): off when false, set when
// given at all.
func offSetting(name string, raw json.RawMessage) (off, set bool, err error) {
	switch strings.TrimSpace(string(raw)) {
	case "", "null":
		return false, false, nil
	case "true":
		return false, true, nil
	case "false":
		return true, true, nil
	}
	return false, false, invalid("%s must be true or false", name)
}

// envView lists sb's variable names (never nil).
func envView(sb *store.Sandbox) []string {
	if sb.EnvNames == nil {
		return []string{}
	}
	return sb.EnvNames
}
