package hostctl_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"froog.tech/froog/hostctl"
	"froog.tech/froog/hostctl/local"
	"froog.tech/froog/internal/seal"
	"froog.tech/froog/internal/syncbuf"
	"froog.tech/froog/internal/testkit"
	"froog.tech/froog/internal/testkit/live"
	"froog.tech/froog/store"
)

// firstBoot seals files (path → content) and a script to sb, as the API
// does at a create.
func (r *setupRig) firstBoot(sb *store.Sandbox, files [][2]string, script string) {
	fb := &store.FirstBoot{}
	for _, f := range files {
		sb.OwnFiles = append(sb.OwnFiles, f[0])
		fb.Files = append(fb.Files, store.EnvFile{Path: f[0], Sealed: r.sealer.Seal([]byte(f[1]), seal.SandboxFileAD(sb.ID, f[0])), Size: len(f[1])})
	}
	if script != "" {
		fb.SetupSealed, fb.SetupSize = r.sealer.Seal([]byte(script), seal.SandboxSetupAD(sb.ID)), len(script)
	}
	sb.FirstBoot = fb
}

// TestFirstBootOnce: a create's own files are written after the
// account's secret files (the own one wins at the same path, mode 600),
// its repo is cloned first by the setup job (into its dir), and its
// script runs after the account's; all of it at the first start only:
// the record forgets the files and script, and a second start (or a
// fork's first) writes and runs nothing of it again, nor the account's
// secret file over the sandbox's own. No log line holds a content.
func TestFirstBootOnce(t *testing.T) {
	t.Parallel()
	drv, signer := live.Driver(t, local.Options{})
	key := bytes.Repeat([]byte{0x5e}, seal.KeySize)
	sl, err := seal.New(key)
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncbuf.Buffer{}
	o := hostctl.Options{ControlKey: signer, SecretKey: key, SetupPoll: 100 * time.Millisecond,
		Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	r := &setupRig{rig: newRig(t, drv, o), drv: drv, sealer: sl}

	url := testkit.BareRepo(t, "app")
	const own = "TOKEN=own-s3cr3t\n"
	r.environment(map[string]string{"app/.env": "TOKEN=account\n"}, nil, "echo account >> ~/order\n", nil)
	sb := r.create("box", func(s *store.Sandbox) {
		s.ID = store.NewID("sbx")
		s.Repo = &store.SandboxRepo{URL: url, Branch: "main", Dir: "src/app"}
		r.firstBoot(s, [][2]string{{"app/.env", own}, {"notes/todo", "one-off"}},
			"echo once >> ~/order; cat src/app/README >> ~/order; cat app/.env >> ~/order\n")
	})
	running := r.waitState(sb.ID, store.StateRunning)
	home := r.drv.Home(&running)
	for p, want := range map[string]string{"app/.env": own, "notes/todo": "one-off"} {
		if got := readFile(t, filepath.Join(home, p)); got != want {
			t.Fatalf("~/%s: got %q, want %q (the sandbox's own file, after the account's)", p, got, want)
		}
		if m := mode(t, filepath.Join(home, p)); m != 0o600 {
			t.Fatalf("~/%s: mode %o, want 600", p, m)
		}
	}
	if running.FirstBoot != nil {
		t.Fatal("the running sandbox's record still holds its first boot's files and script")
	}
	if running.Repo == nil || running.Repo.Dir != "src/app" {
		t.Fatalf("the running sandbox's repo: %+v, want it kept (it is shown)", running.Repo)
	}
	done := r.waitSetup(sb.ID, store.SetupDone)
	if got, want := readFile(t, filepath.Join(home, "order")), "account\nonce\nhello\n"+own; got != want {
		t.Fatalf("~/order: got %q, want %q (the account's script, then the sandbox's, after its repo's clone)", got, want)
	}
	out := readFile(t, filepath.Join(home, ".froog/jobs", done.SetupJob, "output"))
	if !strings.Contains(out, "cloning "+url+" into ~/src/app") {
		t.Fatalf("the first setup's log does not clone the sandbox's repo: %q", out)
	}
	if _, err := os.Stat(filepath.Join(home, ".froog/setup/once")); !os.IsNotExist(err) {
		t.Fatalf("the one-off script is still on the disk after it ran: %v", err)
	}

	// The second start: the account's environment again, none of the
	// sandbox's first boot (a changed file stays as the user left it).
	if err := os.WriteFile(filepath.Join(home, "notes/todo"), []byte("edited"), 0o600); err != nil {
		t.Fatal(err)
	}
	r.setDesired(sb.ID, store.StateStopped)
	r.waitState(sb.ID, store.StateStopped)
	r.setDesired(sb.ID, store.StateRunning)
	r.waitState(sb.ID, store.StateRunning)
	again := r.waitSetup(sb.ID, store.SetupDone)
	if again.SetupJob == done.SetupJob {
		t.Fatal("the second start's setup has the first one's job")
	}
	if got, want := readFile(t, filepath.Join(home, "order")), "account\nonce\nhello\n"+own+"account\n"; got != want {
		t.Fatalf("~/order after two starts: got %q, want %q (the one-off script once)", got, want)
	}
	if got := readFile(t, filepath.Join(home, "notes/todo")); got != "edited" {
		t.Fatalf("~/notes/todo after the second start: %q, want the user's edit kept", got)
	}
	if got := readFile(t, filepath.Join(home, "app/.env")); got != own {
		t.Fatalf("~/app/.env after the second start: %q, want the sandbox's own file, not the account's over it", got)
	}
	out = readFile(t, filepath.Join(home, ".froog/jobs", again.SetupJob, "output"))
	if strings.Contains(out, "src/app") || strings.Contains(out, "one-off") {
		t.Fatalf("the second setup clones the sandbox's repo or runs its script again: %q", out)
	}
	fork := r.create("fork", func(s *store.Sandbox) { s.ForkOf, s.OwnFiles = sb.ID, again.OwnFiles })
	forked := r.waitSetup(fork.ID, store.SetupDone)
	fhome := r.drv.Home(&forked)
	if got, want := readFile(t, filepath.Join(fhome, "order")), "account\nonce\nhello\n"+own+"account\naccount\n"; got != want {
		t.Fatalf("the fork's ~/order: got %q, want %q (its disk's, then the account's script alone)", got, want)
	}
	if got := readFile(t, filepath.Join(fhome, "app/.env")); got != own {
		t.Fatalf("the fork's ~/app/.env: %q, want its source's own file kept", got)
	}
	if doc, _ := json.Marshal(again); bytes.Contains(doc, []byte("s3cr3t")) {
		t.Fatal("the sandbox's record holds a file's content")
	}
	if strings.Contains(logs.String(), "s3cr3t") || strings.Contains(logs.String(), "one-off") {
		t.Fatalf("a log line holds a file's content:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "sandbox running") {
		t.Fatal("the controller logged nothing: the log check measures nothing")
	}
}

// TestFirstBootNoEnvironment: environment: false leaves out the
// account's files and script, and still applies the sandbox's own
// files, repo (cloned into its folder) and script.
func TestFirstBootNoEnvironment(t *testing.T) {
	t.Parallel()
	r := newSetupRig(t, false)
	url := testkit.BareRepo(t, "app")
	r.environment(map[string]string{".npmrc": "account-token"}, nil, "touch ~/account-ran\n", nil)
	sb := r.create("box", func(s *store.Sandbox) {
		s.ID, s.NoEnvironment = store.NewID("sbx"), true
		s.Repo = &store.SandboxRepo{URL: url, Dir: "app"}
		r.firstBoot(s, [][2]string{{"app/.env", "mine"}}, "touch ~/once-ran\n")
	})
	done := r.waitSetup(sb.ID, store.SetupDone)
	home := r.drv.Home(&done)
	for _, p := range []string{"app/.git", "app/.env", "once-ran"} {
		if _, err := os.Stat(filepath.Join(home, p)); err != nil {
			t.Fatalf("~/%s: %v, want the sandbox's own first boot applied without the environment", p, err)
		}
	}
	if got := readFile(t, filepath.Join(home, "app/.env")); got != "mine" {
		t.Fatalf("~/app/.env after the clone around it: %q, want the sandbox's file", got)
	}
	for _, p := range []string{".npmrc", "account-ran"} {
		if _, err := os.Stat(filepath.Join(home, p)); err == nil {
			t.Fatalf("~/%s exists: the account's environment reached a sandbox made without it", p)
		}
	}
}
