package e2e_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// froog env and froog environment, through froogd dev: values go in on
// stdin or as an argument, come back only masked, and reach commands in a
// sandbox started afterwards, not in one made with --no-environment.
func TestCLIEnvironment(t *testing.T) {
	t.Parallel()
	d := startDev(t, devOptions{})
	froog := newCLI(t)
	froog.login(t, d)
	const secret = "sk-test-0123456789-secret"
	if out, errOut, code := froog.run(t, secret+"\n", "env", "set", "API_TOKEN"); code != 0 || !strings.Contains(out, "API_TOKEN set (sk-t…)") {
		t.Fatalf("env set from stdin: exit %d: %s%s", code, out, errOut)
	}
	froog.ok(t, "env", "set", "GREETING", "hi there")
	if _, errOut, code := froog.run(t, "", "env", "set", "1BAD", "x"); code != 1 || !strings.Contains(errOut, "400 invalid_value") {
		t.Fatalf("env set of a bad name: exit %d: %s", code, errOut)
	}
	list := froog.ok(t, "env", "list")
	if !strings.Contains(list, "API_TOKEN") || !strings.Contains(list, "GREETING") || strings.Contains(list, secret) || strings.Contains(list, "hi there") {
		t.Fatalf("env list: %s", list)
	}

	froog.ok(t, "new", "box")
	froog.ok(t, "new", "bare", "--no-environment")
	cmd := `printf '%s|%s' "${API_TOKEN-unset}" "${GREETING-unset}"`
	if out := froog.ok(t, "exec", "box", "--", cmd); out != secret+"|hi there" {
		t.Fatalf("exec in box: %q", out)
	}
	if out := froog.ok(t, "exec", "bare", "--", cmd); out != "unset|unset" {
		t.Fatalf("exec in a --no-environment sandbox: %q", out)
	}
	froog.ok(t, "env", "rm", "GREETING")
	if _, errOut, code := froog.run(t, "", "env", "rm", "GREETING"); code != 1 || !strings.Contains(errOut, "404") {
		t.Fatalf("env rm of a removed variable: exit %d: %s", code, errOut)
	}

	local := filepath.Join(t.TempDir(), "dotenv")
	if err := os.WriteFile(local, []byte("DB=file-secret-content\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	froog.ok(t, "environment", "add-repo", "https://github.com/you/app#main")
	froog.ok(t, "environment", "add-file", "app/.env", local)
	if _, _, code := froog.run(t, "registry=x\n", "environment", "add-file", ".npmrc"); code != 0 {
		t.Fatal("add-file from stdin failed")
	}
	if _, _, code := froog.run(t, "cd ~/app && npm ci\n", "environment", "setup", "-"); code != 0 {
		t.Fatal("setup - failed")
	}
	show := froog.ok(t, "environment", "show")
	for _, want := range []string{"https://github.com/you/app#main", "app/.env (23 bytes)", ".npmrc (11 bytes)", "cd ~/app && npm ci"} {
		if !strings.Contains(show, want) {
			t.Fatalf("environment show lacks %q: %s", want, show)
		}
	}
	if strings.Contains(show, "file-secret-content") {
		t.Fatalf("environment show has a file's content: %s", show)
	}
	if _, errOut, code := froog.run(t, "", "environment", "add-repo", "https://ghp_token@github.com/you/other"); code != 1 || !strings.Contains(errOut, "credentials") {
		t.Fatalf("add-repo with a token: exit %d: %s", code, errOut)
	}
	froog.ok(t, "environment", "rm-file", "app/.env")
	froog.ok(t, "environment", "rm-repo", "https://github.com/you/app")
	froog.ok(t, "environment", "setup", "--clear")
	if show := froog.ok(t, "environment", "show"); show != "repos:\nfiles:\n  .npmrc (11 bytes)\nsetup: none" {
		t.Fatalf("environment show after removals: %q", show)
	}
}
