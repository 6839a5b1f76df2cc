package hostctl_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"froog.tech/froog/hostctl"
	"froog.tech/froog/hostctl/local"
	"froog.tech/froog/internal/seal"
	"froog.tech/froog/internal/testkit"
	"froog.tech/froog/internal/testkit/live"
	"froog.tech/froog/internal/wait"
	"froog.tech/froog/store"
)

// setupRig is a rig whose controller writes the account's environment:
// the control key of its local driver, and a secret key (none when
// noKey).
type setupRig struct {
	*rig
	drv    *local.Driver
	sealer *seal.Sealer
}

func newSetupRig(t *testing.T, noKey bool) *setupRig {
	t.Helper()
	drv, signer := live.Driver(t, local.Options{})
	key := bytes.Repeat([]byte{0x5e}, seal.KeySize)
	sl, err := seal.New(key)
	if err != nil {
		t.Fatal(err)
	}
	o := hostctl.Options{ControlKey: signer, SecretKey: key, SetupPoll: 100 * time.Millisecond}
	if noKey {
		o.SecretKey = nil
	}
	return &setupRig{rig: newRig(t, drv, o), drv: drv, sealer: sl}
}

// environment sets the account's environment: files (path → content),
// repos, a script ("" none) and variables.
func (r *setupRig) environment(files map[string]string, repos []store.EnvRepo, script string, vars map[string]string) {
	r.t.Helper()
	a := r.acct.ID
	_, err := r.st.UpdateEnvironment(ctx, a, func(e *store.Environment, _ *store.AuditEvent) error {
		for p, c := range files {
			e.Files = append(e.Files, store.EnvFile{Path: p, Sealed: r.sealer.Seal([]byte(c), seal.AccountFileAD(a, p)), Size: len(c)})
		}
		e.Repos = repos
		if script != "" {
			e.SetupSealed, e.SetupSize = r.sealer.Seal([]byte(script), seal.AccountSetupAD(a)), len(script)
		}
		for n, v := range vars {
			e.Vars = append(e.Vars, store.EnvVar{Name: n, Sealed: r.sealer.Seal([]byte(v), seal.AccountEnvAD(a, n)), Size: len(n) + len(v)})
		}
		return nil
	}, nil)
	if err != nil {
		r.t.Fatal(err)
	}
}

// waitSetup waits for the sandbox's setup_status to be status.
func (r *setupRig) waitSetup(id, status string) store.Sandbox {
	r.t.Helper()
	var sb store.Sandbox
	wait.For(r.t, 15*time.Second, "setup_status "+status, func() bool {
		sb, _ = r.st.SandboxByID(ctx, id)
		return sb.SetupStatus == status
	})
	return sb
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// TestSetupAtStart: before the sandbox counts as running its secret files
// are in ~ (mode 600, parents made) and the setup job runs (running);
// the job clones the repo around the secret file inside its folder, runs
// the script from ~ with the account's variables, and the status goes
// to done once it ends.
func TestSetupAtStart(t *testing.T) {
	t.Parallel()
	r := newSetupRig(t, false)
	url := testkit.BareRepo(t, "app")
	const secret = "API_TOKEN=s3cr3t-value\n"
	// The script waits for the test's go-ahead, so that running is seen.
	r.environment(map[string]string{"app/.env": secret, ".config/tool/key": "k"}, []store.EnvRepo{{URL: url, Branch: "main"}},
		"while [ ! -e ~/go ]; do sleep 0.05; done\npwd >> ~/marker; cat app/README >> ~/marker; echo \"$GREETING\" >> ~/marker\n",
		map[string]string{"GREETING": "hi from the account"})
	sb := r.create("box", nil)
	running := r.waitState(sb.ID, store.StateRunning)
	home := r.drv.Home(&running)
	if running.SetupStatus != store.SetupRunning || running.SetupJob == "" {
		t.Fatalf("running sandbox: setup_status %q, job %q, want running with a job", running.SetupStatus, running.SetupJob)
	}
	for p, want := range map[string]string{"app/.env": secret, ".config/tool/key": "k"} {
		if got := readFile(t, filepath.Join(home, p)); got != want {
			t.Fatalf("~/%s: got %q, want %q", p, got, want)
		}
		if m := mode(t, filepath.Join(home, p)); m != 0o600 {
			t.Fatalf("~/%s: mode %o, want 600", p, m)
		}
	}
	if _, err := os.Stat(filepath.Join(home, ".froog/jobs", running.SetupJob, "pid")); err != nil {
		t.Fatalf("the setup job is not among the sandbox's jobs: %v", err)
	}
	if doc, _ := json.Marshal(running); bytes.Contains(doc, []byte("s3cr3t")) {
		t.Fatal("the sandbox's record holds the secret file's content")
	}
	if err := os.WriteFile(filepath.Join(home, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	done := r.waitSetup(sb.ID, store.SetupDone)
	if done.SetupError != "" {
		t.Fatalf("setup_error %q, want none", done.SetupError)
	}
	if got, want := readFile(t, filepath.Join(home, "marker")), home+"\nhello\nhi from the account\n"; got != want {
		t.Fatalf("~/marker: got %q, want %q (the script from ~, after the clone, with the account's variables)", got, want)
	}
	if _, err := os.Stat(filepath.Join(home, "app/.git")); err != nil {
		t.Fatalf("~/app is no checkout: %v", err)
	}
	if got := readFile(t, filepath.Join(home, "app/.env")); got != secret {
		t.Fatalf("~/app/.env after the clone: got %q, want the secret file", got)
	}
	out := readFile(t, filepath.Join(home, ".froog/jobs", done.SetupJob, "output"))
	if !strings.Contains(out, "froog setup: done") || strings.Contains(out, "s3cr3t") {
		t.Fatalf("the setup job's log: %q", out)
	}

	// The next start runs the setup again, with a job of its own; the
	// checkout is kept, not cloned again.
	r.setDesired(sb.ID, store.StateStopped)
	r.waitState(sb.ID, store.StateStopped)
	r.setDesired(sb.ID, store.StateRunning)
	r.waitState(sb.ID, store.StateRunning)
	again := r.waitSetup(sb.ID, store.SetupDone)
	if again.SetupJob == done.SetupJob {
		t.Fatal("the second start's setup has the first one's job")
	}
	out = readFile(t, filepath.Join(home, ".froog/jobs", again.SetupJob, "output"))
	if !strings.Contains(out, "~/app has a checkout already") || !strings.Contains(out, "froog setup: done") {
		t.Fatalf("the second setup's log: %q", out)
	}
	if got := readFile(t, filepath.Join(home, "marker")); strings.Count(got, "hi from the account") != 2 {
		t.Fatalf("~/marker after two starts: %q, want the script's lines twice", got)
	}

	// A fork's first start is a start too: its setup runs on its copy.
	fork := r.create("fork", func(s *store.Sandbox) { s.ForkOf = sb.ID })
	forked := r.waitSetup(fork.ID, store.SetupDone)
	fhome := r.drv.Home(&forked)
	if got := readFile(t, filepath.Join(fhome, "marker")); strings.Count(got, fhome+"\n") != 1 {
		t.Fatalf("the fork's ~/marker: %q, want one run from its own ~ (%s)", got, fhome)
	}
}

// TestSetupFails: a script that fails, a repo that does not clone, and a
// stop while the setup runs (the auto-stop, which the setup does not hold
// off) each leave failed, saying why.
func TestSetupFails(t *testing.T) {
	t.Parallel()
	url := testkit.BareRepo(t, "app")
	for _, tc := range []struct {
		name   string
		repos  []store.EnvRepo
		script string
		stop   bool
		want   string
	}{
		{name: "script", repos: []store.EnvRepo{{URL: url}}, script: "echo doing; exit 3", want: "the setup script failed (exit 3)"},
		{name: "repo", repos: []store.EnvRepo{{URL: "file:///nonexistent/gone.git"}}, script: "touch ~/ran",
			want: "the repo file:///nonexistent/gone.git did not clone into ~/gone (exit 128)"},
		{name: "stopped", script: "sleep 600", stop: true, want: "stopped mid-setup"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newSetupRig(t, false)
			r.environment(nil, tc.repos, tc.script, nil)
			sb := r.create("box", func(s *store.Sandbox) {
				if tc.stop {
					s.TTLSecs = 1 // auto-stop: the setup does not hold it off
				}
			})
			running := r.waitState(sb.ID, store.StateRunning)
			if tc.stop {
				r.waitState(sb.ID, store.StateStopped)
			}
			got := r.waitSetup(sb.ID, store.SetupFailed)
			if got.SetupError != tc.want {
				t.Fatalf("setup_error %q, want %q", got.SetupError, tc.want)
			}
			if _, err := os.Stat(filepath.Join(r.drv.Home(&running), "ran")); err == nil {
				t.Fatal("the script ran after a repo failed to clone")
			}
		})
	}
}

// TestSetupNone: a sandbox made with environment: false gets none of the
// account's environment (setup_status none, no file); one whose host has
// no secret key gets failed, saying so, and no file either.
func TestSetupNone(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		noKey     bool
		noEnv     bool
		status    string
		errorHas  string
		wantFiles bool
	}{
		{name: "environment false", noEnv: true, status: ""},
		{name: "no key", noKey: true, status: store.SetupFailed, errorHas: "this host has no key for the account's environment"},
		{name: "files only", status: store.SetupDone, wantFiles: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newSetupRig(t, tc.noKey)
			r.environment(map[string]string{".npmrc": "token"}, nil, "", nil)
			sb := r.create("box", func(s *store.Sandbox) { s.NoEnvironment = tc.noEnv })
			got := r.waitState(sb.ID, store.StateRunning)
			if got.SetupStatus != tc.status || !strings.Contains(got.SetupError, tc.errorHas) || (tc.errorHas == "") != (got.SetupError == "") {
				t.Fatalf("setup_status %q, setup_error %q; want %q with %q", got.SetupStatus, got.SetupError, tc.status, tc.errorHas)
			}
			_, err := os.Stat(filepath.Join(r.drv.Home(&got), ".npmrc"))
			if (err == nil) != tc.wantFiles {
				t.Fatalf("~/.npmrc: %v, want it written: %v", err, tc.wantFiles)
			}
		})
	}
}

// TestSetupFileNotWritten: a secret file that cannot be written (a folder
// is in its place) fails the setup, naming the file but not its content,
// and the sandbox runs all the same.
func TestSetupFileNotWritten(t *testing.T) {
	t.Parallel()
	r := newSetupRig(t, false)
	sb := r.create("box", nil)
	running := r.waitState(sb.ID, store.StateRunning)
	if running.SetupStatus != "" {
		t.Fatalf("setup_status %q with no environment, want none", running.SetupStatus)
	}
	r.setDesired(sb.ID, store.StateStopped)
	r.waitState(sb.ID, store.StateStopped)
	if err := os.MkdirAll(filepath.Join(r.drv.Home(&running), ".npmrc"), 0o700); err != nil {
		t.Fatal(err)
	}
	r.environment(map[string]string{".npmrc": "npm-token-value"}, nil, "true", nil)
	r.setDesired(sb.ID, store.StateRunning)
	got := r.waitState(sb.ID, store.StateRunning)
	if want := "the secret file .npmrc was not written: exit 1: a folder is in its place"; got.SetupStatus != store.SetupFailed || got.SetupError != want {
		t.Fatalf("setup_status %q, setup_error %q; want failed, %q", got.SetupStatus, got.SetupError, want)
	}
}
