package e2e_test

import (
	"encoding/json"
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
