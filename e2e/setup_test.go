package e2e_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"froog.tech/froog/internal/testkit"
	"froog.tech/froog/internal/wait"
)

// The account's environment at a start, through froogd dev: a repo, a
// setup script and secret files set over the API are in a sandbox
// created afterwards — the files mode 600 before it runs, the repo
// cloned around the secret file in its folder, the script run from ~ —
// and setup_status goes to done, the setup's job listed with its log.
// The repo is a bare one on this machine: the API takes https URLs only,
// so a secret .gitconfig sends the https URL to it (git's insteadOf),
// which also shows the files are written before the clone.
func TestEnvironmentSetup(t *testing.T) {
	t.Parallel()
	origin := testkit.BareRepo(t, "app")
	d := startDev(t, devOptions{})
	c := d.c
	const url = "https://git.example/you/app"
	const secret = "DB_PASSWORD=setup-e2e-secret-value\n"
	put := func(path, content string) {
		body, _ := json.Marshal(map[string]string{"path": path, "content": content})
		c.call("PUT", "/v1/environment/files", string(body), 200, nil)
	}
	put(".gitconfig", "[url \""+origin+"\"]\n\tinsteadOf = "+url+"\n")
	put("app/.env", secret)
	script := "cp app/README from-setup && pwd >> from-setup\n"
	body, _ := json.Marshal(map[string]any{"repos": []map[string]string{{"url": url, "branch": "main"}}, "setup": script})
	c.call("PATCH", "/v1/environment", string(body), 200, nil)

	c.call("POST", "/v1/sandboxes", `{"name": "box"}`, 202, nil)
	runsWithin(t, c, "box", 15*time.Second)
	var sb struct {
		SetupStatus string `json:"setup_status"`
		SetupError  string `json:"setup_error"`
	}
	c.call("GET", "/v1/sandboxes/box", "", 200, &sb)
	if sb.SetupStatus != "running" && sb.SetupStatus != "done" {
		t.Fatalf("a running sandbox's setup_status %q (%s), want running or done", sb.SetupStatus, sb.SetupError)
	}
	if !wait.Until(15*time.Second, func() bool {
		c.call("GET", "/v1/sandboxes/box", "", 200, &sb)
		return sb.SetupStatus != "running"
	}) || sb.SetupStatus != "done" {
		t.Fatalf("setup_status %q, setup_error %q; want done", sb.SetupStatus, sb.SetupError)
	}

	var res struct {
		ExitCode int    `json:"exit_code"`
		Stdout   string `json:"stdout"`
		Stderr   string `json:"stderr"`
	}
	c.call("POST", "/v1/sandboxes/box/exec",
		`{"command": "stat -c %a app/.env .gitconfig && cat app/.env && test -d app/.git && cat from-setup && pwd"}`, 200, &res)
	lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
	if res.ExitCode != 0 || len(lines) != 6 {
		t.Fatalf("exec: exit %d: %q %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	home := lines[5]
	if want := []string{"600", "600", strings.TrimSpace(secret), "hello", home}; strings.Join(lines[:5], "|") != strings.Join(want, "|") {
		t.Fatalf("in the sandbox: got %q, want modes 600, the secret file kept, the repo's README copied by the script run from ~ (%s)", lines[:5], home)
	}

	var jobs []struct {
		ID, Command, State string
		ExitCode           *int `json:"exit_code"`
	}
	c.call("GET", "/v1/sandboxes/box/jobs", "", 200, &jobs)
	if len(jobs) != 1 || !strings.Contains(jobs[0].Command, "froog setup") || jobs[0].State != "exited" || jobs[0].ExitCode == nil || *jobs[0].ExitCode != 0 {
		t.Fatalf("jobs: %+v, want the setup's, exited 0", jobs)
	}
	var log struct{ Output string }
	c.call("GET", "/v1/sandboxes/box/jobs/"+jobs[0].ID, "", 200, &log)
	if !strings.Contains(log.Output, "froog setup: done") || strings.Contains(log.Output, "setup-e2e-secret") {
		t.Fatalf("the setup's log: %q", log.Output)
	}
	if strings.Contains(d.p.stderr.String(), "setup-e2e-secret") {
		t.Fatal("froogd logged a secret file's content")
	}
}

// A sandbox's own first boot through the real froog and froogd dev:
// froog new --file (twice), --repo with --repo-dir and --setup-file,
// with --no-environment (the account's setup is left out, the sandbox's
// own applied all the same). The files are in ~ (mode 600) before it
// runs, the repo is cloned into its folder (through a .gitconfig sent
// with --file, so the files come before the clone), the script runs
// once, after the first boot: a stop and a start run it no more. The
// repo shows in froog info; no file's content does, nor any log line.
func TestCLIFirstBoot(t *testing.T) {
	t.Parallel()
	origin := testkit.BareRepo(t, "app")
	d := startDev(t, devOptions{})
	c := d.c
	froog := newCLI(t)
	froog.login(t, d)
	c.call("PATCH", "/v1/environment", `{"setup": "touch ~/account-setup-ran"}`, 200, nil)
	const url = "https://git.example/you/app"
	const secret = "OWN_TOKEN=first-boot-e2e-secret"
	dir := t.TempDir()
	local := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	gitconfig := local("gitconfig", "[url \""+origin+"\"]\n\tinsteadOf = "+url+"\n")
	dotenv := local("dotenv", secret+"\n")
	setup := local("setup.sh", "cat app/.env >> from-once && cat src/app/README >> from-once\n")

	if _, errOut, code := froog.run(t, "", "new", "bad", "--repo", "https://ghp_token123@github.com/you/app"); code != 1 || !strings.Contains(errOut, "400 invalid_value") {
		t.Fatalf("new with a token in --repo: exit %d: %s", code, errOut)
	}
	froog.ok(t, "new", "box", "--no-environment", "--file", ".gitconfig="+gitconfig, "--file", "app/.env="+dotenv,
		"--repo", url+"#main", "--repo-dir", "src/app", "--setup-file", setup)
	var sb struct {
		SetupStatus string `json:"setup_status"`
		SetupError  string `json:"setup_error"`
	}
	setupEnds := func(want string) {
		t.Helper()
		if !wait.Until(15*time.Second, func() bool {
			c.call("GET", "/v1/sandboxes/box", "", 200, &sb)
			return sb.SetupStatus != "running"
		}) || sb.SetupStatus != want {
			t.Fatalf("setup_status %q, setup_error %q; want %s", sb.SetupStatus, sb.SetupError, want)
		}
	}
	setupEnds("done")
	check := "stat -c %a app/.env .gitconfig && cat from-once && test -d src/app/.git && test ! -e account-setup-ran && echo ok"
	want := "600\n600\n" + secret + "\nhello\nok"
	if out := froog.ok(t, "exec", "box", "--", check); out != want {
		t.Fatalf("in the sandbox after its first boot: %q, want %q", out, want)
	}
	info := froog.ok(t, "info", "box", "--json")
	if !strings.Contains(info, url) || !strings.Contains(info, "src/app") || strings.Contains(info, "first-boot-e2e") {
		t.Fatalf("froog info: %s, want the repo and no file content", info)
	}

	froog.ok(t, "stop", "box")
	froog.ok(t, "start", "box")
	runsWithin(t, c, "box", 15*time.Second)
	setupEnds("none") // nothing of its own left to do, and no environment
	if out := froog.ok(t, "exec", "box", "--", check); out != want {
		t.Fatalf("after a second start: %q, want %q (the script ran once)", out, want)
	}
	if strings.Contains(d.p.stderr.String(), "first-boot-e2e") {
		t.Fatal("froogd logged a file's content")
	}
}
