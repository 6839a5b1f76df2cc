package hostctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"golang.org/x/crypto/ssh"

	"froog.tech/froog/internal/seal"
	"froog.tech/froog/sandboxio"
	"froog.tech/froog/store"
	"froog.tech/froog/tunnel"
)

// The account's environment at a start (the docs' Repos, secret files &
// setup). Before a sandbox counts as running, hostctl logs in to it once
// (the endpoint Driver.Start returned, its pinned host key, the control
// key), writes the account's secret files into ~ (mode 600, parent
// folders made), and starts a background command, a job as the API's
// (package sandboxio), that clones each repo whose folder has no checkout
// yet and runs the setup script from ~ in a login shell. The sandbox runs
// with setup_status running; hostctl notices the job's end at its looks
// of the running sandbox, every SetupPoll while the setup runs (every
// slowSetupPoll after its first minute): it reads
// the job's state from the job's folder over SSH (the job's exit code,
// and the reason the wrapper wrote), and records done or failed. A stop
// while it runs records failed, "stopped mid-setup". Setup holds off
// nothing: auto-stop runs as ever.
//
// The first boot also applies what the sandbox's create asked for
// (store.FirstBoot, even with environment: false): its own files after
// the account's (so one wins over a secret file at its path), its repo
// cloned first by the job, and its one-off script after the account's.
// Once hostctl has logged in to write them, the start's record clears
// FirstBoot: the files and script are forgotten, and no later start (nor
// a fork, which never has it) applies them again. No start writes an
// account's secret file over one of the sandbox's own (OwnFiles).

const (
	// setupUser is the sandbox user the control key logs in as (the
	// qemu driver's guests; the local driver takes any).
	setupUser = "user"
	// setupTimeout bounds a start's one SSH connection: the login, the
	// files and starting the job.
	setupTimeout = time.Minute
	// lookTimeout bounds one look at a running setup; stopLookTimeout
	// the last look, before a stop.
	lookTimeout     = 20 * time.Second
	stopLookTimeout = 5 * time.Second
	// slowSetupPoll is how often a setup running for over a minute is
	// looked at (see nextLook).
	slowSetupPoll = 10 * time.Second
	// setupDir holds the setup's wrapper, the script and its reason for
	// failing, under ~.
	setupDir = ".froog/setup"
	// setupCommand is the job's command, as `froog jobs` shows it.
	setupCommand = `sh "$HOME/` + setupDir + `/run.sh" # froog setup: the account's repos and setup script`
)

// errNoControlKey: hostctl was given no control key to log in with.
var errNoControlKey = errors.New("this host has no control key to write the account's environment into the sandbox")

// setupResult is a start's setup, as recorded on the sandbox; firstBoot:
// the sandbox's FirstBoot was applied (or tried), and is cleared.
type setupResult struct {
	status, err, job string
	firstBoot        bool
}

func setupFailed(format string, args ...any) setupResult {
	return setupResult{status: store.SetupFailed, err: fmt.Sprintf(format, args...)}
}

// setupFile is one file the start writes under ~: a secret file of the
// account's, or one of the setup's own.
type setupFile struct {
	path, mode string
	content    []byte
	secret     bool
}

// startSetup writes the account's environment into sb, which Driver.Start
// has just started at ep, and starts its setup job. An error is the
// store's (try again); what goes wrong in the sandbox is a failed setup.
func (c *Controller) startSetup(ctx context.Context, sb *store.Sandbox, ep Endpoint) (setupResult, error) {
	var env store.Environment
	if !sb.NoEnvironment {
		var err error
		env, err = c.o.Store.Environment(ctx, sb.AccountID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return setupResult{}, fmt.Errorf("the account's environment: %w", err)
		}
	}
	first := sb.FirstBoot
	if len(env.Repos) == 0 && len(env.Files) == 0 && env.SetupSize == 0 && first == nil {
		return setupResult{}, nil
	}
	if c.o.ControlKey == nil {
		return setupFailed("%s", errNoControlKey), nil
	}
	if c.sealer == nil && (len(env.Files) > 0 || env.SetupSize > 0 || first != nil && (len(first.Files) > 0 || first.SetupSize > 0)) {
		return setupFailed("this host has no key for the account's environment (froogd hostctl --secret-key-file): its secret files and setup script were not written"), nil
	}
	files, script, vars, fail := c.openEnvironment(sb, &env)
	if fail.status != "" {
		return fail, nil
	}
	own, once, fail := c.openFirstBoot(sb)
	if fail.status != "" {
		return fail, nil
	}
	files = append(files, own...)
	var clones []store.SandboxRepo
	if first != nil && sb.Repo != nil {
		clones = append(clones, *sb.Repo)
	}
	for _, r := range env.Repos {
		clones = append(clones, store.SandboxRepo{URL: r.URL, Branch: r.Branch, Dir: r.Dir()})
	}
	var job []setupFile
	if len(clones) > 0 || script != nil || once != nil {
		job = append(job, setupFile{path: setupDir + "/run.sh", mode: "700", content: []byte(setupWrapper(clones, script != nil, once != nil))})
		if script != nil {
			job = append(job, setupFile{path: setupDir + "/script", mode: "600", content: script})
		}
		if once != nil {
			job = append(job, setupFile{path: setupDir + "/once", mode: "600", content: once})
		}
	}
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	client, err := c.dialSandbox(ctx, ep)
	if err != nil {
		if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return setupResult{}, ctx.Err()
		}
		return setupFailed("could not log in to the sandbox to write the account's environment: %v", err), nil
	}
	defer client.Close()
	// Logged in: the first boot is this one, whatever comes of it.
	applied := func(r setupResult) (setupResult, error) {
		r.firstBoot = first != nil
		return r, nil
	}
	sh := sandboxio.New(oneConn{client})
	for _, f := range append(files, job...) {
		if err := writeHomeFile(ctx, sh, sb.ID, f); err != nil {
			if f.secret {
				return applied(setupFailed("the secret file %s was not written: %v", f.path, err))
			}
			return applied(setupFailed("the setup was not written: %v", err))
		}
	}
	if len(job) == 0 {
		return applied(setupResult{status: store.SetupDone})
	}
	id := store.NewID("job")
	if _, err := sh.StartJob(ctx, sb.ID, id, sandboxio.Prelude("", vars), setupCommand, nil); err != nil {
		return applied(setupFailed("the setup job did not start: %v", err))
	}
	return applied(setupResult{status: store.SetupRunning, job: id})
}

// openFirstBoot opens the files and the one-off script (nil: none) of
// sb's create, while its first boot is to come (startSetup checked that
// there is a key when they are sealed).
func (c *Controller) openFirstBoot(sb *store.Sandbox) ([]setupFile, []byte, setupResult) {
	fb := sb.FirstBoot
	if fb == nil || c.sealer == nil {
		return nil, nil, setupResult{}
	}
	var files []setupFile
	for _, f := range fb.Files {
		plain, err := c.sealer.Open(f.Sealed, seal.SandboxFileAD(sb.ID, f.Path))
		if err != nil {
			return nil, nil, setupFailed("the sandbox's file %s does not open with this host's key", f.Path)
		}
		files = append(files, setupFile{path: f.Path, mode: "600", content: plain, secret: true})
	}
	var once []byte
	if fb.SetupSize > 0 {
		plain, err := c.sealer.Open(fb.SetupSealed, seal.SandboxSetupAD(sb.ID))
		if err != nil {
			return nil, nil, setupFailed("the sandbox's setup script does not open with this host's key")
		}
		once = plain
	}
	return files, once, setupResult{}
}

// openEnvironment opens the secret files, the script (nil: none) and the
// variables the setup job runs with (the account's, then the sandbox's
// own, as the API gives every job). Without a key there are no files
// and no script (startSetup checked), and the job gets no variables.
func (c *Controller) openEnvironment(sb *store.Sandbox, env *store.Environment) ([]setupFile, []byte, map[string]string, setupResult) {
	vars := map[string]string{}
	if c.sealer == nil {
		return nil, nil, vars, setupResult{}
	}
	var files []setupFile
	for _, f := range env.Files {
		if slices.Contains(sb.OwnFiles, f.Path) {
			continue // the sandbox's own file wins, at every start
		}
		plain, err := c.sealer.Open(f.Sealed, seal.AccountFileAD(sb.AccountID, f.Path))
		if err != nil {
			return nil, nil, nil, setupFailed("the secret file %s does not open with this host's key", f.Path)
		}
		files = append(files, setupFile{path: f.Path, mode: "600", content: plain, secret: true})
	}
	var script []byte
	if env.SetupSize > 0 {
		plain, err := c.sealer.Open(env.SetupSealed, seal.AccountSetupAD(sb.AccountID))
		if err != nil {
			return nil, nil, nil, setupFailed("the setup script does not open with this host's key")
		}
		script = plain
	}
	for _, v := range sb.AccountEnv {
		plain, err := c.sealer.Open(v.Sealed, seal.AccountEnvAD(sb.AccountID, v.Name))
		if err != nil {
			return nil, nil, nil, setupFailed("the account's variable %s does not open with this host's key", v.Name)
		}
		vars[v.Name] = string(plain)
	}
	if len(sb.EnvSealed) > 0 {
		own := map[string]string{}
		plain, err := c.sealer.Open(sb.EnvSealed, seal.SandboxEnvAD(sb.ID))
		if err == nil {
			err = json.Unmarshal(plain, &own)
		}
		if err != nil {
			return nil, nil, nil, setupFailed("the sandbox's own variables do not open with this host's key")
		}
		for k, v := range own {
			vars[k] = v
		}
	}
	return files, script, vars, setupResult{}
}

// dialSandbox logs in to the sandbox at ep with the control key, against
// its pinned host key. ctx bounds the login, and the connection's life:
// it closes when ctx ends.
func (c *Controller) dialSandbox(ctx context.Context, ep Endpoint) (*ssh.Client, error) {
	hostKey, _, _, _, err := ssh.ParseAuthorizedKey([]byte(ep.HostKey))
	if err != nil {
		return nil, fmt.Errorf("the sandbox's host key: %w", err)
	}
	client, err := tunnel.DialSSH(ctx, net.JoinHostPort(ep.Host, strconv.Itoa(ep.Port)), setupUser, c.o.ControlKey, hostKey)
	if err != nil {
		return nil, err
	}
	context.AfterFunc(ctx, func() { client.Close() })
	return client, nil
}

// oneConn is sandboxio's Sessions over one SSH connection to one sandbox.
type oneConn struct{ c *ssh.Client }

func (o oneConn) Session(context.Context, string) (*ssh.Session, error) { return o.c.NewSession() }

// writeHomeFile writes f under ~ with its mode, its parent folders made
// (private ones), through a temporary file moved into place. Neither the
// content nor the command line holds a secret: the content is stdin.
func writeHomeFile(ctx context.Context, sh *sandboxio.Shell, sandboxID string, f setupFile) error {
	script := `umask 077 && f="$HOME"/` + sandboxio.Quote(f.path) + ` && mkdir -p -- "$(dirname -- "$f")" &&
if [ -d "$f" ]; then echo "a folder is in its place" >&2; exit 1; fi &&
cat > "$f.froog-new" && chmod ` + f.mode + ` "$f.froog-new" && mv -f -- "$f.froog-new" "$f"`
	errOut := &sandboxio.Capped{Max: 512}
	res, err := sh.Run(ctx, sandboxID, script, f.content, io.Discard, errOut, 0)
	if err != nil {
		return err
	}
	if res.Code != 0 {
		return fmt.Errorf("exit %d: %s", res.Code, cleanReason(errOut.String()))
	}
	return nil
}

// setupWrapper is the job's script: clone each repo whose folder has no
// checkout (into a folder of its own first, then what the folder held,
// such as a secret file, copied over it, so that it stays), then run the
// account's script, if any, then the sandbox's one-off script (once), each
// from ~ in a login shell; the one-off script is removed once run. On a
// failure it writes why to ~/.froog/setup/error (read by lookSetup) and
// exits 1.
func setupWrapper(repos []store.SandboxRepo, script, once bool) string {
	var b strings.Builder
	b.WriteString(`# froog setup: clones the account's repos that have no checkout yet, then runs
# its setup script from ~ in a login shell. Written at every start.
err="$HOME/` + setupDir + `/error"
rm -f "$err"
cd || exit 1
fail() { printf '%s (exit %s)\n' "$1" "$2" > "$err"; echo "froog setup: $1 (exit $2)" >&2; exit 1; }
if [ -n "$GH_TOKEN" ] && command -v gh >/dev/null 2>&1; then gh auth setup-git || echo "froog setup: gh auth setup-git failed" >&2; fi
clone() { # url branch dir
	d="$HOME/$3"
	if [ -e "$d/.git" ]; then echo "froog setup: ~/$3 has a checkout already"; return 0; fi
	t="$HOME/` + setupDir + `/clone"
	rm -rf "$t"
	echo "froog setup: cloning $1 into ~/$3"
	if [ -n "$2" ]; then git clone --branch "$2" -- "$1" "$t"; else git clone -- "$1" "$t"; fi || return $?
	if [ -d "$d" ]; then cp -a "$d/." "$t/" && rm -rf "$d" || return $?; fi
	mkdir -p -- "$(dirname -- "$d")" && mv "$t" "$d"
}
`)
	for _, r := range repos {
		dir := r.Dir
		q := sandboxio.Quote
		b.WriteString(`clone ` + q(r.URL) + ` ` + q(r.Branch) + ` ` + q(dir) + ` || { c=$?; fail ` + q("the repo "+r.URL+" did not clone into ~/"+dir) + ` "$c"; }` + "\n")
	}
	if script {
		b.WriteString(`echo "froog setup: running the setup script"
if command -v bash >/dev/null 2>&1; then bash -l "$HOME/` + setupDir + `/script"; else sh -l "$HOME/` + setupDir + `/script"; fi
c=$?; [ "$c" -eq 0 ] || fail "the setup script failed" "$c"
`)
	}
	if once {
		b.WriteString(`echo "froog setup: running the sandbox's one-off setup script"
o="$HOME/` + setupDir + `/once"
if command -v bash >/dev/null 2>&1; then bash -l "$o"; else sh -l "$o"; fi
c=$?; rm -f "$o"; [ "$c" -eq 0 ] || fail "the sandbox's setup script failed" "$c"
`)
	}
	b.WriteString("echo \"froog setup: done\"\n")
	return b.String()
}

// lookSetup looks at the running setup of sb, a running sandbox, within
// timeout: still running, or how it ended. An error is a look that did not happen (the
// sandbox did not answer): the next look tries again.
func (c *Controller) lookSetup(ctx context.Context, sb *store.Sandbox, timeout time.Duration) (setupResult, error) {
	running := setupResult{status: store.SetupRunning, job: sb.SetupJob}
	if c.o.ControlKey == nil {
		return setupFailed("%s", errNoControlKey), nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client, err := c.dialSandbox(ctx, Endpoint{Host: sb.SSHHost, Port: sb.SSHPort, HostKey: sb.SSHHostKey})
	if err != nil {
		return running, fmt.Errorf("look at the setup: %w", err)
	}
	defer client.Close()
	sh := sandboxio.New(oneConn{client})
	// An offset past any output: the state alone, none of the output.
	j, _, err := sh.JobOutput(ctx, sb.ID, sb.SetupJob, 1<<40)
	switch {
	case errors.Is(err, sandboxio.ErrNoJob):
		return setupFailed("the setup job is gone from the sandbox"), nil
	case err != nil:
		return running, fmt.Errorf("look at the setup: %w", err)
	}
	switch j.State {
	case "running":
		return running, nil
	case "killed":
		return setupFailed("the setup job was stopped"), nil
	case "lost":
		return setupFailed("stopped mid-setup"), nil
	}
	if j.ExitCode != nil && *j.ExitCode == 0 {
		return setupResult{status: store.SetupDone, job: sb.SetupJob}, nil
	}
	out := &sandboxio.Capped{Max: 512}
	if _, err := sh.Run(ctx, sb.ID, `cat "$HOME/`+setupDir+`/error" 2>/dev/null`, nil, out, io.Discard, 0); err != nil {
		return running, fmt.Errorf("look at the setup: %w", err)
	}
	res := setupFailed("%s", cleanReason(out.String()))
	if res.err == "" {
		code := "none"
		if j.ExitCode != nil {
			code = strconv.Itoa(*j.ExitCode)
		}
		res.err = "the setup job failed (exit " + code + ")"
	}
	res.job = sb.SetupJob
	return res, nil
}

// cleanReason makes what the sandbox wrote one short line: it is the
// sandbox's to write, and shown as setup_error.
func cleanReason(s string) string {
	s = strings.ToValidUTF8(strings.TrimSpace(s), "")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	if len(s) > 300 {
		s = strings.ToValidUTF8(s[:300], "") + "…"
	}
	return s
}

// endSetup is the setup of sb, which is about to stop, or stopped on its
// own: a setup that ended is recorded as it ended, one still running as
// failed. It looks only when the sandbox still answers.
func (c *Controller) endSetup(ctx context.Context, sb *store.Sandbox, look bool) setupResult {
	if look {
		if res, err := c.lookSetup(ctx, sb, stopLookTimeout); err == nil && res.status != store.SetupRunning {
			return res
		}
	}
	return setupResult{status: store.SetupFailed, err: "stopped mid-setup", job: sb.SetupJob}
}

// recordSetup writes res on the sandbox, if its setup is still the one
// sb had (a new start may have begun another).
func (c *Controller) recordSetup(ctx context.Context, sb *store.Sandbox, res setupResult) error {
	_, err := c.observe(ctx, sb.ID, func(s *store.Sandbox) {
		if s.SetupStatus == store.SetupRunning && s.SetupJob == sb.SetupJob {
			s.SetupStatus, s.SetupError, s.SetupJob = res.status, res.err, res.job
		}
	})
	return err
}
