package e2e_test

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// `froogd env-example` writes each role's environment file from its
// flags: every flag of `froogd ROLE -h` is in it, and a setting the role
// does not have, or a role that does not exist, is refused with nothing
// written.
func TestEnvExample(t *testing.T) {
	t.Parallel()
	flagRE := regexp.MustCompile(`(?m)^  -([a-z0-9-]+)`)
	for _, role := range []string{"edge", "api", "hostctl", "migrate"} {
		help, _ := exec.Command(froogd, role, "-h").CombinedOutput()
		out, err := exec.Command(froogd, "env-example", role).Output()
		if err != nil {
			t.Fatalf("env-example %s: %v", role, err)
		}
		flags := flagRE.FindAllStringSubmatch(string(help), -1)
		if len(flags) == 0 {
			t.Fatalf("froogd %s -h: no flags in %q", role, help)
		}
		for _, f := range flags {
			v := "FROOG_" + strings.ToUpper(strings.ReplaceAll(f[1], "-", "_"))
			if !regexp.MustCompile(`(?m)^(#?` + v + `=|# ` + v + `: set in /etc/froog/froog.env$)`).Match(out) {
				t.Errorf("env-example %s lacks %s", role, v)
			}
		}
	}
	out, err := exec.Command(froogd, "env-example", "edge", "FROOG_EDGE_ADDR=:443").Output()
	if err != nil || !strings.Contains(string(out), "\nFROOG_EDGE_ADDR=:443\n") {
		t.Errorf("a setting given is set: %v\n%s", err, out)
	}
	for _, args := range [][]string{
		{"env-example"},
		{"env-example", "nope"},
		{"env-example", "api", "FROOG_EDGE_ADDR=:443"}, // the API has no such flag
		{"env-example", "edge", "EDGE_ADDR=:443"},
		{"env-example", "edge", "FROOG_EDGE_ADDR"},
	} {
		cmd := exec.Command(froogd, args...)
		var stdout strings.Builder
		cmd.Stdout = &stdout
		if err := cmd.Run(); err == nil || stdout.Len() > 0 {
			t.Errorf("froogd %v: %v, wrote %d bytes; want an error and nothing written", args, err, stdout.Len())
		}
	}
}
